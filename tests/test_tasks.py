"""The task generators of gmtheory.tasks: answers recomputed independently, determinism."""

import jax
import numpy as np
import pytest

from gmtheory import tasks


def _evaluate_tokens(tokens):
    """Independent ListOps evaluator: a stack machine over the token strings (not the
    generator's trees), with its own operator table."""
    names = [tasks.LISTOPS_VOCAB[t] for t in tokens if t != 0]
    ops = {"[MIN": min, "[MAX": max, "[SM": lambda v: sum(v) % 10,
           "[MED": lambda v: (sorted(v)[(len(v) - 1) // 2] + sorted(v)[len(v) // 2]) // 2}
    stack, depth, max_depth, max_args = [], 0, 0, 0
    for s in names:
        if s in ops:
            stack.append([s])
            depth += 1
            max_depth = max(max_depth, depth)
        elif s == "]":
            op, *args = stack.pop()
            depth -= 1
            assert 2 <= len(args), "an operator needs at least two arguments"
            max_args = max(max_args, len(args))
            val = ops[op](args)
            if stack:
                stack[-1].append(val)
            else:
                stack.append(val)
        else:
            val = int(s)
            if stack and isinstance(stack[-1], list):
                stack[-1].append(val)
            else:
                stack.append(val)
    assert len(stack) == 1 and isinstance(stack[0], int), "one complete expression"
    return stack[0], max_depth, max_args


def test_listops_answers_recomputed_independently():
    d = tasks.listops(jax.random.key(0), 200, 96, min_len=20)
    assert d["tokens"].shape == (200, 96)
    for toks, lab, n in zip(d["tokens"], d["label"], d["length"], strict=True):
        assert 20 < n < 96 and np.all(toks[n:] == 0) and np.all(toks[:n] > 0)
        val, depth, args = _evaluate_tokens(toks)
        assert val == lab
        assert depth <= 9 and args <= 10  # operators at depths 1..9: depth 10 is a leaf
    # every operator and label occurs
    assert set(np.unique(d["label"])) == set(range(10))
    ids = {tasks.LISTOPS_VOCAB.index(o) for o in tasks.LISTOPS_OPS}
    assert ids <= set(np.unique(d["tokens"]))


def test_listops_is_deterministic_per_key():
    a = tasks.listops(jax.random.key(3), 20, 64)
    b = tasks.listops(jax.random.key(3), 20, 64)
    c = tasks.listops(jax.random.key(4), 20, 64)
    np.testing.assert_array_equal(a["tokens"], b["tokens"])
    assert not np.array_equal(a["tokens"], c["tokens"])


def test_listops_median_matches_lra():
    tree = ("[MED", [1, 2, 5, 9])
    assert tasks.listops_value(tree) == int(np.median([1, 2, 5, 9])) == 3
    with pytest.raises(ValueError, match="min_len"):
        tasks.listops(jax.random.key(0), 1, 10, min_len=10)


@pytest.mark.parametrize("distinct", [False, True])
def test_mqar_keys_and_values_consistent(distinct):
    n_pairs, n_keys = 6, 16
    d = tasks.mqar(jax.random.key(1), 50, 48, n_pairs, n_keys, distinct_values=distinct)
    repeats = 0
    for toks, lab in zip(d["tokens"], d["label"], strict=True):
        ctx = toks[: 2 * n_pairs]
        keys, vals = ctx[0::2], ctx[1::2]
        assert len(set(keys.tolist())) == n_pairs and np.all((keys >= 1) & (keys <= n_keys))
        assert np.all((vals > n_keys) & (vals <= 2 * n_keys))
        q = np.flatnonzero(lab >= 0)
        assert len(q) == n_pairs and np.all(q >= 2 * n_pairs)
        assert sorted(toks[q].tolist()) == sorted(keys.tolist())  # each key queried once
        for p in q:
            (i,) = np.flatnonzero(keys == toks[p])
            assert lab[p] == vals[i]
        rest = np.setdiff1d(np.arange(2 * n_pairs, 48), q)
        assert np.all(toks[rest] == 0)
        repeats += len(set(vals.tolist())) < n_pairs
    # without replacement no value repeats; with it, 6 draws of 16 repeat with probability
    # 1 - 16!/(10! 16^6) = 0.66, so among 50 rows some do (all 50 distinct: 0.34^50)
    assert repeats == 0 if distinct else repeats > 0
    assert tasks.mqar_vocab(n_keys) == 33
    with pytest.raises(ValueError, match="n_pairs"):
        tasks.mqar(jax.random.key(0), 1, 10, 4)
    # the ids must fit the reading model's vocabulary: 1 + 2 n_keys = 33 > 32
    with pytest.raises(ValueError, match="n_keys <= 15"):
        tasks.mqar(jax.random.key(0), 1, 48, n_pairs, n_keys, vocab=32)
    assert tasks.mqar(jax.random.key(0), 1, 48, n_pairs, n_keys, vocab=33)["tokens"].max() <= 32
    with pytest.raises(ValueError, match="each must be >= 1"):
        tasks.mqar(jax.random.key(0), 0, 48, n_pairs, n_keys)


def test_selective_copy_labels_are_the_data_in_order():
    d = tasks.selective_copy(jax.random.key(2), 40, 30, 5, n_symbols=6)
    for toks, lab in zip(d["tokens"], d["label"], strict=True):
        data = toks[:30][toks[:30] > 0]
        assert len(data) == 5 and np.all(toks[30:] == 7)
        np.testing.assert_array_equal(lab[30:], data)
        assert np.all(lab[:30] == -1)


@pytest.mark.parametrize("case", ["A", "B"])
def test_gmm_icl_prompts(case):
    d = tasks.gmm_icl(jax.random.key(5), 64, 20, case=case, d=2, n_classes=3)
    x = np.asarray(d["inputs"])
    assert x.shape == (64, 21, tasks.gmm_token_dim(2, 3))
    perm, comp, lab = map(np.asarray, (d["perm"], d["component"], d["label"]))
    assert np.all(np.sort(perm, 1) == np.arange(3))
    np.testing.assert_array_equal(lab, perm[np.arange(64), comp])
    onehot = x[:, :20, 2:5]
    assert np.all(onehot.sum(-1) == 1) and np.all(x[:, :20, 5] == 0)
    assert np.all(x[:, 20, 2:5] == 0) and np.all(x[:, 20, 5] == 1)
    means = np.asarray(d["means"])
    if case == "A":
        assert np.all(means == means[:1])
        np.testing.assert_allclose(np.linalg.norm(means[0], axis=1), 2.0, rtol=1e-6)
    else:
        assert not np.allclose(means[0], means[1])
    # the context labels are carried by their clusters: each labelled point is nearest
    # (in most cases) to the mean of the cluster that the permutation maps to its label
    lab_ctx = onehot.argmax(-1)
    inv = np.argsort(perm, 1)                                  # label -> cluster
    cl = np.take_along_axis(inv, lab_ctx, 1)
    pts = x[:, :20, :2]
    near = np.argmin(((pts[:, :, None] - means[:, None]) ** 2).sum(-1), -1)
    assert np.mean(near == cl) > 0.8


def test_stdlib_corpus_split_is_deterministic():
    a = tasks.stdlib_corpus(max_train_bytes=200_000, max_val_bytes=50_000)
    b = tasks.stdlib_corpus(max_train_bytes=200_000, max_val_bytes=50_000)
    np.testing.assert_array_equal(a["train"], b["train"])
    np.testing.assert_array_equal(a["val"], b["val"])
    assert a["train_files"] == b["train_files"] and a["val_files"] == b["val_files"]
    assert not set(a["train_files"]) & set(a["val_files"])
    assert a["train"].size == 200_000 and a["val"].size == 50_000
    assert a["train"].dtype == np.uint8 and a["python"].count(".") == 2
    full = tasks.stdlib_corpus()
    # the held-out set is fixed by file name: adding a size cap only drops files
    assert set(a["val_files"]) <= set(full["val_files"])
    assert 0.05 < len(full["val_files"]) / (len(full["val_files"]) + len(full["train_files"])) \
        < 0.25
    assert "os.py" in full["train_files"] + full["val_files"]


def test_mqar_frequent_value_rule_on_a_hand_made_sequence():
    # keys 1..4, values 5..8: values 6, 6, 7 in the context; queries answered 6 and 7
    tok = np.array([[1, 6, 2, 6, 3, 7, 1, 3, 0]])
    lab = np.array([[-1, -1, -1, -1, -1, -1, 6, 7, -1]])
    assert tasks.mqar_frequent_value(tok, lab, 4).tolist() == [0.5]
    d = tasks.mqar(jax.random.key(0), 64, 24, 6, 8)
    acc = tasks.mqar_frequent_value(d["tokens"], d["label"], 8)
    assert acc.shape == (64,) and 0 < acc.mean() < 0.6      # above chance 1/8, no recall


def test_listops_root_rule_uses_only_the_first_token():
    tr = np.array([[11, 1, 2, 15], [11, 3, 4, 15], [12, 5, 6, 15], [12, 0, 0, 15]])
    ytr = np.array([2, 2, 6, 6])
    te = np.array([[11, 9, 9, 15], [12, 9, 9, 15], [13, 1, 1, 15]])
    assert tasks.listops_root_rule(tr, ytr, te, np.array([2, 5, 2])).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="^labels:"):
        tasks.listops_root_rule(tr, ytr[:2], te, np.array([2, 5, 2]))


def test_ngram_model_is_a_normalised_law_and_learns_structure():
    rng = np.random.default_rng(0)
    tr = rng.integers(0, 5, 3000).astype(np.uint8)
    for k in (0, 1, 3):
        ctx = tr[100:100 + k]
        p = [2.0 ** -tasks.ngram_bits_per_byte(tr, np.r_[ctx, b].astype(np.uint8), k)[0]
             for b in range(256)]
        assert abs(sum(p) - 1) < 1e-12
    cyc = np.tile(np.arange(7, dtype=np.uint8), 500)        # deterministic given 1 byte
    assert tasks.ngram_bits_per_byte(cyc, cyc[:200], 1).mean() < 0.1
    assert abs(tasks.ngram_bits_per_byte(cyc, cyc[:200], 0).mean() - np.log2(7)) < 0.01
    with pytest.raises(ValueError, match="^order:"):
        tasks.ngram_bits_per_byte(cyc, cyc, 9)
