"""A verdict per claim of the GMA reference, read from the committed ``cpu`` runs of
``gma-recall``, ``gma-lm`` and (once committed) ``gma-mqar`` (issue 27, item 6; issue 44):
the README's claim table.

Each claim is decided by comparisons of mean ± SE over seeds (seeds independent, so the
SE of a difference is ``sqrt(se_a^2 + se_b^2)``); a comparison is *resolved* when the
difference exceeds ``Z`` = 2 of its SEs.  The rules were fixed before the runs:

Every task row is first gated on learning (issue 44, fixed before the reruns): it is
*undecided* unless the reference mixer, softmax, beats the task's best trivial rule by more
than ``Z`` SE (seeds' SE and the rule's, combined), and on MQAR reaches ``LEARNT`` = 0.9.
The trivial rules need no recall or no mixing (:mod:`gmtheory.tasks`, computed on the run's
own data by :func:`gmtheory.simulations.gma_sims.recall_baselines` and
:func:`gmtheory.simulations.gma_lm.lm_baselines`):
the majority class and the root operator's majority label on ListOps (which is read at a
position that holds the root operator when bidirectional), chance and the most frequent
value in the sequence on MQAR, byte n-gram count models (1-5 bytes of context) on the LM.
A run that records no baseline decides nothing.

* **competitive long-context classification** (ListOps, bidirectional, the longest N):
  after the gate, *supported* if GMA is not resolved below softmax, *not supported* if it
  is.
* **causal GMA beats linear and random-feature attention but trails softmax and Mamba**
  (byte LM, validation bits per byte; and the same order on MQAR, our addition): after
  the gate, four comparisons of GMA with elu+1, FAVOR+, softmax and the SSM.
  *Supported* if all four are resolved in the claimed direction, *not supported* if any
  is resolved against it, otherwise *undecided* (the unresolved comparisons are named).
* **responsibilities specialise** (first GMA layer of the byte LM): *supported* if the NMI
  of the argmax component with the byte category exceeds that of the same layer before
  training (its seed's initial weights) by more than ``Z`` SE of the paired difference over
  seeds (heads averaged within a seed), *not supported* if it falls below it by as much.
  The untrained layer is the null, not shuffled categories: the first layer's input is set
  by the last few bytes (the byte and its position, and the short convolution's window),
  so any non-constant routing beats shuffled categories (issue 44).  A run without the
  untrained NMI, or with one seed, is *undecided*.
* **linear time and memory in N at fixed K** (``gmtheory bench gma``, the committed
  ``docs/bench-gma.json``): the log-log slopes of fwd+bwd time and compiled memory of
  every long-context (fused) GMA form, each K.  *Supported* if both were measured and
  every slope is below the benchmark's goal :data:`gmtheory.bench.plot.GOAL` (1.15, fixed
  with the benchmark) by more than ``Z`` SE, *not supported* if any is above it by more
  than ``Z`` SE, otherwise *undecided* (a fit of two sizes has no SE and decides nothing).

:func:`runs_table` lists what each run cost: parameters, time per step and peak memory.
Rendered into README.md and docs/topics/gma.md by ``python -m gmtheory.tables`` (measured
blocks ``gma-claims`` and ``gma-cpu-runs``).
"""

from __future__ import annotations

import numpy as np

from ..stats import mean_se

__all__ = ["Z", "claim_rows", "mqar_row", "memory_row", "claims_table", "runs_table",
           "with_baselines"]

Z = 2.0
LEARNT = 0.9     # MQAR accuracy at which softmax has learnt recall (issue 27's target)
LABEL = {"softmax": "softmax", "linear": "elu+1", "performer": "FAVOR+", "gma": "GMA",
         "ssm": "SSM"}


def _ms(v, f=".3f"):
    if np.size(v) < 2:                    # one seed has no SE (mean_se refuses it)
        return f"{float(np.mean(v)):{f}} (one seed)"
    mu, se = mean_se(np.asarray(v, float))
    return f"{mu:{f}} ± {se:{f}}"


def _diff(a, b):
    """``(mean(a) - mean(b), SE of the difference)`` for independent seeds."""
    (ma, sa), (mb, sb) = mean_se(np.asarray(a, float)), mean_se(np.asarray(b, float))
    return ma - mb, float(np.hypot(sa, sb))


def _order(vals: dict, better: str, against) -> tuple[str, list[str]]:
    """GMA against each ``(mixer, claimed)`` (``claimed``: ``"above"`` if the claim puts
    GMA ahead of that mixer).  ``better``: ``"higher"`` or ``"lower"`` values are better.
    Returns the verdict and the unresolved or contrary comparisons."""
    sign = 1.0 if better == "higher" else -1.0
    against_claim, unresolved = [], []
    for m, claimed in against:
        if m not in vals:
            unresolved.append(f"{LABEL[m]} not run")
            continue
        d, se = _diff(vals["gma"], vals[m])
        ahead = sign * d                      # > 0: GMA better than m
        want = 1.0 if claimed == "above" else -1.0
        if want * ahead > Z * se:
            continue
        if want * ahead < -Z * se:
            against_claim.append(f"GMA {'behind' if want > 0 else 'ahead of'} {LABEL[m]} "
                                 f"({abs(d) / se:.1f} SE)")
        else:
            unresolved.append(f"vs {LABEL[m]} within {Z:g} SE")
    if against_claim:
        return "not supported", against_claim + unresolved
    return ("supported", []) if not unresolved else ("undecided", unresolved)


ORDER = (("linear", "above"), ("performer", "above"), ("softmax", "below"), ("ssm", "below"))


def _gate(ref, rule, rule_se, better="higher", learnt=None):
    """``None`` if softmax (``ref``, per seed) has learnt the task: beats the best trivial
    rule (``rule`` ± ``rule_se``) by more than ``Z`` SE and, with ``learnt``, reaches it;
    else the reason the row is undecided."""
    if rule is None:
        return "undecided: the run records no trivial-rule baseline (rerun it)"
    mu, se = mean_se(np.asarray(ref, float))
    sign = 1.0 if better == "higher" else -1.0
    margin, s = sign * (mu - rule), float(np.hypot(se, rule_se))
    if learnt is not None and mu < learnt:
        return f"undecided: softmax ({mu:.3f}) has not learnt the task (below {learnt:g})"
    if not margin > Z * s:
        return (f"undecided: softmax ({mu:.3f}) does not beat the best trivial rule "
                f"({rule:.3f}) by {Z:g} SE")
    return None


def _rule(a, task, i):
    """``(value, SE, text)`` of a recall task's best trivial rule at length index ``i``:
    the run's rule (``TASK/rule``) or the majority / chance rate, whichever is higher."""
    base = float(a[f"{task}/{str(a['mixers'][0])}/chance"][i])
    kind = "majority class" if task == "listops" else "chance"
    if f"{task}/rule" not in a:
        return None, 0.0, f"{kind} {base:.3f}; no trivial-rule baseline recorded"
    r, rse = float(a[f"{task}/rule"][i]), float(a[f"{task}/rule_se"][i])
    text = f"{kind} {base:.3f}; {a[f'{task}/rule_name']} rule {r:.3f} ± {rse:.3f}"
    return (r, rse, text) if r >= base else (base, 0.0, text)


def mqar_row(a) -> tuple[str, str, str, str]:
    """The associative-recall row from a ``gma-mqar`` run's arrays (values without
    replacement, short convolution: issue 44 item 3), at its longest length, gated as the
    other task rows (softmax at least ``LEARNT`` and above the best rule by ``Z`` SE)."""
    mixers = [str(m) for m in a["mixers"]]
    i = int(np.argmax(a["N"]))
    acc = {m: a[f"{m}/acc"][i] for m in mixers}
    base, r, rse = float(a["chance"]), float(a["rule"][i]), float(a["rule_se"][i])
    rule, rule_se = (r, rse) if r >= base else (base, 0.0)
    seeds = min(np.size(v) for v in acc.values())
    gate = ("undecided: softmax not run" if "softmax" not in acc else
            f"undecided: {seeds} seed (a mean ± SE needs two)" if seeds < 2 else
            _gate(acc["softmax"], rule, rule_se, learnt=LEARNT))
    verdict, notes = (gate, []) if gate else _order(acc, "higher", ORDER)
    ev = ", ".join(f"{LABEL[m]} " + (_ms(acc[m]) if np.size(acc[m]) > 1 else
                                     f"{float(np.ravel(acc[m])[0]):.3f} (one seed)")
                   for m in mixers)
    ev += f"; chance {base:.3f}; most frequent value rule {r:.3f} ± {rse:.3f}"
    if "softmax" in acc and seeds >= 2:       # every mixer ranked against the reference
        ev += "; minus softmax: " + ", ".join(
            "{} {:+.3f} ± {:.3f}".format(LABEL[m], *_diff(acc[m], acc["softmax"]))
            for m in mixers if m != "softmax")
    return (f"same order on associative recall (MQAR N = {int(a['N'][i])}, values without "
            "replacement, acc.; our addition)",
            verdict + (f" ({'; '.join(notes)})" if notes else ""), ev,
            "`gmtheory run gma-mqar --profile cpu`")


#: the command cell of rows read from gma-recall's retired cpu record (issue 44, item 4)
RETIRED_RECALL = ("the retired cpu run of gma-recall (`simulations/committed/gma-recall/"
                  "retired/`; profile dropped, see `simulations/gma-recall.toml`)")


def claim_rows(recall, lm, mqar=None) -> list[tuple[str, str, str, str]]:
    """``(claim, verdict, evidence, command)`` rows from the arrays of the committed cpu
    runs (``recall``, ``lm``, ``mqar``: a ``(arrays, meta)`` pair or ``None``); a
    ``gma-mqar`` run (``mqar``) gives the associative-recall row in place of
    ``gma-recall``'s MQAR, whose values repeat (:func:`mqar_row`)."""
    rows = []
    if recall is not None:
        a, meta = recall
        mixers = [str(m) for m in a["mixers"]]
        cmd = "`gmtheory run gma-recall --profile cpu`"
        if meta.get("retired"):
            cmd = RETIRED_RECALL
        if "listops/N" in a:
            i = int(np.argmax(a["listops/N"]))
            N = int(a["listops/N"][i])
            acc = {m: a[f"listops/{m}/acc"][i] for m in mixers}
            rule, rule_se, text = _rule(a, "listops", i)
            ev = ", ".join(f"{LABEL[m]} {_ms(acc[m])}" for m in mixers)
            means = [float(np.mean(v)) for v in acc.values()]
            ev += f"; {text}; the {len(mixers)} means span {max(means) - min(means):.3f}"
            gate = _gate(acc["softmax"], rule, rule_se)
            if gate is not None:
                verdict = gate
            else:
                d, s = _diff(acc["gma"], acc["softmax"])
                verdict = "supported" if d > -Z * s else f"not supported (−{-d / s:.1f} SE)"
            rows.append((f"competitive long-context classification (ListOps N = {N}, acc.)",
                         verdict, ev, cmd))
        if "mqar/N" in a and mqar is None:
            i = int(np.argmax(a["mqar/N"]))
            N = int(a["mqar/N"][i])
            acc = {m: a[f"mqar/{m}/acc"][i] for m in mixers}
            rule, rule_se, text = _rule(a, "mqar", i)
            gate = _gate(acc["softmax"], rule, rule_se, learnt=LEARNT) \
                if "softmax" in acc else "undecided: softmax not run"
            verdict, notes = (gate, []) if gate else _order(acc, "higher", ORDER)
            ev = ", ".join(f"{LABEL[m]} {_ms(acc[m])}" for m in mixers)
            ev += f"; {text}"
            rows.append((f"same order on associative recall (MQAR N = {N}, acc.; our addition)",
                         verdict + (f" ({'; '.join(notes)})" if notes else ""), ev, cmd))
    if mqar is not None:
        rows.append(mqar_row(mqar[0]))
    if lm is not None:
        a, _ = lm
        mixers = [str(m) for m in a["mixers"]]
        cmd = "`gmtheory run gma-lm --profile cpu`"
        bpb = {m: a[f"{m}/val_bpb"][:, -1] for m in mixers}
        if "ngram/bpb" in a:
            j = int(np.argmin(a["ngram/bpb"]))
            best = float(a["ngram/bpb"][j])
            grams = ", ".join(f"{int(k)}: {float(v):.2f}"
                              for k, v in zip(a["ngram/orders"], a["ngram/bpb"], strict=True))
        else:
            best, grams = None, "not recorded"
        gate = _gate(bpb["softmax"], best, 0.0, better="lower") \
            if "softmax" in bpb else "undecided: softmax not run"
        verdict, notes = (gate, []) if gate else _order(bpb, "lower", ORDER)
        ev = ", ".join(f"{LABEL[m]} {_ms(bpb[m])}" for m in mixers)
        ev += f"; byte n-gram models (bytes of context: bits/byte) {grams}"
        rows.append(("causal GMA beats elu+1 and FAVOR+, trails softmax and Mamba "
                     "(byte LM, val. bits/byte)",
                     verdict + (f" ({'; '.join(notes)})" if notes else ""), ev, cmd))
        if "gma/resp_nmi" in a:
            nmi = np.mean(a["gma/resp_nmi"], 1)                   # (seeds,) over heads
            if "gma/resp_nmi_untrained" in a:
                n0 = np.mean(a["gma/resp_nmi_untrained"], 1)
                null = f"untrained layer {_ms(n0)}"
                if len(nmi) < 2:
                    verdict = f"undecided: {len(nmi)} seed (a mean ± SE needs two)"
                else:
                    d, se = mean_se(nmi - n0)                     # paired by seed
                    verdict = ("supported" if d > Z * se else
                               f"not supported ({d:+.3f} ± {se:.3f}: below the untrained "
                               "layer)" if d < -Z * se else
                               f"undecided ({d:+.3f} ± {se:.3f} over the untrained layer)")
            else:
                verdict = "undecided: the run records no untrained-layer NMI (rerun it)"
                null = "untrained layer not recorded"
            if "gma/resp_nmi_shuffled" in a:
                null += f", shuffled categories {_ms(np.mean(a['gma/resp_nmi_shuffled'], 1))}"
            ev = (f"NMI {_ms(nmi)} vs {null}; usage entropy "
                  f"{_ms(np.mean(a['gma/resp_usage_entropy'], 1))}, dead fraction "
                  f"{_ms(np.mean(a['gma/resp_dead_fraction'], 1))}")
            rows.append(("responsibilities specialise on byte categories (first layer)",
                         verdict, ev, cmd))
    return rows


def memory_row(bench: dict) -> tuple[str, str, str, str]:
    """The ``(claim, verdict, evidence, command)`` row of the linear-memory claim from a
    ``gmtheory bench gma`` result (its JSON, read back)."""
    from ..bench.gma import summarise_gma
    from ..bench.plot import GOAL

    slopes = summarise_gma(bench)["slopes"]
    fits = {k: v for k, v in slopes.items() if k.startswith(("gma-causal[", "gma-bidirectional["))
            and ", fused]" in k and not k.endswith(" fwd_s")}
    below = [v["se"] is not None and v["slope"] + Z * v["se"] < GOAL for v in fits.values()]
    above = [v["se"] is not None and v["slope"] - Z * v["se"] > GOAL for v in fits.values()]
    both = all(any(k.endswith(f) for k in fits) for f in (" fwdbwd_s", " fwdbwd_temp_bytes"))
    verdict = ("undecided: no fused GMA form was measured" if not fits else
               "not supported" if any(above) else
               "undecided: time or memory not measured" if not both else
               "supported" if all(below) else "undecided (a slope within "
               f"{Z:g} SE of {GOAL:g})")

    def span(field):
        vs = [v for k, v in fits.items() if k.endswith(field)]
        if not vs:
            return "not measured"
        lo, hi = min(vs, key=lambda v: v["slope"]), max(vs, key=lambda v: v["slope"])
        return f"{lo['slope']:.2f} ± {lo['se'] or 0:.2f} to {hi['slope']:.2f} ± {hi['se'] or 0:.2f}"

    ev = "no fused rows"
    if fits:
        Ns = [n for v in fits.values() for n in v["N"]]
        Ks = sorted({int(k.split("K=")[1].split(",")[0]) for k in fits})
        ev = (f"log-log slopes of the fused causal and bidirectional forms (K = "
              f"{', '.join(map(str, Ks))}; N = {min(Ns)}–{max(Ns)}): fwd+bwd time "
              f"{span(' fwdbwd_s')}, compiled memory {span(' fwdbwd_temp_bytes')}; goal "
              f"≤ {GOAL:g}")
        sm = slopes.get("softmax-xla-causal[K=None] fwdbwd_s")
        if sm:
            ev += f"; XLA softmax time {sm['slope']:.2f} ± {sm['se'] or 0:.2f}"
    return ("linear time and memory in N at fixed K (fwd+bwd, CPU)", verdict, ev,
            "`gmtheory bench gma`")


def _committed(profile: str) -> dict:
    from ..simulations import get_simulation, has_profile, load_all
    from ..simulations.committed import load_committed, load_retired

    load_all()
    got = {}
    for n in ("gma-recall", "gma-lm", "gma-mqar"):
        if has_profile(get_simulation(n), profile):
            got[n] = load_committed(n, profile)
        else:                         # a dropped profile: its retired record, if any
            old = load_retired(n, profile)
            got[n] = None if old is None else (
                old[0], dict(old[1], retired=True),
                f"{n} [{profile}]: retired record (the profile was dropped)")
    if all(v is None for v in got.values()):
        raise FileNotFoundError(f"no committed {profile} run of gma-recall, gma-lm or "
                                "gma-mqar")
    return {n: None if v is None else (with_baselines(n, *v[:2]),) + tuple(v[1:])
            for n, v in got.items()}


def with_baselines(name, arrays, meta):
    """A committed run recorded before the trivial rules were (issue 44): the rules
    computed on its own data, from its config (the data are seeded: the same), and kept
    beside it (``baselines/PROFILE.npz``, keyed by the config and tied to the source of
    the rules by its fingerprint: ~1 min to recompute, so written once and committed)."""
    from ..cache import config_key, load_result, save_result, source_fingerprint
    from ..simulations import get_simulation, gma_lm, gma_sims
    from ..simulations.committed import committed_stem

    if name == "gma-recall" and any(f"{t}/rule" in arrays for t in arrays["tasks"]):
        return arrays
    if name == "gma-lm" and "ngram/bpb" in arrays or name == "gma-mqar":
        return arrays          # gma-mqar records its rules in every run
    profile = meta.get("profile") or "cpu"
    stem = committed_stem(name, profile).parent / "baselines" / profile
    stem.parent.mkdir(parents=True, exist_ok=True)
    G = gma_sims if name == "gma-recall" else gma_lm
    fp = source_fingerprint([G.__name__])
    key = config_key(meta["config"], "trivial-rules")
    hit = load_result(stem, key, fp)
    if hit is None:
        cfg = _config(get_simulation(name).config_cls, meta["config"])
        extra = G.recall_baselines(cfg) if name == "gma-recall" else G.lm_baselines(cfg)
        save_result(stem, extra, {"key": key, "fingerprint": fp.as_dict(),
                                  "what": f"trivial-rule baselines of {name} [{profile}]"})
    else:
        extra = hit[0]
    return {**arrays, **extra}


def _config(cls, stored: dict):
    """A config object from a sidecar's stored config (JSON lists back to tuples)."""
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})


def claims_table(profile: str = "cpu", bench: str | None = None) -> str:
    """The Markdown claim table from the committed ``profile`` runs and, when given, the
    ``gmtheory bench gma`` JSON ``bench`` (the linear-memory row); raises
    ``FileNotFoundError`` when neither run is committed for the profile's config."""
    import json
    from pathlib import Path

    got = _committed(profile)
    pair = {n: None if v is None else v[:2] for n, v in got.items()}
    rows = claim_rows(pair["gma-recall"], pair["gma-lm"], pair.get("gma-mqar"))
    if bench is not None and Path(bench).exists():
        rows.append(memory_row(json.loads(Path(bench).read_text())))
    out = ["| claim of the GMA reference | verdict at this scale | mean ± SE over seeds "
           "| produced by |", "|---|---|---|---|"]
    out += [f"| {c} | {v} | {e} | {cmd} |" for c, v, e, cmd in rows]
    return "\n".join(out) + (f"\n\nA comparison counts when the difference exceeds {Z:g} "
                             "SE (rules: `gmtheory/figures/gma_claims.py`).\n")


def runs_table(profile: str = "cpu") -> str:
    """Per run and mixer: parameters and ms per step (all seeds together, compilation
    excluded); per run: wall time and the process's peak memory (a high-water mark, so one
    number per run)."""
    got = _committed(profile)
    out = ["| run | task / mixer | parameters | ms / step (3 seeds) |", "|---|---|---|---|"]
    notes = []
    for name, v in got.items():
        if v is None:
            continue
        a, meta = v[0], v[1]
        name = f"{name} (retired)" if meta.get("retired") else name
        mins = (meta.get("committed", {}).get("run_seconds") or 0) / 60
        parts = ([f"{t}/{m}" for t in (str(x) for x in a["tasks"]) for m in a["mixers"]]
                 if "tasks" in a else [str(m) for m in a["mixers"]])
        # (gma-mqar's arrays have a leading length axis: the mean over lengths per mixer)
        peak = max(float(np.max(a[f"{p}/peak_rss_mb"])) for p in parts
                   if f"{p}/peak_rss_mb" in a) if any(f"{p}/peak_rss_mb" in a
                                                       for p in parts) else None
        for p in parts:
            out.append(f"| {name} | {p} | {int(np.ravel(a[f'{p}/params'])[0])} | "
                       f"{1e3 * float(np.mean(a[f'{p}/sec_per_step'])):.0f} |")
        notes.append(f"{name}: {mins:.0f} min wall"
                     + (f", peak memory {peak / 1024:.1f} GiB" if peak else ""))
    return "\n".join(out) + "\n\n" + "; ".join(notes) + ".\n"
