"""``gma-mqar``: multi-query associative recall with the recipe that recall models use
(issue 44 items 3 and 6), for the five token mixers at equal parameter count.

Following Zoology and Based: values drawn *without* replacement (no value repeats, so the
most-frequent-value rule that sat under the old MQAR runs is no better than a guess among
the pairs), more pairs than a linear state holds (the cpu and paper profiles: 64 pairs over
127 keys at N = 256), a depthwise causal short convolution before the mixer in every block
of every mixer (SSM included; :class:`gmtheory.gma_models.ModelConfig`'s ``conv``),
learned positions that start at zero (``pos_scale``), AdamW with clipping, a short
linear warm-up and a cosine decay to ``lr_end`` of the peak (not to 1 %), with the
learning rate and the decay floor as data (:func:`gmtheory.training.hyper`).  Recall is
learnt in a jump after a plateau at chance, so every mixer's learning curve is recorded
(``records`` evaluations on the held-out sequences) and the run is read beside what rules
without recall reach on the same test data: chance (1 / keys) and the most-frequent-value
rule.

``python -m gmtheory.simulations.gma_mqar --budget SECONDS`` is the one-GPU run of the
paper profile (:func:`gpu_run`): a timing pass, then the gate (softmax, one seed, N = 256,
must reach ``target``), then the full run sized to the time left.

Documentation: ``docs/topics/gma.md#recall-that-separates-the-mixers``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import gma_models as GM
from .. import tasks as T
from ..problems import stream_key
from ..stats import mean_se
from ..training import hyper
from ._base import Simulation, register
from .gma_sims import VOCAB, GMAModelConfig, peak_rss_mb, seq_run

__all__ = ["MQARConfig", "mqar_data", "baselines", "gpu_run", "keep_fragment"]


@dataclass(frozen=True, kw_only=True)
class MQARConfig(GMAModelConfig):
    """MQAR at each of ``lengths`` with ``pairs`` key-value pairs over ``keys`` keys
    (``distinct_values``: values without replacement), causal models with a short
    convolution of kernel ``conv`` before every mixer and positions initialised at
    ``pos_scale``; ``warmup`` steps of linear warm-up, then a cosine decay to ``lr_end``
    times the peak ``lr``; ``records`` evaluations on ``n_test`` held-out sequences;
    ``target``: the accuracy the reference mixer (softmax) must reach for the run to
    decide anything (issue 44 item 2; 0: no gate)."""

    lengths: tuple[int, ...]
    pairs: int
    keys: int
    distinct_values: bool
    conv: int
    pos_scale: float
    warmup: int
    lr_end: float
    records: int
    n_train: int
    n_test: int
    target: float

    def __post_init__(self):
        for name in ("pairs", "keys", "steps", "records", "seeds", "n_train"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be a positive integer, got "
                                 f"{getattr(self, name)}.")
        if not self.lengths or min(self.lengths) < 1:
            raise ValueError(f"lengths: need at least one positive sequence length, got "
                             f"{self.lengths}.")
        if self.n_test < 2:
            raise ValueError(f"n_test: the trivial rule's SE needs at least 2 test "
                             f"sequences, got {self.n_test}.")
        if not (np.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr: must be a positive number, got {self.lr}.")
        if T.mqar_vocab(self.keys) > VOCAB:
            raise ValueError(f"keys: MQAR uses 1 + 2 keys token ids, at most the models' "
                             f"vocabulary of {VOCAB}; got keys={self.keys}. Use keys <= "
                             f"{(VOCAB - 1) // 2}.")
        if self.pairs > self.keys or 3 * self.pairs > min(self.lengths):
            raise ValueError(f"pairs: need pairs <= keys and 3 pairs <= every length, got "
                             f"pairs={self.pairs}, keys={self.keys}, lengths={self.lengths}.")
        if not 0 <= self.warmup < self.steps:
            raise ValueError(f"warmup: must be in [0, steps={self.steps}), got {self.warmup}.")
        if not 0.0 <= self.lr_end <= 1.0:
            raise ValueError(f"lr_end: the decay floor as a fraction of lr, in [0, 1], got "
                             f"{self.lr_end}.")
        if self.steps % self.records:
            raise ValueError(f"records: must divide steps={self.steps}, got {self.records}.")
        if not 0.0 <= self.target <= 1.0:
            raise ValueError(f"target: an accuracy in [0, 1] (0: no gate), got "
                             f"{self.target}.")


def mqar_data(cfg: MQARConfig, N: int, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and per-position labels (-1 off the query positions) of the run's ``split``
    ("train" or "test") at length ``N``, from their own seed stream (every mixer and seed
    sees the same sequences)."""
    n = cfg.n_train if split == "train" else cfg.n_test
    d = T.mqar(stream_key(cfg.seed, f"gma-mqar-{N}-{split}"), n, N, cfg.pairs, cfg.keys,
               vocab=VOCAB, distinct_values=cfg.distinct_values)
    return d["tokens"], d["label"]


def _optimizer(cfg: MQARConfig):
    """AdamW with clipping, warm-up and cosine decay to ``lr_end``, its floats as data: runs
    that differ only in them share one compiled program."""
    return hyper(GM.warmup_cosine_adamw, learning_rate=float(cfg.lr),
                 end_fraction=float(cfg.lr_end), steps=int(cfg.steps), warmup=int(cfg.warmup))


def _points(cfg):
    return [{"N": int(n), "mixer": m} for n in cfg.lengths for m in cfg.mixers]


def _point(cfg, point, key):
    N, mixer = point["N"], point["mixer"]
    tr, trl = mqar_data(cfg, N, "train")
    te, tel = mqar_data(cfg, N, "test")
    data = {"tokens": tr, "label": trl, "val_tokens": te, "val_label": tel}
    res, clock, mcfg = seq_run(cfg, mixer, data, key, causal=True, width=N,
                               desc=f"gma-mqar N={N} {mixer}", tag=["gma-mqar", N, mixer],
                               model_kw={"conv": int(cfg.conv),
                                         "pos_scale": float(cfg.pos_scale)},
                               optimizer=_optimizer(cfg))
    return {"acc": np.asarray(res.history["val_acc"][-1]),          # (seeds,)
            "acc_curve": np.asarray(res.history["val_acc"]).T,       # (seeds, records)
            "ce_curve": np.asarray(res.history["val_ce"]).T,
            "steps": np.asarray(res.steps),
            "sec_per_step": np.asarray(clock.seconds_per_step()),
            "params": np.asarray(GM.param_count(mcfg)),
            "peak_rss_mb": np.asarray(peak_rss_mb())}


def baselines(cfg: MQARConfig) -> dict:
    """What rules without recall score on the run's own test data, per length: chance
    (1 / keys) and the most-frequent-value rule (:func:`gmtheory.tasks.mqar_frequent_value`;
    with values drawn without replacement it is a guess among the pairs), mean and SE over
    the test sequences."""
    rule, rule_se = [], []
    for N in cfg.lengths:
        te, tel = mqar_data(cfg, N, "test")
        m, s = mean_se(T.mqar_frequent_value(te, tel, cfg.keys))
        rule.append(m)
        rule_se.append(s)
    return {"chance": np.asarray(1.0 / cfg.keys), "rule": np.asarray(rule),
            "rule_se": np.asarray(rule_se)}


def _assemble(cfg, points, results):
    out = {}
    for p, r in zip(points, results, strict=True):
        for k, v in r.items():
            out.setdefault(f"{p['mixer']}/{k}", []).append(np.asarray(v))
    arrays = {k: np.stack(v) for k, v in out.items()}     # (lengths, ...)
    arrays.update(baselines(cfg), N=np.asarray(cfg.lengths), mixers=np.asarray(cfg.mixers),
                  target=np.asarray(cfg.target))
    return arrays


def _summary(cfg, a):
    lines = [f"MQAR: {cfg.pairs} pairs over {cfg.keys} keys (values "
             f"{'without' if cfg.distinct_values else 'with'} replacement), short convolution "
             f"{cfg.conv}, {cfg.depth} blocks of width {cfg.d_model}, {cfg.steps} steps of "
             f"{cfg.batch}, {cfg.seeds} seeds; test accuracy (mean ± SE over seeds)"]
    for i, N in enumerate(a["N"]):
        cells = []
        for m in a["mixers"]:
            acc = np.asarray(a[f"{m}/acc"][i])
            if acc.size > 1:
                mu, se = mean_se(acc)
                cells.append(f"{m} {mu:.3f}±{se:.3f}")
            else:                     # one seed (a probe, the GPU run's gate): no SE
                cells.append(f"{m} {float(acc[0]):.3f} (one seed)")
        lines.append(f"N = {int(N)}: " + ", ".join(cells)
                     + f"; chance {float(a['chance']):.3f}, most-frequent-value rule "
                     f"{float(a['rule'][i]):.3f}")
    return lines


register(Simulation(
    name="gma-mqar",
    description="MQAR with the recall recipe (values without replacement, short convolution, "
                "warm-up and cosine decay) for the five mixers at equal parameter count "
                "(issue 44)",
    config_cls=MQARConfig,
    points=_points,
    run_point=_point,
    assemble=_assemble,
    summary=_summary,
))


# ------------------------------------------------------------------ the one-GPU run
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def keep_fragment(overrides: dict) -> str:
    """The ``key = value`` lines that make a profile's config the one that ran with
    ``overrides`` (for ``[paper]`` of ``simulations/gma-mqar.toml``, or a ``--config``
    file)."""
    return "\n".join(f"{k} = {_toml_value(v)}" for k, v in sorted(overrides.items()))


def gpu_run(budget_s: float = 600.0, *, profile: str = "paper", overrides: dict | None = None,
            results_dir="simulations/results", gate_length: int | None = None,
            timing_steps: int = 20, margin: float = 0.25, max_steps: int | None = None,
            log=print) -> dict:
    """The paper profile's run in ``budget_s`` seconds (issue 44 item 6), in three stages:

    1. **timing**: every (length, mixer) of the profile trains ``timing_steps`` steps with
       all seeds, in a throwaway folder (always measured on this machine, never read from
       a cache); the time per step past the compilation is measured;
    2. **gate**: softmax, one seed, at ``gate_length`` (default: the shortest length) for
       the profile's steps, through the cache; unless its final test accuracy reaches the
       profile's ``target``, the run stops there and says so (a mixer comparison where the
       reference has not learnt recall decides nothing);
    3. **main**: every mixer and seed at every length, through the cache, its steps (a
       multiple of ``records``, at most ``max_steps``) sized so that the measured time per
       step fills what is left of the budget less ``margin`` of it (evaluation, and the
       compilation of the main programs, which the timing pass does not share: steps are
       part of the program).  Fewer steps than the gate's stop the run (the gate would not
       vouch for a shorter schedule).  The sized steps are written beside the cache
       (``gma-mqar/gpu-run-PROFILE.json``) and reused by a rerun with the same overrides,
       so an interrupted main run resumes instead of starting over under a new size.

    The main run passes when its softmax, averaged over seeds at the gate's length,
    reaches ``target``.  Returns ``timing``, ``gate_acc``, ``passed`` (the gate),
    ``steps``, ``main_acc``, ``main_passed``, ``keep`` (the profile lines that reproduce the
    main run's config: :func:`keep_fragment`) and the main run's ``arrays``."""
    import json
    import tempfile
    from pathlib import Path

    from ..cache import atomic_write_bytes
    from . import get_simulation, make_config, run_simulation

    t0 = time.perf_counter()
    over = dict(overrides or {})
    cfg = make_config(get_simulation("gma-mqar"), profile, over)
    N_gate = int(gate_length or min(cfg.lengths))
    if N_gate not in cfg.lengths:
        raise ValueError(f"gate_length: must be one of the profile's lengths {cfg.lengths} "
                         f"(the main run's softmax is judged there), got {gate_length}.")
    if not (np.isfinite(budget_s) and budget_s > 0):
        raise ValueError(f"budget_s: seconds in all, a positive number; got {budget_s}.")
    if timing_steps < 2 or timing_steps % 2:
        raise ValueError(f"timing_steps: an even number >= 2 (two timed blocks), got "
                         f"{timing_steps}.")
    if not 0 <= margin < 1:
        raise ValueError(f"margin: the share of the budget kept back, in [0, 1); got "
                         f"{margin}.")
    if max_steps is not None and max_steps < cfg.records:
        raise ValueError(f"max_steps: at least records = {cfg.records}, got {max_steps}.")
    out = {"timing": {}, "gate_acc": None, "passed": False, "steps": None,
           "main_acc": None, "main_passed": False, "keep": None}
    sized = Path(results_dir) / "gma-mqar" / f"gpu-run-{profile}.json"
    prior = json.loads(sized.read_text()) if sized.exists() else {}
    if prior.get("overrides") != json.loads(json.dumps(over)):
        prior = {}
    per_step = {}
    if not prior:
        with tempfile.TemporaryDirectory() as tmp:
            for N in cfg.lengths:
                for m in cfg.mixers:
                    tm = {**over, "lengths": [int(N)], "mixers": [m],
                          "steps": int(timing_steps), "records": 2, "warmup": 0}
                    a, _, _ = run_simulation("gma-mqar", profile, tm, results_dir=tmp,
                                             progress=False)
                    sec = float(a[f"{m}/sec_per_step"][0])
                    if not (np.isfinite(sec) and sec > 0):
                        raise RuntimeError(f"timing: N = {N} {m} gave {sec} s a step; "
                                           "raise timing_steps (two blocks are timed).")
                    per_step[f"{int(N)}/{m}"] = sec
                    log(f"timing: N = {N} {m}: {sec * 1e3:.1f} ms a step ({cfg.seeds} seeds)")
    out["timing"] = prior.get("timing", per_step)
    gate = {**over, "lengths": [N_gate], "mixers": ["softmax"], "seeds": 1}
    a, _, _ = run_simulation("gma-mqar", profile, gate, results_dir=results_dir,
                             progress=False)
    out["gate_acc"] = gate_acc = float(a["softmax/acc"][0][0])
    out["passed"] = gate_acc >= cfg.target
    log(f"gate: softmax, one seed, N = {N_gate}, {cfg.steps} steps: test accuracy "
        f"{gate_acc:.4f} ({'reaches' if out['passed'] else 'misses'} the target "
        f"{cfg.target})")
    if not out["passed"]:
        log("stopped: the reference mixer has not learnt recall; no comparison is run.")
        return out
    if prior:
        steps = int(prior["steps"])
        log(f"main: resuming with the {steps} steps sized before ({sized})")
    else:
        left = budget_s - (time.perf_counter() - t0)
        total = sum(per_step.values())
        steps = int(left * (1 - margin) / total)
        steps = min(steps, int(max_steps)) if max_steps else steps
        steps = steps // cfg.records * cfg.records
        if steps < cfg.steps:
            log(f"stopped: {left:.0f} s left buys {steps} steps of every point, fewer than "
                f"the gate's {cfg.steps}; give a larger budget, or fewer mixers or lengths.")
            return out
        log(f"main: {steps} steps for {len(per_step)} points (estimated {steps * total:.0f} "
            f"s of the {left:.0f} s left)")
        sized.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(sized, json.dumps({"overrides": over, "steps": steps,
                                              "timing": per_step}, indent=1).encode())
    main = {**over, "steps": steps}
    if cfg.warmup >= steps:      # (the gate's steps bound steps from below: not reached)
        main["warmup"] = steps - 1
    out["steps"] = steps
    out["arrays"], _, _ = run_simulation("gma-mqar", profile, main, results_dir=results_dir,
                                         progress=True)
    i = list(cfg.lengths).index(N_gate)
    out["main_acc"] = float(np.mean(out["arrays"]["softmax/acc"][i])) \
        if "softmax" in cfg.mixers else None
    out["main_passed"] = out["main_acc"] is not None and out["main_acc"] >= cfg.target
    out["keep"] = keep_fragment(main)
    log(f"main: softmax at N = {N_gate}, mean over {cfg.seeds} seeds: "
        f"{out['main_acc'] if out['main_acc'] is not None else 'not run'} "
        f"({'reaches' if out['main_passed'] else 'misses'} the target {cfg.target}); done "
        f"in {time.perf_counter() - t0:.0f} s")
    return out


def _main(argv=None) -> int:
    import argparse

    import gmtheory

    from . import parse_overrides

    ap = argparse.ArgumentParser(prog="python -m gmtheory.simulations.gma_mqar",
                                 description="gma-mqar's one-GPU run: a timing pass, the "
                                 "softmax gate, then every mixer with its steps sized to the "
                                 "time left (issue 44 item 6).")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds in all (600)")
    ap.add_argument("--profile", default="paper", help="profile of simulations/gma-mqar.toml")
    ap.add_argument("--results", default="simulations/results", help="cache folder")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override profile fields, as `gmtheory run --set`")
    args = ap.parse_args(argv)
    gmtheory.use_fast_compile_flags()     # as the gmtheory command starts
    gmtheory.enable_x64()
    gmtheory.enable_compilation_cache()
    gmtheory.limit_blas_threads()
    out = gpu_run(args.budget, profile=args.profile,
                  overrides=parse_overrides(MQARConfig, args.set),
                  results_dir=args.results)
    if out["main_passed"]:
        where = "" if args.results == "simulations/results" else f" --results {args.results}"
        print(f"to keep it: put these lines in [{args.profile}] of simulations/gma-mqar.toml"
              f"\n{out['keep']}\nand run `gmtheory run gma-mqar --profile {args.profile}"
              f"{where} --commit` (it reads this run from the cache)")
    return 0 if out["main_passed"] else 1


if __name__ == "__main__":
    raise SystemExit(_main())
