"""The GMA experiments (gma-recall, gma-lm, gma-gmm) run end to end at tiny overrides and
their figures draw from the results.  One mixer each (GMA: the one with the most code).
Compilation dominates (~5 s per model configuration), so only gma-lm runs end to end in the
default suite; gma-recall and gma-gmm run under ``-m slow`` (gma-gmm's config checks, points
and denoising prompts and references are tested in the default suite, in seconds)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gmtheory.figures import get_figure  # noqa: E402
from gmtheory.simulations import run_simulation  # noqa: E402
from gmtheory.training import set_progress  # noqa: E402

SEQ = dict(mixers=("gma",), d_model=8, depth=1, heads=2, mlp_hidden=16, K=4, features=4,
           steps=8, batch=4, records=2, seeds=2)


def _draw(name, arrays, meta, tmp_path):
    fig = get_figure(name).draw(arrays, meta)
    out = tmp_path / f"{name}.png"
    fig.savefig(out)
    plt.close(fig)
    assert out.stat().st_size > 1000


@pytest.fixture(autouse=True)
def _quiet():
    set_progress(False)
    yield
    set_progress(True)


def test_lm_runs_and_draws(tmp_path):
    lm = dict(SEQ, width=16, n_train=32, n_val=8, max_train_bytes=20_000, max_val_bytes=5_000)
    a, meta, _ = run_simulation("gma-lm", "quick", lm, results_dir=tmp_path, progress=False)
    bpb = a["gma/val_bpb"]
    assert bpb.shape == (2, 2) and np.all(np.isfinite(bpb))
    assert abs(float(np.mean(a["gma/val_bpb0"])) - 8.0) < 1.5   # near uniform at init
    assert a["gma/resp_usage"].shape == (2, 2, 4)
    np.testing.assert_allclose(a["gma/resp_usage"].sum(-1), 1.0, rtol=1e-5)
    assert a["gma/resp_table"].sum() == 2 * 2 * 8 * 16          # seeds x heads x tokens
    # the null of the claim table: the same layer untrained, per seed and head (issue 44)
    assert a["gma/resp_nmi_untrained"].shape == a["gma/resp_nmi"].shape == (2, 2)
    assert len(a["val_files"]) > 0 and str(a["python"]).count(".") == 2
    # the n-gram baselines of the claim table, on the run's own bytes (issue 44)
    assert a["ngram/bpb"].shape == (5,) and np.all(np.isfinite(a["ngram/bpb"]))
    assert a["ngram/bpb"][1] < a["ngram/bpb"][0] < 8.0
    _draw("gma-lm", a, meta, tmp_path)
    _draw("gma-responsibilities", a, meta, tmp_path)


@pytest.mark.slow
def test_recall_runs_and_draws(tmp_path):
    rec = dict(SEQ, tasks=("listops", "mqar"), listops_lengths=(12, 16), mqar_lengths=(8, 16),
               mqar_pairs=2, mqar_keys=4, width=16, n_train=32, n_test=8)
    a, meta, _ = run_simulation("gma-recall", "quick", rec, results_dir=tmp_path,
                                progress=False)
    assert a["mqar/gma/acc"].shape == (2, 2) and a["listops/gma/acc"].shape == (2, 2)
    assert np.all((a["mqar/gma/acc"] >= 0) & (a["mqar/gma/acc"] <= 1))
    assert a["mqar/gma/acc_curve"].shape == (2, 2, 2)
    for t in ("listops", "mqar"):           # the trivial rules, on the run's test data
        assert a[f"{t}/rule"].shape == (2,) and np.all((a[f"{t}/rule"] >= 0)
                                                       & (a[f"{t}/rule"] <= 1))
    _draw("gma-recall", a, meta, tmp_path)


@pytest.mark.slow
def test_gmm_runs_and_draws(tmp_path):
    over = dict(mixers=("gma",), ds=(2, 3), d_model=8, heads=2, mlp_hidden=16, K=4, steps=10,
                batch=8, L=8, n_train=64, n_test=32, order=6, seeds=2)
    a, meta, _ = run_simulation("gma-gmm", "quick", over, results_dir=tmp_path, progress=False)
    assert list(a["ds"]) == [2, 3] and list(a["orders"]) == [6, 6]
    for d in (2, 3):
        for c in ("A", "B"):
            p = f"{c}/d{d}"
            assert a[f"{p}/gma/acc"].shape == (2,) and a[f"{p}/gma/acc_limit"].shape == (2,)
            # the Bayes classifier with known means is at least as good as the Prop. 2.1 limit
            assert float(a[f"{p}/acc_bayes"]) >= float(a[f"{p}/acc_softmax_limit"]) - 0.1
        # denoising after 10 steps: a finite model MSE; Bayes with the prompt's mixture
        # below the posterior mean of the query alone, and that below the trivial estimators
        mse = a[f"D/d{d}/gma/mse"]
        assert mse.shape == (2,) and np.all(np.isfinite(mse))
        ref = {k: float(a[f"D/d{d}/mse_{k}"]) for k in ("bayes", "no_context", "identity",
                                                         "zero")}
        assert ref["bayes"] < ref["no_context"] < min(ref["identity"], ref["zero"])
    _draw("gma-gmm", a, meta, tmp_path)


def _gmm_config(**over):
    from gmtheory.simulations import get_simulation, make_config

    return make_config(get_simulation("gma-gmm"), "quick", over)


def test_gmm_quick_profile_runs_every_case_at_both_dimensions():
    """One quick run computes every (case, d, mixer) point, d = 2 and d = 8 side by side;
    the L = infinity quadrature stays within ``max_nodes`` per component at each d."""
    from gmtheory.simulations import get_simulation
    from gmtheory.simulations.gma_gmm import limit_order

    cfg = _gmm_config()
    assert cfg.ds == (2, 8) and cfg.cases == ("A", "B", "D")
    pts = get_simulation("gma-gmm").points(cfg)
    assert {(p["case"], p["d"], p["mixer"]) for p in pts} == {
        (c, d, m) for c in ("A", "B", "D") for d in (2, 8) for m in ("softmax", "gma")}
    assert [limit_order(cfg, d) for d in cfg.ds] == [16, 2]
    assert all(limit_order(cfg, d) ** d <= cfg.max_nodes for d in cfg.ds)


@pytest.mark.parametrize("field, value", [("ds", ()), ("ds", (2, 0)), ("ds", (2, 2)),
                                          ("noise", -0.5), ("noise", 0.0), ("cases", ("C",)),
                                          ("var", float("nan")), ("n_classes", 1),
                                          ("max_nodes", 100)])
def test_gmm_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}:"):
        _gmm_config(**{field: value})


def test_recall_refuses_mqar_ids_past_the_vocabulary():
    """MQAR with n keys uses 1 + 2 n token ids; past the models' vocabulary JAX would clamp
    the embedding lookup silently, so the config refuses it and names the field."""
    from gmtheory.simulations import get_simulation, make_config
    from gmtheory.simulations.gma_sims import VOCAB

    def recall(**kw):
        return make_config(get_simulation("gma-recall"), overrides=kw)

    recall(mqar_keys=(VOCAB - 1) // 2)                 # the largest that fits
    with pytest.raises(ValueError, match="^mqar_keys:.*mqar_keys <= "):
        recall(mqar_keys=(VOCAB - 1) // 2 + 1)
    recall(tasks=("listops",), mqar_keys=VOCAB)        # not used: no MQAR


def test_gmm_denoising_prompts_and_references():
    """Case D's prompts (from tasks.gmm_icl, x padded to the widest d): clean prompt points
    without labels, the query token carries the noisy point, the target is the clean one.
    Untrained, the Bayes posterior mean (denoising.bayes_denoiser with the prompt's mixture)
    beats the posterior mean of the query alone, which beats both trivial estimators, and
    an untrained model's MSE is finite."""
    import jax

    from gmtheory import gma_models as GM
    from gmtheory.simulations import gma_gmm as G

    cfg = _gmm_config(ds=(2, 3), n_train=8, n_test=256, L=6, d_model=8, mlp_hidden=16, K=4)
    train, test = G._gmm_pools(cfg, "D", 2)
    C, d_in = cfg.n_classes, 3 + cfg.n_classes + 1
    assert test["inputs"].shape == (256, 7, d_in) and train["target"].shape == (8, 3)
    x = test["inputs"]
    np.testing.assert_array_equal(x[:, :, 2], 0.0)                # padding after x (d = 2)
    np.testing.assert_array_equal(x[:, :, 3:3 + C], 0.0)          # no labels in case D
    np.testing.assert_array_equal(x[:, :, -1], np.broadcast_to(np.eye(7)[-1], (256, 7)))
    np.testing.assert_allclose(x[:, -1, :2], test["noisy"])
    assert not np.allclose(test["noisy"], test["target"][:, :2])
    np.testing.assert_array_equal(test["target"][:, 2], 0.0)
    ref = {k: float(v) for k, v in G._references(test, cfg.var, cfg.noise, cfg.sep).items()}
    assert ref["mse_bayes"] < 0.8 * ref["mse_no_context"]
    assert ref["mse_no_context"] < min(ref["mse_identity"], ref["mse_zero"])
    assert abs(ref["mse_identity"] - cfg.noise ** 2) < 0.25        # 512 draws of N(0, 1)
    s2 = cfg.sep ** 2 + cfg.var                                    # x ~ N(0, s2 I) in case D
    assert abs(ref["mse_no_context"] - s2 * cfg.noise ** 2 / (s2 + cfg.noise ** 2)) < 0.2
    mcfg = G.matched_models(cfg, ("softmax",), d_in=d_in, n_out=3, causal=False)["softmax"]
    models = jax.vmap(lambda k: GM.build(mcfg, k))(jax.random.split(jax.random.key(0), 2))
    _, mse = G._evaluate(models, {k: test[k] for k in G._EVAL}, C)
    assert mse.shape == (2,) and np.all(np.isfinite(np.asarray(mse)))


def test_untrained_models_are_where_training_starts():
    """The responsibilities' null (gma-lm) reads ``untrained_models``: the very models that
    ``train_seeds`` starts from with the same key (seen through its ``init`` hook)."""
    import jax

    from gmtheory import gma_models as GM
    from gmtheory.simulations import gma_sims

    mcfg = GM.ModelConfig(mixer="gma", causal=True, d_model=8, depth=1, heads=2,
                          mlp_hidden=16, n_out=8, vocab=8, max_len=6, K=3, conv=2)
    tokens = jax.random.randint(jax.random.key(1), (4, 6), 1, 8)
    data = {"tokens": tokens, "label": tokens}
    seen = []
    key = jax.random.key(7)
    gma_sims.train_seeds(mcfg, gma_sims.SeqLoss(2, False), key, 2, steps=2, lr=1e-3,
                         data=data, records=1, init=lambda m, k: seen.append(m) or m)
    for a, b in zip(jax.tree.leaves(seen[0]), jax.tree.leaves(
            gma_sims.untrained_models(mcfg, key, 2)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_lm_point_raises_on_a_non_finite_loss_and_leaves_jax_config_alone(monkeypatch):
    """A non-finite validation loss raises (never a silent NaN), once: the retry that
    recompiled with the persistent cache off is gone with its root cause (a faulty
    compiled GMA forward, fixed in gma._causal_chunk_math, docs/topics/gma.md), so the
    point neither retries nor touches JAX's global configuration.  The training run is
    stubbed: this tests the guard, not training."""
    import types

    import jax

    from gmtheory.simulations import gma_lm, gma_sims

    runs = []

    def fake_run(cfg, mixer, data, key, **kw):
        runs.append(mixer)
        hist = {"val_ce": np.array([[1.0], [np.nan]])}            # (records, seeds)
        res = types.SimpleNamespace(history=hist, initial={"val_ce": np.ones(1)}, steps=1)
        return res, gma_sims.StepClock(), None

    corpus = {"python": "3", "train_files": 1, "val_files": 1, "train": b"ab", "val": b"c"}
    monkeypatch.setattr(gma_lm, "lm_corpus", lambda *a: corpus)
    monkeypatch.setattr(gma_lm, "lm_data", lambda cfg, c: {"val_tokens": None})
    monkeypatch.setattr(gma_lm, "seq_run", fake_run)
    monkeypatch.setattr(gma_lm.GM, "param_count", lambda m: 0)
    cfg = types.SimpleNamespace(max_train_bytes=2, max_val_bytes=1, width=4, seeds=1, conv=0)
    before = jax.config.jax_enable_compilation_cache
    with pytest.raises(FloatingPointError, match="not finite for seeds"):
        gma_lm._lm_point(cfg, {"mixer": "gma"}, None)
    assert runs == ["gma"] and jax.config.jax_enable_compilation_cache == before


def test_mqar_gpu_run_at_tiny_sizes(tmp_path):
    """gma-mqar's one-GPU run (issue 44 item 6) end to end on CPU at tiny sizes: the timing
    pass measures every point (in a throwaway folder), the gate trains softmax alone, the
    main run's steps are sized to the time left (capped here), kept beside the cache and
    reused by a rerun, and its keep lines rebuild the config that ran; a gate that cannot
    pass stops before the main run, and so does a budget too small for the gate's steps."""
    from gmtheory.simulations import get_simulation, make_config
    from gmtheory.simulations.gma_mqar import gpu_run

    tiny = dict(mixers=("softmax",), d_model=8, depth=1, heads=2, mlp_hidden=16, K=4,
                features=4, steps=8, warmup=1, batch=4, records=2, seeds=2, lengths=(12,),
                pairs=2, keys=4, n_train=32, n_test=8, target=0.0)
    said = []
    out = gpu_run(300.0, profile="quick", overrides=tiny, results_dir=tmp_path,
                  timing_steps=4, max_steps=12, log=said.append)
    assert set(out["timing"]) == {"12/softmax"} and out["timing"]["12/softmax"] > 0
    assert out["passed"] and out["main_passed"] and out["steps"] == 12
    a = out["arrays"]
    assert a["softmax/acc"].shape == (1, 2) and a["softmax/acc_curve"].shape == (1, 2, 2)
    assert a["rule"].shape == (1,) and float(a["chance"]) == 0.25
    assert any(line.startswith("gate:") for line in said)
    from gmtheory.simulations import read_config_file

    (tmp_path / "keep.toml").write_text(out["keep"] + "\n")
    sim = get_simulation("gma-mqar")
    _, kept = read_config_file(sim, tmp_path / "keep.toml")
    assert make_config(sim, "quick", kept) == make_config(sim, "quick", {**tiny, "steps": 12})
    again = gpu_run(300.0, profile="quick", overrides=tiny, results_dir=tmp_path,
                    timing_steps=4, max_steps=40, log=said.append)      # resumes, same size
    assert again["steps"] == 12 and any("resuming" in line for line in said)
    stop = gpu_run(300.0, profile="quick", overrides=dict(tiny, target=1.0),
                   results_dir=tmp_path, timing_steps=4, max_steps=12, log=said.append)
    assert stop["passed"] == (stop["gate_acc"] >= 1.0)
    assert stop["passed"] or (stop["steps"] is None and "arrays" not in stop)
    short = gpu_run(300.0, profile="quick", overrides=dict(tiny, lr=0.004),
                    results_dir=tmp_path, timing_steps=4, max_steps=6, log=said.append)
    assert short["passed"] and short["steps"] is None and "arrays" not in short
    assert "fewer than the gate's 8" in said[-1]


def test_mqar_gpu_run_names_bad_arguments(tmp_path):
    """gpu_run refuses, before any training, a gate length outside the profile's lengths
    (its main run's softmax is judged there), a non-positive budget, an odd or tiny timing
    pass, a margin outside [0, 1) and a cap below one record."""
    from gmtheory.simulations.gma_mqar import gpu_run

    for kw, match in ((dict(gate_length=64), "^gate_length:"), (dict(budget_s=0.0), "^budget_s:"),
                      (dict(timing_steps=3), "^timing_steps:"), (dict(margin=1.0), "^margin:"),
                      (dict(max_steps=1), "^max_steps:")):
        with pytest.raises(ValueError, match=match):
            gpu_run(**{"budget_s": 60.0, **kw}, profile="quick", results_dir=tmp_path,
                    log=lambda _: None)


def test_mqar_config_names_bad_fields():
    from gmtheory.simulations import get_simulation, make_config

    sim = get_simulation("gma-mqar")
    for bad, match in ((dict(keys=200), "^keys:"), (dict(pairs=20), "^pairs:"),
                       (dict(records=0), "^records:"), (dict(lengths=()), "^lengths:"),
                       (dict(warmup=80), "^warmup:"), (dict(n_test=1), "^n_test:"),
                       (dict(lr=0.0), "^lr:"), (dict(lr_end=2.0), "^lr_end:"),
                       (dict(target=1.5), "^target:"), (dict(records=7), "^records:")):
        with pytest.raises(ValueError, match=match):
            make_config(sim, "quick", bad)
