"""The rules of the GMA claim table (gmtheory/figures/gma_claims.py) on made-up results:
each verdict is reachable, and a claim is decided only by resolved comparisons."""

import numpy as np
import pytest

from gmtheory.figures.gma_claims import claim_rows

MIXERS = ("softmax", "linear", "performer", "gma", "ssm")


def _recall(listops, mqar, majority=0.2, root=0.25, frequent=0.15, rules=True):
    a = {"mixers": np.asarray(MIXERS), "tasks": np.asarray(["listops", "mqar"]),
         "listops/N": np.asarray([512]), "mqar/N": np.asarray([256])}
    for m in MIXERS:
        a[f"listops/{m}/acc"] = np.asarray([listops[m]])            # (lengths, seeds)
        a[f"listops/{m}/chance"] = np.asarray([majority])
        a[f"mqar/{m}/acc"] = np.asarray([mqar[m]])
        a[f"mqar/{m}/chance"] = np.asarray([1 / 32])
    if rules:
        for t, r in (("listops", root), ("mqar", frequent)):
            a[f"{t}/rule"], a[f"{t}/rule_se"] = np.asarray([r]), np.asarray([0.005])
            a[f"{t}/rule_name"] = np.asarray("trivial")
    return a, {}


def _seeds(mu, spread=0.001):
    return mu + spread * np.asarray([-1.0, 0.0, 1.0])


def _verdicts(rows):
    return [v for _, v, _, _ in rows]


def test_classification_needs_softmax_to_learn_the_task():
    flat = {m: _seeds(0.2) for m in MIXERS}
    rows = claim_rows(_recall(flat, flat), None)
    assert rows[0][1].startswith("undecided")
    learnt = dict(flat, softmax=_seeds(0.6), gma=_seeds(0.59, 0.02))
    assert claim_rows(_recall(learnt, flat), None)[0][1] == "supported"
    worse = dict(learnt, gma=_seeds(0.5))
    assert claim_rows(_recall(worse, flat), None)[0][1].startswith("not supported")


def test_rows_are_gated_on_the_best_trivial_rule():
    """A task row decides nothing unless softmax beats the best rule that needs no recall
    or no mixing by 2 SE (and, on MQAR, reaches 0.9): the issue-44 cases, made up."""
    flat = {m: _seeds(0.2) for m in MIXERS}
    # ListOps: softmax above the majority class but at the root operator's rule
    near = dict(flat, softmax=_seeds(0.352, 0.01), gma=_seeds(0.35, 0.02))
    v = claim_rows(_recall(near, flat, root=0.339), None)[0][1]
    assert v.startswith("undecided: softmax (0.352) does not beat the best trivial rule")
    assert claim_rows(_recall(near, flat, root=0.25), None)[0][1] == "supported"
    # MQAR: everyone at the most-frequent-value rule, far above chance
    shortcut = {m: _seeds(0.148) for m in MIXERS}
    v = claim_rows(_recall(flat, shortcut, frequent=0.149), None)[1][1]
    assert v.startswith("undecided: softmax (0.148) has not learnt the task (below 0.9)")
    # no baseline recorded: nothing is decided
    learnt = dict(flat, softmax=_seeds(0.6), gma=_seeds(0.59, 0.02))
    rows = claim_rows(_recall(learnt, learnt, rules=False), None)
    assert all("records no trivial-rule baseline" in r[1] for r in rows)


def test_lm_row_is_gated_on_the_ngram_models():
    a = {"mixers": np.asarray(MIXERS), "ngram/orders": np.arange(1, 6),
         "ngram/bpb": np.asarray([3.51, 2.64, 2.15, 2.02, 2.05])}
    for m, v in {"softmax": 2.41, "ssm": 2.09, "gma": 2.7, "linear": 2.74,
                 "performer": 2.73}.items():
        a[f"{m}/val_bpb"] = np.stack([_seeds(v + 0.1), _seeds(v)], 1)
    (row,) = claim_rows(None, (a, {}))
    assert row[1].startswith("undecided: softmax (2.410) does not beat the best trivial "
                             "rule (2.020)")
    assert "4: 2.02" in row[2]


def test_order_claim_supported_contradicted_or_undecided():
    flat = {m: _seeds(0.2) for m in MIXERS}
    claimed = {"softmax": _seeds(0.95), "ssm": _seeds(0.9), "gma": _seeds(0.6),
               "linear": _seeds(0.3), "performer": _seeds(0.4)}
    assert _verdicts(claim_rows(_recall(flat, claimed), None))[1] == "supported"
    against = dict(claimed, ssm=_seeds(0.3))
    assert _verdicts(claim_rows(_recall(flat, against), None))[1].startswith("not supported")
    close = dict(claimed, linear=_seeds(0.6, 0.05))
    v = _verdicts(claim_rows(_recall(flat, close), None))[1]
    assert v.startswith("undecided") and "elu+1" in v


def test_lm_rows_lower_bits_are_better():
    a = {"mixers": np.asarray(MIXERS), "ngram/orders": np.arange(1, 6),
         "ngram/bpb": np.asarray([3.5, 2.6, 2.4, 2.3, 2.3])}
    bpb = {"softmax": 2.0, "ssm": 2.1, "gma": 2.3, "linear": 2.5, "performer": 2.6}
    for m, v in bpb.items():
        a[f"{m}/val_bpb"] = np.stack([_seeds(v + 0.1), _seeds(v)], 1)   # (seeds, records)
    a["gma/resp_nmi"] = np.full((3, 2), 0.3) + np.asarray([[0.0], [0.01], [0.02]])
    a["gma/resp_nmi_shuffled"] = np.full((3, 2), 0.002)
    a["gma/resp_usage_entropy"] = np.full((3, 2), 0.8)
    a["gma/resp_dead_fraction"] = np.zeros((3, 2))
    # the untrained layer is the null: far above shuffled categories, as on bytes
    a["gma/resp_nmi_untrained"] = np.full((3, 2), 0.2) + np.asarray([[0.01], [0.0], [0.02]])
    rows = claim_rows(None, (a, {}))
    assert _verdicts(rows) == ["supported", "supported"]
    assert "untrained layer 0.210" in rows[1][2]


def test_responsibilities_row_is_judged_against_the_untrained_layer():
    """Beating shuffled categories decides nothing (any byte-dependent routing does); the
    row needs the trained layer above its own untrained start, paired by seed."""
    a = {"mixers": np.asarray(["gma"]), "gma/val_bpb": np.ones((3, 2)),
         "gma/resp_nmi": np.full((3, 2), 0.3) + np.asarray([[0.0], [0.01], [0.02]]),
         "gma/resp_nmi_shuffled": np.full((3, 2), 0.002),
         "gma/resp_usage_entropy": np.full((3, 2), 0.8),
         "gma/resp_dead_fraction": np.zeros((3, 2))}
    row = claim_rows(None, (a, {}))[-1]
    assert row[1].startswith("undecided: the run records no untrained-layer NMI")
    a["gma/resp_nmi_untrained"] = a["gma/resp_nmi"] + np.asarray([[0.02], [-0.01], [0.0]])
    row = claim_rows(None, (a, {}))[-1]
    assert row[1].startswith("undecided (")
    a["gma/resp_nmi_untrained"] = a["gma/resp_nmi"] - 0.1
    assert claim_rows(None, (a, {}))[-1][1] == "supported"
    a["gma/resp_nmi_untrained"] = a["gma/resp_nmi"] + 0.1
    assert claim_rows(None, (a, {}))[-1][1].startswith("not supported")
    # paired by seed: NMI spread widely over seeds, each seed 0.02 above its own start;
    # unpaired (means and their SEs apart) this would be undecided
    spread = np.asarray([[0.1], [0.4], [0.7]]) + np.zeros((3, 2))
    a["gma/resp_nmi"] = spread + np.asarray([[0.0], [0.001], [-0.001]])
    a["gma/resp_nmi_untrained"] = spread - 0.02
    assert claim_rows(None, (a, {}))[-1][1] == "supported"
    # one seed decides nothing (and prints without an SE)
    one = {k: (v[:1] if k.startswith("gma/resp") else v) for k, v in a.items()}
    one["gma/val_bpb"] = np.ones((1, 2))
    row = claim_rows(None, (one, {}))[-1]
    assert row[1].startswith("undecided: 1 seed") and "(one seed)" in row[2]


def _bench(power, Ns=(4096, 8192, 16384, 32768), noise=0.02):
    """A made-up ``gmtheory bench gma`` result: fused causal GMA (K = 16) whose time and
    memory grow as N**power, with a little scatter so that every fit has an SE."""
    rng = np.random.default_rng(0)
    rows = []
    for N in Ns:
        f = (N / 4096.0) ** power
        rows.append({"method": "gma-causal", "K": 16, "N": N,
                     "fwd_s": f * 1e-3, "fwdbwd_s": f * 3e-3 * np.exp(noise * rng.normal()),
                     "fwdbwd_temp_bytes": f * 1e6 * np.exp(noise * rng.normal())})
    return {"rows": rows, "Ks": [16], "fused_min_n": {"causal": 4096, "bidirectional": 8192}}


def test_memory_row_reads_the_fused_slopes():
    from gmtheory.figures.gma_claims import memory_row

    assert memory_row(_bench(1.0))[1] == "supported"
    assert memory_row(_bench(2.0))[1] == "not supported"
    assert memory_row(_bench(1.0, Ns=(4096, 8192)))[1].startswith("undecided")  # no SE
    assert memory_row(_bench(1.0, Ns=(512, 1024, 2048)))[1].startswith("undecided")  # unfused
    # memory measured, time not (a run that failed its timings): the row says so
    b = _bench(1.0)
    for r in b["rows"]:
        r["fwdbwd_s"] = float("nan")
    _, verdict, ev, _ = memory_row(b)
    assert verdict.startswith("undecided") and "time not measured" in ev


def _mqar(acc, frequent=1 / 64, chance=1 / 127):
    a = {"mixers": np.asarray(MIXERS), "N": np.asarray([256]), "chance": np.asarray(chance),
         "rule": np.asarray([frequent]), "rule_se": np.asarray([0.001])}
    for m in MIXERS:
        a[f"{m}/acc"] = np.asarray([acc[m]])                        # (lengths, seeds)
    return a, {}


def test_a_gma_mqar_run_gives_the_recall_row():
    """With a gma-mqar run (values without replacement), its row replaces gma-recall's
    MQAR row, gated on softmax reaching LEARNT and ranked as the other task rows."""
    flat = {m: _seeds(0.3) for m in MIXERS}
    rows = claim_rows(_recall(flat, flat), None, _mqar(flat))
    recall = [r for r in rows if "associative recall" in r[0]]
    assert len(recall) == 1 and "values without replacement" in recall[0][0]
    assert recall[0][1].startswith("undecided: softmax (0.300) has not learnt")
    assert "gma-mqar" in recall[0][3]
    claimed = dict(softmax=_seeds(0.995), ssm=_seeds(0.99), gma=_seeds(0.8),
                   linear=_seeds(0.5), performer=_seeds(0.4))
    row = [r for r in claim_rows(None, None, _mqar(claimed)) if "recall" in r[0]][0]
    assert row[1] == "supported"
    # every other mixer ranked against the reference, softmax (mean ± SE of the difference)
    ranked = row[2].split("minus softmax: ")[1]
    assert ranked.startswith("elu+1 -0.495 ± 0.001") and "GMA -0.195" in ranked
    assert "FAVOR+ -0.595" in ranked and "SSM -0.005" in ranked
    against = dict(claimed, linear=_seeds(0.9))            # GMA behind elu+1
    row = [r for r in claim_rows(None, None, _mqar(against)) if "recall" in r[0]][0]
    assert row[1].startswith("not supported")


def test_one_seed_of_gma_mqar_decides_nothing():
    one = {m: np.asarray([0.995]) for m in MIXERS}
    row = [r for r in claim_rows(None, None, _mqar(one)) if "recall" in r[0]][0]
    assert row[1] == "undecided: 1 seed (a mean ± SE needs two)"


def test_dropped_recall_profile_is_quoted_from_its_retired_record():
    """gma-recall has no cpu profile any more (issue 44 item 4); the claim table quotes its
    last record from committed/gma-recall/retired/ and says so in the command cell."""
    from gmtheory.figures.gma_claims import RETIRED_RECALL, _committed
    from gmtheory.simulations import get_simulation, load_all, make_config
    from gmtheory.simulations.committed import load_retired

    load_all()
    with pytest.raises(ValueError, match="no cpu profile"):
        make_config(get_simulation("gma-recall"), "cpu")
    arrays, meta = load_retired("gma-recall", "cpu")
    assert "listops/N" in arrays and meta["config"]["listops_steps"] == 80
    recall = _committed("cpu")["gma-recall"]
    assert recall[1]["retired"] and "retired record" in recall[2]
    rows = claim_rows(recall[:2], None)
    assert rows and all(r[3] == RETIRED_RECALL for r in rows)
    assert rows[0][1].startswith("undecided")      # ListOps: at the root-operator rule
    assert load_retired("gma-lm", "cpu") is None


def test_committed_baselines_are_current(monkeypatch):
    """The trivial-rule baselines kept beside older committed records are tied to the
    source of the rules by its fingerprint; stale ones would be recomputed (about a minute)
    and written into the repository by any run of the claim table, the tests included.
    Regenerate them with ``python -m gmtheory.tables`` and commit them."""
    from gmtheory.figures import gma_claims

    def refuse(*a, **k):
        raise AssertionError("stale committed baselines: run `python -m gmtheory.tables` "
                             "and commit simulations/committed/gma-*/baselines/")

    monkeypatch.setattr("gmtheory.cache.save_result", refuse)
    gma_claims._committed("cpu")
