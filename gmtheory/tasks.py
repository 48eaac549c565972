"""Sequence tasks generated locally and seeded (issue 14): no downloads.

Every generator takes an explicit ``jax.random`` key; the Python-level generators
(ListOps) seed a NumPy ``Generator`` from that key's data, so the same key gives the same
examples.  Token id 0 is padding / filler everywhere; labels ``-1`` mark positions
without a target.

* :func:`listops` — ListOps following the Long Range Arena generator's rules (Nangia &
  Bowman; Tay et al. 2021): operators MIN, MAX, MED (``int(median)``), SM (sum mod 10) on
  digits 0-9, depth <= ``max_depth`` (10), 2..``max_args`` (10) arguments, a leaf with
  probability 0.75 below the maximum depth, trees kept when ``min_len < length <
  max_len``; the brackets ``(`` ``)`` of LRA's text are dropped, as LRA's tokenizer does.
  The label is the value of the expression (10 classes).
* :func:`mqar` — multi-query associative recall (Arora et al. 2024, Zoology): ``n_pairs``
  key-value pairs, then each key queried once at a random later position (filler 0
  elsewhere); the target at a query position is that key's value.  Causal.
* :func:`selective_copy` — selective copying (Gu & Dao 2023): ``n_data`` data tokens at
  random positions among ``seq_len`` blanks, then ``n_data`` markers at which the data
  tokens must be emitted in order.  Causal.
* :func:`gmm_icl` — in-context Gaussian-mixture classification from
  :class:`gmtheory.GaussianMixture`: ``L`` labelled points and one query; each cluster
  carries a label, permuted per prompt.  Case ``"A"``: the cluster means are fixed across
  prompts; case ``"B"``: they are redrawn per prompt.
* :func:`stdlib_corpus` — bytes of the Python standard library's own ``.py`` sources
  shipped with the running interpreter, with a fixed, name-hashed validation split.
"""

from __future__ import annotations

import functools
import hashlib
import statistics
import sys
import sysconfig
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .mixture import GaussianMixture

__all__ = ["LISTOPS_VOCAB", "LISTOPS_OPS", "listops", "listops_tree", "listops_tokens",
           "listops_value", "mqar", "mqar_vocab", "selective_copy", "gmm_icl",
           "gmm_fixed_means", "gmm_token_dim", "stdlib_corpus", "stdlib_corpus_identity",
           "numpy_rng", "mqar_frequent_value", "listops_root_rule", "ngram_bits_per_byte"]

# ---------------------------------------------------------------------------- ListOps
LISTOPS_OPS = ("[MIN", "[MAX", "[MED", "[SM")
LISTOPS_VOCAB = ("<pad>",) + tuple(str(i) for i in range(10)) + LISTOPS_OPS + ("]",)
_TOK = {t: i for i, t in enumerate(LISTOPS_VOCAB)}
VALUE_P = 0.25  # LRA: an operator node with probability 0.25 below max_depth


def numpy_rng(key) -> np.random.Generator:
    """A NumPy generator seeded by the data of a ``jax.random`` key."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def listops_tree(rng: np.random.Generator, depth: int = 1, max_depth: int = 10,
                 max_args: int = 10, max_length: int | None = None):
    """One random tree by the LRA rules: ``(tree, length)``; a tree is an int (leaf) or
    ``(op, [children])``; ``length`` counts op, leaf and ``]`` tokens.

    ``max_length``: stop drawing as soon as the tree reaches that many tokens and return
    ``(None, length so far)`` (a tree that :func:`listops` would reject anyway; the trees
    it keeps have the same distribution, and drawing is many times faster for short
    sequences).
    """
    r = rng.random() if depth < max_depth else 1.0
    if r > VALUE_P:
        return int(rng.integers(10)), 1
    n_args = int(rng.integers(2, max_args + 1))
    kids, length = [], 2
    for _ in range(n_args):
        budget = None if max_length is None else max_length - length
        t, n = listops_tree(rng, depth + 1, max_depth, max_args, budget)
        length += n
        if t is None or (max_length is not None and length >= max_length):
            return None, length
        kids.append(t)
    return (LISTOPS_OPS[int(rng.integers(len(LISTOPS_OPS)))], kids), length


def listops_value(tree) -> int:
    """The value of a tree (MED is ``int(median)`` as in LRA, SM is the sum mod 10)."""
    if isinstance(tree, int):
        return tree
    op, kids = tree
    vals = [listops_value(k) for k in kids]
    if op == "[MIN":
        return min(vals)
    if op == "[MAX":
        return max(vals)
    if op == "[MED":
        return int(statistics.median(vals))
    return sum(vals) % 10


def listops_tokens(tree) -> list[int]:
    """Token ids of a tree in prefix order: ``[OP a b ... ]``."""
    if isinstance(tree, int):
        return [_TOK[str(tree)]]
    op, kids = tree
    out = [_TOK[op]]
    for k in kids:
        out += listops_tokens(k)
    return out + [_TOK["]"]]


def listops(key, n: int, max_len: int, *, min_len: int | None = None, max_depth: int = 10,
            max_args: int = 10) -> dict:
    """``n`` ListOps examples with ``min_len < length < max_len`` (default ``min_len =
    max_len // 4``), padded with 0 to ``max_len``.

    Returns ``tokens`` ``(n, max_len)`` int32, ``mask`` bool, ``label`` ``(n,)`` int32
    and ``length`` ``(n,)``.
    """
    rng = numpy_rng(key)
    min_len = max_len // 4 if min_len is None else int(min_len)
    if not 0 <= min_len < max_len - 1:
        raise ValueError(f"min_len, max_len: need 0 <= min_len < max_len - 1, got {min_len}, "
                         f"{max_len}.")
    toks = np.zeros((n, max_len), np.int32)
    labels = np.zeros(n, np.int32)
    lengths = np.zeros(n, np.int32)
    i = 0
    while i < n:
        tree, length = listops_tree(rng, 1, max_depth, max_args, max_len)
        if tree is None or not min_len < length < max_len:
            continue
        t = listops_tokens(tree)
        toks[i, :length] = t
        labels[i] = listops_value(tree)
        lengths[i] = length
        i += 1
    return {"tokens": toks, "mask": toks > 0, "label": labels, "length": lengths}


# ------------------------------------------------------------------------------- MQAR
def mqar_vocab(n_keys: int) -> int:
    """Vocabulary size of :func:`mqar`: filler 0, keys ``1..n_keys``, values
    ``n_keys + 1 .. 2 n_keys``."""
    return 1 + 2 * n_keys


def mqar(key, n: int, seq_len: int, n_pairs: int, n_keys: int = 32, *,
         vocab: int | None = None, distinct_values: bool = False) -> dict:
    """Multi-query associative recall.

    Positions ``0..2 n_pairs - 1`` hold ``k_1 v_1 ... k_m v_m`` (distinct keys drawn from
    ``n_keys``, values drawn with replacement, or without it with ``distinct_values``, as
    in Zoology and Based: then no value repeats, so "predict the most frequent value in the
    context" is no better than a guess among the pairs); each key is then queried once, in
    random order, at distinct random positions among the remaining ones (filler 0
    elsewhere).
    ``label`` is the key's value at its query position and ``-1`` elsewhere.
    Returns ``tokens`` ``(n, seq_len)`` int32 and ``label`` ``(n, seq_len)`` int32.
    ``vocab``: the vocabulary of the model that will read the tokens; the task's ids
    (:func:`mqar_vocab`) must fit in it.
    """
    if min(n, seq_len, n_pairs, n_keys) < 1:
        raise ValueError(f"n, seq_len, n_pairs, n_keys: each must be >= 1, got {n}, "
                         f"{seq_len}, {n_pairs}, {n_keys}.")
    if vocab is not None and mqar_vocab(n_keys) > vocab:
        raise ValueError(f"n_keys: MQAR with n_keys = {n_keys} uses {mqar_vocab(n_keys)} "
                         f"token ids, more than vocab = {vocab}; use n_keys <= "
                         f"{(vocab - 1) // 2} or a larger vocabulary.")
    if n_pairs > n_keys or 3 * n_pairs > seq_len:
        raise ValueError(f"n_pairs: need n_pairs <= n_keys and 3 n_pairs <= seq_len, got "
                         f"n_pairs={n_pairs}, n_keys={n_keys}, seq_len={seq_len}.")
    toks, lab = _mqar_arrays(key, int(n), int(seq_len), int(n_pairs), int(n_keys),
                             bool(distinct_values))
    return {"tokens": np.asarray(toks, np.int32), "label": np.asarray(lab, np.int32)}


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _mqar_arrays(key, n, seq_len, n_pairs, n_keys, distinct_values=False):
    """The arrays of :func:`mqar`, in one compiled program (op-by-op eager ``vmap`` spends
    seconds compiling each random primitive)."""
    kk, kv, kq = jax.random.split(key, 3)

    def one(k1, k2, k3):
        keys = (jax.random.permutation(k1, n_keys)[:n_pairs] + 1).astype(jnp.int32)
        if distinct_values:
            vals = jax.random.permutation(k2, n_keys)[:n_pairs].astype(jnp.int32)
        else:
            vals = jax.random.randint(k2, (n_pairs,), 0, n_keys, jnp.int32)
        vals = vals + n_keys + 1
        ctx = jnp.stack([keys, vals], 1).reshape(-1)
        ka, kb = jax.random.split(k3)
        rest = 2 * n_pairs + jax.random.permutation(ka, seq_len - 2 * n_pairs)[:n_pairs]
        order = jax.random.permutation(kb, n_pairs)
        toks = jnp.zeros(seq_len, jnp.int32).at[: 2 * n_pairs].set(ctx)
        toks = toks.at[rest].set(keys[order])
        lab = jnp.full(seq_len, -1, jnp.int32).at[rest].set(vals[order])
        return toks, lab

    return jax.vmap(one)(jax.random.split(kk, n), jax.random.split(kv, n),
                         jax.random.split(kq, n))


# ------------------------------------------------------------------ selective copying
def selective_copy(key, n: int, seq_len: int, n_data: int, n_symbols: int = 8) -> dict:
    """Selective copying: ``seq_len`` positions holding ``n_data`` data tokens
    (``1..n_symbols``) at random sorted positions and blanks 0, then ``n_data`` marker
    tokens (``n_symbols + 1``); at the markers the labels are the data tokens in order.
    Vocabulary ``n_symbols + 2``.  Returns ``tokens``, ``label`` ``(n, seq_len + n_data)``.
    """
    if n_data > seq_len:
        raise ValueError(f"n_data: must be <= seq_len={seq_len}, got {n_data}.")
    marker = n_symbols + 1

    def one(k):
        k1, k2 = jax.random.split(k)
        pos = jnp.sort(jax.random.permutation(k1, seq_len)[:n_data])
        data = jax.random.randint(k2, (n_data,), 1, n_symbols + 1, jnp.int32)
        toks = jnp.zeros(seq_len + n_data, jnp.int32).at[pos].set(data)
        toks = toks.at[seq_len:].set(marker)
        lab = jnp.full(seq_len + n_data, -1, jnp.int32).at[seq_len:].set(data)
        return toks, lab

    toks, lab = jax.vmap(one)(jax.random.split(key, n))
    return {"tokens": np.asarray(toks, np.int32), "label": np.asarray(lab, np.int32)}


# --------------------------------------------------------- in-context GMM classification
def gmm_fixed_means(n_classes: int, d: int, sep: float, dtype=jnp.float64):
    """Case A's means: ``n_classes`` points at radius ``sep`` on a circle in the first two
    coordinates (``d >= 2``)."""
    ang = 2 * np.pi * np.arange(n_classes) / n_classes
    m = np.zeros((n_classes, d))
    m[:, 0], m[:, 1] = sep * np.cos(ang), sep * np.sin(ang)
    return jnp.asarray(m, dtype)


def gmm_token_dim(d: int, n_classes: int) -> int:
    """Token width of :func:`gmm_icl`: point, one-hot label, query flag."""
    return d + n_classes + 1


def gmm_icl(key, n: int, L: int, *, case: str = "A", d: int = 2, n_classes: int = 3,
            sep: float = 2.0, var: float = 0.25, dtype=jnp.float32) -> dict:
    """In-context classification of Gaussian-mixture points.

    Each prompt draws a label permutation ``perm`` (cluster ``k`` carries label
    ``perm[k]``) and, in case ``"B"`` (or ``case`` a true boolean, which may be traced),
    its own means ``~ N(0, sep^2 I)`` (case ``"A"``:
    :func:`gmm_fixed_means`).  ``L + 1`` points are drawn from the equal-weight mixture
    ``N(mean_k, var I)`` by :meth:`GaussianMixture.sample`; the first ``L`` become tokens
    ``(x, onehot(label), 0)`` and the last the query ``(x, 0, 1)``.

    Returns ``inputs`` ``(n, L + 1, d + C + 1)``, ``label`` ``(n,)`` (the query's label),
    ``component`` ``(n,)`` (its cluster), ``perm`` ``(n, C)`` and ``means`` ``(n, C, d)``.
    """
    if isinstance(case, str):
        if case not in ("A", "B"):
            raise ValueError(f"case: must be 'A' or 'B', got {case!r}.")
        redraw = case == "B"
    else:  # a boolean, possibly traced: one compiled program serves both cases
        redraw = jnp.asarray(case, bool)
    C = n_classes
    fixed = gmm_fixed_means(C, d, sep, dtype)
    w = jnp.full((C,), 1.0 / C, dtype)

    def one(k):
        kp, km, ks = jax.random.split(k, 3)
        perm = jax.random.permutation(kp, C)
        means = jnp.where(redraw, sep * jax.random.normal(km, (C, d), dtype), fixed)
        mix = GaussianMixture.isotropic(w, means, jnp.asarray(var, dtype))
        x, comp = mix.sample(ks, L + 1)
        lab = perm[comp]
        onehot = jax.nn.one_hot(lab, C, dtype=dtype) * (jnp.arange(L + 1) < L)[:, None]
        flag = (jnp.arange(L + 1) == L).astype(dtype)[:, None]
        return jnp.concatenate([x.astype(dtype), onehot, flag], 1), lab[-1], comp[-1], perm, \
            means

    inputs, lab, comp, perm, means = jax.vmap(one)(jax.random.split(key, n))
    return {"inputs": inputs, "label": lab.astype(jnp.int32), "component": comp,
            "perm": perm, "means": means}


# --------------------------------------------------------------------- byte-level corpus
def _stdlib_files(root: Path) -> list[Path]:
    """Top-level ``.py`` files of the standard library, sorted by name (no tests, no
    site-packages, no subpackages: a stable, interpreter-shipped set)."""
    return sorted(p for p in root.glob("*.py") if p.is_file())


def stdlib_corpus_identity(root: str | Path | None = None) -> dict:
    """Identity of the :func:`stdlib_corpus` files (each name with its size and SHA-256
    prefix): the corpus is the running interpreter's standard library, so it changes with
    the interpreter; a cache key that includes this misses when the corpus changes."""
    from .cache import files_identity

    root = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    return {"files": files_identity(_stdlib_files(root))}


def _is_validation(name: str, every: int) -> bool:
    """Fixed split: a file is held out when the SHA-256 of its name is 0 mod ``every``."""
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % every == 0


def stdlib_corpus(*, max_train_bytes: int | None = None, max_val_bytes: int | None = None,
                  val_every: int = 8, root: str | Path | None = None) -> dict:
    """Bytes of the Python standard library's top-level ``.py`` files.

    The split is fixed by file name (a file is held out for validation when the SHA-256
    of its name is divisible by ``val_every``), so it does not depend on a seed or on
    which other files exist.  Files are concatenated in sorted order, each followed by a
    NUL byte; ``max_*_bytes`` truncate the concatenations (the file lists record only the
    files used).  Returns ``train``, ``val`` (uint8 arrays), ``train_files``,
    ``val_files`` (names), ``python`` (the interpreter version) and ``root``.
    """
    root = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    files = _stdlib_files(root)
    if not files:
        raise ValueError(f"root: no .py files found in {root}.")
    parts: dict[str, list[bytes]] = {"train": [], "val": []}
    names: dict[str, list[str]] = {"train": [], "val": []}
    limits = {"train": max_train_bytes, "val": max_val_bytes}
    sizes = {"train": 0, "val": 0}
    for f in files:
        which = "val" if _is_validation(f.name, val_every) else "train"
        lim = limits[which]
        if lim is not None and sizes[which] >= lim:
            continue
        b = f.read_bytes() + b"\0"
        parts[which].append(b)
        names[which].append(f.name)
        sizes[which] += len(b)
    out = {}
    for which in ("train", "val"):
        buf = b"".join(parts[which])
        if limits[which] is not None:
            buf = buf[: limits[which]]
        out[which] = np.frombuffer(buf, np.uint8).copy()
        out[f"{which}_files"] = names[which]
    out["python"] = sys.version.split()[0]
    out["root"] = str(root)
    return out


# ------------------------------------------------------------------------ trivial rules
# What a rule that needs no recall or no token mixing scores on each task (issue 44): a
# learnt model means something only beside these.

def mqar_frequent_value(tokens, labels, n_keys: int) -> np.ndarray:
    """Per :func:`mqar` sequence, the accuracy of answering every query with the value
    token that occurs most often in the sequence (ties: the smallest id): a rule that
    recalls nothing but profits from values drawn with replacement.  ``tokens``,
    ``labels`` (n, L) as :func:`mqar` returns them; -> (n,) accuracies over each
    sequence's query positions (sequences without a query are dropped)."""
    tokens, labels = np.asarray(tokens), np.asarray(labels)
    if tokens.shape != labels.shape or tokens.ndim != 2:
        raise ValueError(f"tokens, labels: need two (n, L) arrays of one shape, got "
                         f"{tokens.shape} and {labels.shape}.")
    is_val = (tokens > n_keys) & (tokens <= 2 * n_keys)
    counts = np.stack([np.sum(is_val & (tokens == v), axis=1)
                       for v in range(n_keys + 1, 2 * n_keys + 1)], axis=1)
    guess = n_keys + 1 + np.argmax(counts, axis=1)            # first maximum: smallest id
    q = labels >= 0
    nq = q.sum(axis=1)
    hits = np.sum(q & (labels == guess[:, None]), axis=1)
    keep = nq > 0
    return hits[keep] / nq[keep]


def listops_root_rule(train_tokens, train_labels, test_tokens, test_labels) -> np.ndarray:
    """The accuracy, per test sequence (0 or 1), of predicting the training set's most
    frequent label for the sequence's root operator (its first token): no token mixing.
    ``*_tokens`` (n, L) from :func:`listops`; ``*_labels`` (n,) the values, or (n, L)
    per-position labels with -1 where there is none (one label per sequence)."""
    def flat(tok, lab):
        tok, lab = np.asarray(tok), np.asarray(lab)
        if lab.ndim == 2:
            if lab.shape != tok.shape or np.any(np.sum(lab >= 0, axis=1) != 1):
                raise ValueError("labels: per-position labels need one label >= 0 per "
                                 f"sequence and the tokens' shape {tok.shape}, got "
                                 f"{lab.shape}.")
            lab = lab.max(axis=1)
        if lab.shape != tok.shape[:1]:
            raise ValueError(f"labels: need one label per sequence ({tok.shape[0]}), got "
                             f"shape {lab.shape}.")
        return tok[:, 0], lab
    r_tr, y_tr = flat(train_tokens, train_labels)
    r_te, y_te = flat(test_tokens, test_labels)
    overall = np.bincount(y_tr, minlength=10).argmax()
    guess = {int(r): int(np.bincount(y_tr[r_tr == r], minlength=10).argmax())
             for r in np.unique(r_tr)}
    pred = np.array([guess.get(int(r), overall) for r in r_te])
    return (pred == y_te).astype(float)


def ngram_bits_per_byte(train, val, order: int, discount: float = 0.75) -> np.ndarray:
    """Bits per byte of an interpolated absolute-discounting n-gram model with ``order``
    bytes of context (0: unigram), counted on the bytes ``train`` and scored on every
    byte of ``val`` from position ``order`` on: ``P_k(b | c) = max(n(c b) - D, 0) / n(c)
    + D N1+(c) / n(c) P_{k-1}(b | c')``, down to the uniform law over 256 bytes (the
    context's count ``n(c) = 0`` falls back to ``P_{k-1}``).  A model of local structure
    only: a mixer scoring above it has learnt less than byte counts hold.  -> (len(val)
    - order,) bits of each scored byte (mean: the bits per byte; its SE, over bytes, is
    optimistic: neighbouring bytes correlate)."""
    if int(order) != order or not 0 <= order <= 6:
        raise ValueError(f"order: the context length must be an integer in 0..6, got "
                         f"{order!r}.")
    if not 0 < discount < 1:
        raise ValueError(f"discount: must lie in (0, 1), got {discount!r}.")
    tr = np.asarray(train, np.uint8).astype(np.int64)
    va = np.asarray(val, np.uint8).astype(np.int64)
    if tr.size <= order or va.size <= order:
        raise ValueError(f"train, val: need more than order={order} bytes each.")

    def keys(buf, k):         # context of k bytes before each position i >= order
        n = buf.size - order
        c = np.zeros(n, np.int64)
        for j in range(k):
            c = c * 256 + buf[order - k + j: order - k + j + n]
        return c, buf[order:]

    p = np.full(va.size - order, 1.0 / 256)
    for k in range(order + 1):
        ct, bt = keys(tr, k)
        full_u, full_n = np.unique(ct * 256 + bt, return_counts=True)
        ctx_u, ctx_n = np.unique(ct, return_counts=True)
        ctx_of_full = full_u // 256
        types_u, types_n = np.unique(ctx_of_full, return_counts=True)   # N1+(c)
        cv, bv = keys(va, k)
        i = np.clip(np.searchsorted(ctx_u, cv), 0, ctx_u.size - 1)
        seen = ctx_u[i] == cv
        n_c = np.where(seen, ctx_n[i], 0)
        f = cv * 256 + bv
        j = np.clip(np.searchsorted(full_u, f), 0, full_u.size - 1)
        n_cb = np.where(full_u[j] == f, full_n[j], 0)
        t = np.clip(np.searchsorted(types_u, cv), 0, types_u.size - 1)
        n1 = np.where(seen & (types_u[t] == cv), types_n[t], 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            mix = (np.maximum(n_cb - discount, 0) + discount * n1 * p) / n_c
        p = np.where(seen, mix, p)
    return -np.log2(p)
