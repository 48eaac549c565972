# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Explore a denoising regime: linear gap, one head, two heads
#
# Clean data $X$ from a Gaussian mixture, observed as $Z = X + \xi\,\varepsilon$; the task
# is to recover $X$ from $Z$ in mean squared error ([Denoising](../../topics/denoising/)).
# At every point of a sweep over the noise $\xi$ and the separation of the means,
# `gmtheory.explore` (see [Explore your own problem](../../explore/)) computes
#
# * the **Bayes** risk (MMSE) of the posterior mean $f^*(Z)$,
# * **linear attention**'s infinite-prompt limit, the best linear map $A^* z$ (Lemma C.7):
#   the distance from it to the Bayes risk is the *linear gap*,
# * the best sum of **one** and of **two softmax heads** (Prop. 2.1), found by L-BFGS, and
#   the share of the linear gap each closes, `head<M>_gap_recovered`
#   $= 1 - \text{excess}/(\text{linear risk} - \text{Bayes risk})$,
# * for two components with a shared isotropic covariance $\gamma^2 I$ and equal-norm
#   opposite means (the mixture below), the paper's **two-head construction** (App. C.6),
#   which realises $f^*$ exactly: `construction_excess` is its mean squared distance to
#   $f^*$.
#
# **To use it on your problem**, edit the mixture (any number of components, full
# covariances, any d; the construction only appears in the special case above), the
# `vary` axes (`noise`, `separation`, `cov_scale` or a single mixture entry such as
# `mixture.covs[0]`) and `options` (`heads` lists the head counts to search; more
# `starts` and `maxiter` search harder). Points are cached under `RESULTS`.

# %%
import os
import tempfile
import time
import warnings

import matplotlib.pyplot as plt

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm, no ipywidgets
import gmtheory as g

g.enable_x64()
t_start = time.perf_counter()
RESULTS = os.environ.get("GMTHEORY_NOTEBOOK_RESULTS",
                         os.path.join(tempfile.gettempdir(), "gmtheory-notebooks"))

spec = {
    "task": "denoising", "name": "nb-denoising",
    "mixture": {"weights": [0.5, 0.5],
                "means": [[1.0, 0.5], [-1.0, -0.5]],   # equal norms, opposite
                "covs": [0.3, 0.3]},                    # shared 0.3 * I
    "denoising": {"noise": 1.0},
    "vary": {"noise": [0.5, 1.0, 2.0], "separation": [1.0, 2.0]},
    "options": {"starts": 2, "maxiter": 100, "mc_samples": 40000, "heads": [1, 2]},
}
res = g.explore(spec, results_dir=RESULTS, progress=False)
p0 = res.points[0]
print(f"verdict {res.verdict}; {len(res.points)} points; construction: {p0['construction']}")
print(f"Bayes risk: {p0['bayes_method']}; heads evaluated by {p0['head_eval_method']}")

# %% [markdown]
# ## The numbers
#
# Risks are mean squared errors $\mathbb E|f(Z) - X|^2$. With this shared covariance the
# Bayes and linear risks are closed forms (exact); the heads' excess is a Monte Carlo mean
# on fresh pairs, with its SE in `head<M>_risk_se`.

# %%
print(f"{'noise':>5s} {'sep':>4s} {'Bayes':>8s} {'linear':>8s} {'1 head':>8s} {'2 heads':>8s}"
      f" {'gap':>8s} {'1 head recovers':>16s} {'2 heads recover':>16s} {'constr. excess':>15s}")
for p in res.points:
    print(f"{p['params']['noise']:5g} {p['params']['separation']:4g} {p['bayes_risk']:8.4f} "
          f"{p['linear_risk']:8.4f} {p['head1_risk']:8.4f} {p['head2_risk']:8.4f} "
          f"{p['linear_gap']:8.4f} {p['head1_gap_recovered']:16.1%} "
          f"{p['head2_gap_recovered']:16.1%} {p['construction_excess']:15.1e}")

print("\nexcess over Bayes of each start of the two-head search (best first):")
for p in res.points:
    starts = ", ".join(f"{e:.1e}" for e in sorted(p["head2_starts"]))
    print(f"noise {p['params']['noise']:g}, separation {p['params']['separation']:g}: {starts}")

# %% [markdown]
# ## Risks against noise
#
# Excess risk over Bayes (log scale) for linear attention and the best one-head fit; the
# two-head fits close the gap to round-off, so they are listed in the table, not drawn.

# %%
seps = sorted({p["params"]["separation"] for p in res.points})
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
for s in seps:
    pts = sorted((p for p in res.points if p["params"]["separation"] == s),
                 key=lambda p: p["params"]["noise"])
    xi = [p["params"]["noise"] for p in pts]
    axes[0].plot(xi, [p["linear_gap"] for p in pts], "-s", label=f"linear, separation {s:g}")
    axes[0].plot(xi, [p["head1_excess"] for p in pts], "--o", label=f"1 head, separation {s:g}")
    axes[1].plot(xi, [p["head1_gap_recovered"] for p in pts], "-o", label=f"separation {s:g}")
axes[0].set(xscale="log", yscale="log", xlabel="noise $\\xi$", ylabel="risk - Bayes risk")
axes[1].set(xscale="log", xlabel="noise $\\xi$", ylabel="share of the linear gap",
            title="closed by one softmax head", ylim=(0, 1.05))
for ax in axes:
    ax.set_xticks(xi, [f"{v:g}" for v in xi])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.legend(fontsize=7)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The phase figure
#
# `gmtheory.figures.explore.draw_regimes` draws the regime figure of a sweep (what
# `gmtheory explore` shows); `res.write(folder)` then writes `explore.json` and
# `report.md` (every value and comparison, with the figure) beside it.

# %%
from gmtheory.figures.explore import draw_regimes

out = os.path.join(RESULTS, "nb-denoising-out")
figure = draw_regimes(res, os.path.join(out, "regimes.png"))  # leaves the backend alone
paths = res.write(out)
fig, ax = plt.subplots(figsize=(8, 4))
ax.imshow(plt.imread(figure))
ax.axis("off")
fig.tight_layout()
plt.show()
print("written:", ", ".join(os.path.basename(str(v)) for v in paths.values()))

# %% [markdown]
# ## What the numbers show
#
# * **Two heads** reach the Bayes risk at every point: the best two-head fit has an
#   excess at round-off level, as does the paper's two-head construction
#   (`construction_excess`). The search starts from that construction among others; the
#   other starts stop 100 iterations later far above round-off (the list above), so the
#   random starts alone would not have found it.
# * **One head** is not enough everywhere: at noise 0.5 it closes at least 98% of the
#   linear gap, at noise 1 and 2 it leaves a visible share open (the table), and for each
#   noise level it closes less at separation 1 than at separation 2.
# * **The linear gap** itself grows with separation at every noise level here: the
#   further apart the components, the less the posterior mean looks like a linear map.
#
# Every comparison passed (verdict above). The one-head numbers are those of a small
# search (2 random starts plus structured ones, 100 L-BFGS iterations); a harder search
# could lower them. The next cell checks each statement against the numbers, so the
# notebook fails (and the docs build with it) if a change makes this text untrue.

# %%
assert res.verdict == "PASS"
at = {(p["params"]["noise"], p["params"]["separation"]): p for p in res.points}
noises = sorted({k[0] for k in at})
for p in res.points:
    assert p["head2_excess"] < 1e-20 and p["construction_excess"] < 1e-20
    assert sorted(p["head2_starts"])[1] > 1e-12
for xi in noises:
    lo, hi = at[(xi, 1.0)], at[(xi, 2.0)]
    assert lo["head1_gap_recovered"] < hi["head1_gap_recovered"]
    assert lo["linear_gap"] < hi["linear_gap"]
    for p in (lo, hi):
        if xi == 0.5:
            assert p["head1_gap_recovered"] >= 0.98
        else:
            assert p["head1_gap_recovered"] < 0.95
print("every statement above holds")

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")
