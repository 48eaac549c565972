import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import approx as A
from gmtheory.simulations import run_simulation


def test_relu_constant_is_the_sup():
    # c = max_u u/(1+e^u), checked against a dense grid independent of brentq
    u = np.linspace(1e-6, 10, 2_000_001)
    assert abs(A.RELU_C - np.max(u / (1 + np.exp(u)))) < 1e-11


def test_relu_goes_through_attention_and_is_exact_formula():
    t = jnp.linspace(-3, 3, 101)
    np.testing.assert_allclose(A.relu(t, 7.0), t * jax.nn.sigmoid(7.0 * t), rtol=1e-13,
                               atol=1e-15)


def test_constructions_match_ideal_limits():
    x = jax.random.uniform(jax.random.key(0), (50, 5))
    np.testing.assert_allclose(A.max_one_head(x, 1e6), x.max(1), atol=1e-5)
    out, res = A.max_relu_tree(x, 1e7)
    np.testing.assert_allclose(out, x.max(1), atol=1e-6)
    assert res.heads == 4 and res.layers == 3
    err = A.min_one_head(x, 50.0) - x.min(1)
    assert float(err.min()) >= 0 and float(err.max()) <= A.max_one_head_bound(5, 50.0)
    mn, _ = A.min_relu_tree(x, 1e7)
    np.testing.assert_allclose(mn, x.min(1), atol=1e-6)
    sq, res = A.square(jnp.array([0.0, 0.25, 0.5, 1.0]), 3)
    np.testing.assert_allclose(sq, [0.0, 0.0625, 0.25, 1.0], atol=1e-4)  # dyadic points
    assert res == A.Resources(9, 3, A.beta_for_levels(3))
    xy, res = A.multiply(jnp.array([0.3]), jnp.array([0.7]), 6)
    assert abs(float(xy[0]) - 0.21) <= A.multiply_bound(6)
    rec, _ = A.reciprocal_pl(jnp.array([0.25, 0.5, 1.0]), 0.25, 3, 1e9)
    np.testing.assert_allclose(rec, [4.0, 2.0, 1.0], atol=1e-6)  # knots are exact


def test_bad_inputs():
    with pytest.raises(ValueError, match="beta: must be a positive"):
        A.relu(jnp.ones(3), -1.0)
    with pytest.raises(ValueError, match="p: need at least 2 anchors"):
        A.interpolation_head(jnp.ones(3), -1, 1, 1, 10.0)
    with pytest.raises(ValueError, match="a, b: need a < b"):
        A.interpolation_head(jnp.ones(3), 1, -1, 5, 10.0)
    with pytest.raises(ValueError, match="x: expected shape"):
        A.max_one_head(jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match="a: need 0 < a < 1"):
        A.reciprocal_pl(jnp.ones(3), 0.0, 4, 10.0)
    with pytest.raises(ValueError, match="t: contains"):
        A.relu(jnp.array([jnp.nan]), 1.0)
    with pytest.raises(ValueError, match="x, y: shapes"):
        A.multiply(jnp.ones(3), jnp.ones(2), 2)


def test_trained_pipeline_small(tmp_path):
    a, _, _ = run_simulation("approx-trained", overrides={
        "steps": 50, "generic_steps": 20, "seeds": 2, "levels": (1,), "pieces": (4,),
        "betas": (), "anchors": (), "mul_levels": (), "newton_steps": ()},
        results_dir=tmp_path, progress=False)
    assert a["square/sup"].shape == (1, 2) and np.all(np.isfinite(a["square/sup"]))
    np.testing.assert_allclose(a["square/constructive"], [0.0625], rtol=1e-3)
    assert "multiply/sup" not in a  # an empty size list leaves its family out


def test_trained_generic_family_contains_the_construction():
    from gmtheory.simulations import approx_trained as T

    r = T.train_generic(jax.random.key(0), "relu", 100.0, seeds=2, steps=10)
    # the construction's error on the evaluation grid is its exact sup c/beta
    np.testing.assert_allclose(float(r["constructive"]), A.relu_bound(100.0), rtol=1e-3)
    assert r["sup"].shape == (2,) and np.all(np.isfinite(r["sup"]))
    # the family at the construction's parameters is the construction
    p = {"layers": [{"A": jnp.zeros((1, 1)), "B": jnp.ones((1, 1)), "b": jnp.zeros(1),
                     "M": jnp.ones((1, 1)), "c": jnp.zeros(1), "gamma": jnp.ones(1)}],
         "alpha": jnp.zeros(1), "delta": jnp.zeros(())}
    x = jnp.linspace(-1, 1, 11)[:, None]
    np.testing.assert_allclose(T._generic_model(p, x, "relu", 100.0, 3), A.relu(x[:, 0], 100.0),
                               rtol=1e-12)


# ------------------------------------------------------------ compile_relu_network
def _net(seed=0, widths=(8, 8, 1), d=2):
    rng = np.random.default_rng(seed)
    layers, prev = [], d
    for w in widths:
        layers.append((rng.normal(size=(w, prev)) / np.sqrt(prev), 0.5 * rng.normal(size=w)))
        prev = w
    return layers


def test_compiled_bound_holds_on_random_nets():
    for seed, d, widths in ((0, 1, (6, 1)), (1, 2, (8, 8, 1)), (2, 3, (4, 8, 4, 2))):
        layers = _net(seed, widths, d)
        net = A.compile_relu_network(layers, -1.0, 1.0, beta=50.0)
        x = jnp.asarray(np.random.default_rng(seed).uniform(-1, 1, (2000, d)))
        err = float(jnp.abs(net(x) - net.reference(x)).max())
        assert 0 < err <= net.bound
        assert net.resources.heads_per_layer == widths[:-1]
        assert net.resources.layers == len(widths) - 1 and net.resources.max_beta == 50.0


def test_compiled_eps_is_met_and_monotone():
    layers = _net()
    a = A.compile_relu_network(layers, -1.0, 1.0, eps=1e-2)
    b = A.compile_relu_network(layers, -1.0, 1.0, eps=1e-3)
    assert a.bound <= 1e-2 and b.bound <= 1e-3
    assert a.bound / b.bound >= 5 and b.resources.max_beta > a.resources.max_beta
    # the chosen beta is the smallest: 1 % less breaks eps
    beta = a.resources.max_beta
    assert A.compile_relu_network(layers, -1.0, 1.0, beta=0.99 * beta).bound > 1e-2


def test_compiled_accepts_an_equinox_mlp():
    import equinox as eqx

    mlp = eqx.nn.MLP(2, 1, 8, 2, activation=jax.nn.relu, key=jax.random.key(0))
    net = A.compile_relu_network(mlp, [-1.0, 0.0], [1.0, 2.0], beta=100.0)
    x = jnp.asarray(np.random.default_rng(0).uniform([-1, 0], [1, 2], (200, 2)))
    np.testing.assert_allclose(net.reference(x), jax.vmap(mlp)(x), atol=1e-5)
    tanh = eqx.nn.MLP(2, 1, 8, 2, activation=jax.nn.tanh, key=jax.random.key(0))
    with pytest.raises(ValueError, match="activation is not ReLU"):
        A.compile_relu_network(tanh, -1.0, 1.0, beta=1.0)


def test_compiled_bad_inputs():
    layers = _net()
    bad = [layers[0], (np.ones((1, 3)), np.zeros(1))]
    with pytest.raises(ValueError, match=r"layers\[1\]: W has 3 inputs"):
        A.compile_relu_network(bad, -1.0, 1.0, eps=1e-2)
    with pytest.raises(ValueError, match=r"layers\[0\]: b must have shape"):
        A.compile_relu_network([(np.ones((2, 2)), np.zeros(3))], -1.0, 1.0, eps=1e-2)
    with pytest.raises(ValueError, match="lo, hi: need lo < hi"):
        A.compile_relu_network(layers, 1.0, 1.0, eps=1e-2)
    with pytest.raises(ValueError, match="lo, hi: need lo < hi"):
        A.compile_relu_network(layers, [0.0, 1.0], [1.0, 0.0], eps=1e-2)
    with pytest.raises(ValueError, match="lo: expected a scalar or shape"):
        A.compile_relu_network(layers, [0.0, 0.0, 0.0], 1.0, eps=1e-2)
    for eps in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="eps: must be a positive"):
            A.compile_relu_network(layers, -1.0, 1.0, eps=eps)
    with pytest.raises(ValueError, match="eps, beta: pass exactly one"):
        A.compile_relu_network(layers, -1.0, 1.0)
    net = A.compile_relu_network(layers, -1.0, 1.0, beta=10.0)
    with pytest.raises(ValueError, match=r"x: expected shape \(n, 2\)"):
        net(jnp.ones((3, 5)))


def test_gap_bound_holds():
    x = np.random.default_rng(1).uniform(size=(500, 6))
    for beta in (2.0, 30.0):
        err = x.max(1) - np.asarray(A.max_one_head(jnp.asarray(x), beta))
        assert np.all(err <= A.max_one_head_gap_bound(x, beta) * (1 + 1e-9) + 1e-12)


def test_docs_compiler_example_runs(capsys):
    import re
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "topics" / "approx.md").read_text()
    section = page.split("## Compile your own ReLU network")[1].split("\n## ")[0]
    code, = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    exec(compile(code, "approx.md[compile]", "exec"), {"__name__": "__docs__"})
    lines = capsys.readouterr().out.strip().splitlines()
    expected = re.findall(r"```text\n(.*?)```", section, flags=re.S)[0].strip().splitlines()
    assert lines[0] == expected[0]  # the bound and resources line, as printed in the docs
    err, _, bound = lines[2].partition(" <= ")
    assert float(err) <= float(bound) <= 1e-3


def test_max_goes_through_the_compiler():
    x = jnp.asarray(np.random.default_rng(2).uniform(size=(3000, 5)))
    net = A.compile_relu_network(A.max_network(5), 0.0, 1.0, beta=200.0)
    np.testing.assert_allclose(net.reference(x)[:, 0], x.max(1), atol=1e-12)
    out, _ = A.max_relu_tree(x, 200.0)
    np.testing.assert_allclose(net(x)[:, 0], out, atol=1e-12)  # the same heads' arithmetic
    assert float(jnp.abs(net(x)[:, 0] - x.max(1)).max()) <= net.bound
    assert net.resources.layers == 3


# ------------------------------------------------------------ composition rules
def test_docs_composition_example_runs(capsys):
    import re
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "topics" / "approx.md").read_text()
    section = page.split("## Composition rules")[1].split("\n## ")[0]
    code, = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    exec(compile(code, "approx.md[compose]", "exec"), {"__name__": "__docs__"})
    lines = capsys.readouterr().out.strip().splitlines()
    expected = re.findall(r"```text\n(.*?)```", section, flags=re.S)[0].strip().splitlines()
    assert lines[:2] == expected[:2]  # the expression's bound and resources, as printed
    err, _, bound = lines[2].partition(" <= ")
    assert float(err) <= float(bound)
    np.testing.assert_allclose([float(v) for v in lines[3].split()],
                               [float(v) for v in expected[3].split()], rtol=1e-9)


def test_composition_identity_routes_and_bounds():
    from gmtheory import approx_compose as C

    (t,) = C.variables(0.0, 1.0)
    x = jnp.linspace(0.0, 1.0, 257)[:, None]
    sq = C.square(t, 3)
    np.testing.assert_array_equal(sq(x), A.square(x[:, 0], 3)[0])
    assert sq.bound == A.square_bound(3) and sq.resources.heads == 9
    # a shared node counts its heads once; layers follow the longest path
    f = sq + C.relu(sq - 0.5, 10.0)
    assert f.resources.heads == 10 and f.resources.layers == 4
    (s,) = C.variables(-2.0, 1.0)
    xs = jnp.linspace(-2.0, 1.0, 1001)[:, None]
    for g in (C.square(s, 4), 1 / (s + 3.0), C.maximum(s, 2 * s, -s, form="head", beta=30.0),
              C.clip(3 * s, -1.0, 1.0, 9, 50.0), C.relu(s * s - 1.0, 20.0)):
        assert float(jnp.abs(g(xs) - g.exact(xs)).max()) <= g.bound


def test_composition_bad_inputs():
    from gmtheory import approx_compose as C

    x, y = C.variables([-1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="f: 1/f needs f bounded away from 0"):
        C.reciprocal(x)
    (z,) = C.variables(0.0, 1.0)
    with pytest.raises(ValueError, match="the expressions live on different boxes"):
        C.multiply(x, z)
    with pytest.raises(ValueError, match="lo, hi: need lo < hi"):
        C.variables([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="form: must be 'tree' or 'head'"):
        C.maximum(x, y, form="soft")
    with pytest.raises(ValueError, match=r"x: expected shape \(n, 2\)"):
        (x + y)(jnp.ones((3, 3)))


def test_interpolation_head_affine_is_the_scalar_head_in_d3():
    rng = np.random.default_rng(3)
    w, x = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.uniform(-1, 1, (500, 3)))
    out = A.interpolation_head_affine(x, w, 0.2, -1.0, 1.0, p=17, beta=300.0)
    y = x @ w + 0.2
    np.testing.assert_allclose(out, A.interpolation_head(y, -1.0, 1.0, 17, 300.0), atol=1e-12)
    assert float(jnp.abs(out - jnp.clip(y, -1, 1)).max()) <= A.interpolation_bound(-1, 1, 17,
                                                                                   300.0)
    with pytest.raises(ValueError, match="x, w: expected x of shape"):
        A.interpolation_head_affine(x, w[:2], 0.0, -1.0, 1.0, p=5, beta=10.0)


def test_a_broken_max_head_fails_its_check_instead_of_raising(monkeypatch):
    """Issue 26: a wrong formula must turn verify red as a FAIL. Outputs above the max make
    the errors negative; the gap check's slope fit would take their log and raise."""
    import gmtheory.verify.approx_checks as AC
    from gmtheory.verify import run_checks, select_checks

    orig = AC.A.max_one_head
    monkeypatch.setattr(AC.A, "max_one_head", lambda x, beta: orig(x, beta) * 1.01)
    (res,) = run_checks([c for c in select_checks(None) if c.id == "approx.max-one-head-gap"],
                        progress=False)
    assert res.error is None and res.verdict == "FAIL"


# ------------------------------------- issue 43, item 7: the compiler's guarantees ----


def test_compiler_rejects_relu6_and_clipped_relus():
    import equinox as eqx

    for act in (jax.nn.relu6, lambda x: jnp.clip(x, 0.0, 100.0)):
        mlp = eqx.nn.MLP(2, 1, 4, 1, activation=act, key=jax.random.PRNGKey(0))
        with pytest.raises(ValueError, match="activation is not ReLU"):
            A.compile_relu_network(mlp, -1.0, 1.0, eps=0.1)


def test_compiler_names_each_bad_argument():
    W1, b1 = np.ones((2, 2)), np.zeros(2)
    layers = [(W1, b1), (np.ones((1, 2)), np.zeros(1))]
    with pytest.raises(ValueError, match=r"^eps: expected a positive number.*'0\.1'"):
        A.compile_relu_network(layers, -1.0, 1.0, eps="0.1")
    with pytest.raises(ValueError, match=r"layers\[0\]: W and b must be real"):
        A.compile_relu_network([(W1 + 1j, b1), layers[1]], -1.0, 1.0, eps=0.1)
    for call in (lambda: A.multiply(0.5, 0.5, -1), lambda: A.multiply_bound(-1),
                 lambda: A.square_bound(1.5)):
        with pytest.raises(ValueError, match="^m: the number of levels"):
            call()
    from gmtheory import approx_compose as C

    x = C.variables([-1.0], [1.0])[0]
    with pytest.raises(ValueError, match="^m: the number of levels"):
        C.multiply(x, x, m=-1)


def test_compiled_network_warns_outside_its_box():
    net = A.compile_relu_network([(np.eye(2), np.zeros(2)), (np.ones((1, 2)), np.zeros(1))],
                                 -1.0, 1.0, eps=0.05)
    with pytest.warns(UserWarning, match="outside the box"):
        net(np.array([[0.5, 0.5], [2.0, 0.0]]))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net(np.array([[0.5, -0.5]]))


def test_float32_results_are_certified_or_refused():
    """In float32 the certified bound includes the round-off (it held to 1.006e-6 against a
    bound of 1e-6 before), or the compiler refuses an eps that float32 cannot certify."""
    import subprocess
    import sys

    code = r"""
import jax, numpy as np
assert not jax.config.x64_enabled
from gmtheory import approx as A
rng = np.random.default_rng(0)
layers = [(rng.normal(size=(8, 3)), rng.normal(size=8)), (rng.normal(size=(8, 8)) / 3,
          rng.normal(size=8)), (rng.normal(size=(1, 8)), rng.normal(size=1))]
try:
    A.compile_relu_network(layers, -1.0, 1.0, eps=1e-6)
    raise SystemExit("float32 accepted eps = 1e-6")
except ValueError as e:
    assert "enable float64" in str(e), e
import equinox as eqx
mlp = eqx.nn.MLP(3, 1, 8, 2, key=jax.random.PRNGKey(0))   # default: relu, identity final
A.compile_relu_network(mlp, -1.0, 1.0, eps=1e-1)          # accepted in float32 too
net = A.compile_relu_network(layers, -1.0, 1.0, eps=1e-2)
x = rng.uniform(-1, 1, size=(20000, 3)).astype(np.float32)
h = x.astype(float)                      # the exact ReLU network, in NumPy float64
for W, b in layers[:-1]:
    h = np.maximum(h @ W.T + b, 0.0)
ref = h @ layers[-1][0].T + layers[-1][1]
err = float(np.max(np.abs(np.asarray(net(x), float) - ref)))
assert err <= net.bound and net.roundoff.max() > 0, (err, net.bound)
print("ok", err, net.bound)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "JAX_ENABLE_X64": "0"}, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_network_bound_holds_per_output_and_falls_with_beta():
    """relu_network_bound, called directly: per output, at least the sup error of the
    compiled network on 4000 points of the box (two and three hidden layers, two
    outputs), and smaller at a larger scale on every output."""
    for seed, d, widths in ((4, 2, (8, 2)), (5, 3, (6, 6, 2))):
        layers = _net(seed, widths, d)
        betas = [40.0] * (len(widths) - 1)
        bound = np.asarray(A.relu_network_bound(layers, -1.0, 1.0, betas))
        assert bound.shape == (widths[-1],)
        net = A.compile_relu_network(layers, -1.0, 1.0, beta=betas)
        x = jnp.asarray(np.random.default_rng(seed).uniform(-1, 1, (4000, d)))
        err = np.asarray(jnp.abs(net(x) - net.reference(x)).max(axis=0))
        assert np.all(err > 0) and np.all(err <= bound), (err, bound)
        finer = np.asarray(A.relu_network_bound(layers, -1.0, 1.0, [2 * b for b in betas]))
        assert np.all(finer < bound)


def test_a_constant_expression_is_exact_and_adds_like_a_number():
    """approx_compose.constant: the number on the box of its argument, emulated exactly
    (bound 0); added to an expression it gives what adding the number gives."""
    from gmtheory import approx_compose as C

    x, = C.variables(-1.0, 1.0)
    c = C.constant(2.5, x)
    pts = np.array([[-0.7], [0.0], [0.9]])
    np.testing.assert_array_equal(np.asarray(c(pts)), [2.5, 2.5, 2.5])
    np.testing.assert_array_equal(np.asarray(c.exact(pts)), [2.5, 2.5, 2.5])
    assert c.bound == 0.0 and c.range == (2.5, 2.5)
    np.testing.assert_allclose(np.asarray((x + c)(pts)), np.asarray((x + 2.5)(pts)), rtol=1e-15)


@pytest.mark.parametrize("m", [2, 4, 6])
def test_square_error_sits_between_its_interpolation_error_and_its_bound(m):
    """Yarotsky's squaring at the default scale (beta_for_levels: the attention's 8c/beta
    a tenth of 4^-(m+1)), measured on 20001 points of [0, 1]: its sup error against x^2 is
    at most square_bound(m) = 4^-(m+1) + 8c/beta and at least the piecewise-linear
    interpolation's own sup error 4^-(m+1) (attained at the midpoints of the 2^m pieces)
    less the attention's 8c/beta: the bound's first term is attained, the second is the
    stated tenth."""
    x = np.linspace(0.0, 1.0, 20001)
    out, _ = A.square(x, m)
    err = float(np.max(np.abs(np.asarray(out) - x**2)))
    interp, attention = 4.0 ** -(m + 1), 8 * A.RELU_C / A.beta_for_levels(m)
    assert attention == pytest.approx(interp / 10, rel=1e-12)
    assert interp - attention <= err <= A.square_bound(m)
    assert A.square_bound(m) == pytest.approx(interp + attention, rel=1e-12)
