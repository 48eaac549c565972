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
           "numpy_rng"]

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


def mqar(key, n: int, seq_len: int, n_pairs: int, n_keys: int = 32) -> dict:
    """Multi-query associative recall.

    Positions ``0..2 n_pairs - 1`` hold ``k_1 v_1 ... k_m v_m`` (distinct keys drawn from
    ``n_keys``, values drawn with replacement); each key is then queried once, in random
    order, at distinct random positions among the remaining ones (filler 0 elsewhere).
    ``label`` is the key's value at its query position and ``-1`` elsewhere.
    Returns ``tokens`` ``(n, seq_len)`` int32 and ``label`` ``(n, seq_len)`` int32.
    """
    if n_pairs > n_keys or 3 * n_pairs > seq_len:
        raise ValueError(f"n_pairs: need n_pairs <= n_keys and 3 n_pairs <= seq_len, got "
                         f"n_pairs={n_pairs}, n_keys={n_keys}, seq_len={seq_len}.")
    toks, lab = _mqar_arrays(key, int(n), int(seq_len), int(n_pairs), int(n_keys))
    return {"tokens": np.asarray(toks, np.int32), "label": np.asarray(lab, np.int32)}


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _mqar_arrays(key, n, seq_len, n_pairs, n_keys):
    """The arrays of :func:`mqar`, in one compiled program (op-by-op eager ``vmap`` spends
    seconds compiling each random primitive)."""
    kk, kv, kq = jax.random.split(key, 3)

    def one(k1, k2, k3):
        keys = (jax.random.permutation(k1, n_keys)[:n_pairs] + 1).astype(jnp.int32)
        vals = jax.random.randint(k2, (n_pairs,), 0, n_keys, jnp.int32) + n_keys + 1
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
