"""Compile levels (gmtheory/_xla.py): the process default is level 0, and the programs
that run long pick their level-1 variants by the documented rules; a level-1 variant
computes what the default one does, to float64 round-off."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gmtheory
from gmtheory import _xla, icl, operators, problems, training


class _Picked(Exception):
    pass


def _spy(monkeypatch, module, name, picked):
    """Replace ``module.name`` by a callable that records ``name`` and stops the caller."""
    def stop(*args, **kwargs):
        picked.append(name)
        raise _Picked
    monkeypatch.setattr(module, name, stop)


def test_fast_compile_flags_set_level_0_and_legacy_emitters_unless_told(monkeypatch):
    monkeypatch.delenv("GMTHEORY_XLA_OPT_LEVEL", raising=False)
    monkeypatch.delenv("GMTHEORY_XLA_EMITTERS", raising=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    gmtheory.use_fast_compile_flags()                      # an emitter choice already set stays
    assert gmtheory._os.environ["XLA_FLAGS"] == ("--xla_cpu_use_fusion_emitters=true "
                                                 "--xla_backend_optimization_level=0")
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
    gmtheory.use_fast_compile_flags()                      # a level already set stays
    assert gmtheory._os.environ["XLA_FLAGS"] == ("--xla_backend_optimization_level=2 "
                                                 "--xla_cpu_use_fusion_emitters=false")
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("GMTHEORY_XLA_OPT_LEVEL", "default")
    monkeypatch.setenv("GMTHEORY_XLA_EMITTERS", "fusion")
    gmtheory.use_fast_compile_flags()
    assert gmtheory._os.environ["XLA_FLAGS"] == ""
    monkeypatch.setenv("GMTHEORY_XLA_EMITTERS", "fast")
    with pytest.raises(ValueError, match="GMTHEORY_XLA_EMITTERS"):
        gmtheory.use_fast_compile_flags()


def test_a_long_softmax_asks_for_the_fusion_emitters():
    # a long softmax runs ~2.5x slower with the legacy emitters (docs/performance.md)
    assert _xla.LONG_FUSED["xla_cpu_use_fusion_emitters"] is True
    def g(x):
        return jax.nn.softmax(x) @ x

    x = jnp.linspace(0.0, 1.0, 8)
    for fused in (False, True):
        np.testing.assert_allclose(np.asarray(_xla.jit_long(g, fused=fused)(x)),
                                   np.asarray(jax.jit(g)(x)), rtol=1e-12)


def test_training_blocks_of_long_runs_compile_at_level_1(monkeypatch):
    calls = []
    real = training.jit_long
    monkeypatch.setattr(training, "jit_long", lambda f, **kw: calls.append(1) or real(f, **kw))
    training.clear_programs()
    loss = lambda p, d, k: jnp.sum((p - 1.0) ** 2)          # noqa: E731
    for steps in (_xla.LONG_RUN_STEPS - 1, _xla.LONG_RUN_STEPS):
        before = len(calls)
        training.train(loss, jnp.zeros(2), optax.sgd(0.1), steps=steps, progress=False)
        assert len(calls) - before == (steps >= _xla.LONG_RUN_STEPS), steps
    training.clear_programs()


def test_cg_trials_and_long_prompts_pick_the_level_1_programs(monkeypatch):
    picked = []
    for name in ("_gtask_cg", "_gtask_direct"):
        _spy(monkeypatch, icl, name, picked)
    for d in (4, 20):           # d (d + 1) = 20 (direct) and 420 > DIRECT_MAX_PARAMS (CG)
        with pytest.raises(_Picked):
            icl.g_task_trials(jax.random.key(0), d, alpha=1.0, tau=1.5, kappa=1.0, rho=0.1,
                              lam=1e-3, trials=1)
    assert picked == ["_gtask_direct", "_gtask_cg"]

    picked.clear()
    for name in ("_online_softmax_long", "online_softmax"):
        _spy(monkeypatch, operators, name, picked)
    U, V, z = jnp.eye(2), jnp.eye(2), jnp.ones((1, 2))
    for L in (_xla.LONG_RUN_TOKENS // 2, _xla.LONG_RUN_TOKENS):
        with pytest.raises(_Picked):
            operators.softmax_attention(jnp.zeros((2, L // 2, 2)), U, V, z)
    assert picked == ["online_softmax", "_online_softmax_long"]

    picked.clear()
    for name in ("_sample_prompts_long", "_sample_prompts"):
        _spy(monkeypatch, problems, name, picked)
    keys = jax.random.split(jax.random.key(0), 4)
    for L in (_xla.LONG_RUN_TOKENS // 8, _xla.LONG_RUN_TOKENS // 4):
        with pytest.raises(_Picked):
            problems.sample_prompts(None, keys, L)
    assert picked == ["_sample_prompts", "_sample_prompts_long"]


def test_a_long_prompt_inside_an_outer_jit_is_traced_into_it():
    """JAX refuses ``compiler_options`` on a nested ``jit``: a prompt of LONG_RUN_TOKENS
    tokens attended to inside an outer jit (as icl-denoising's paper profile trains) uses
    the plain kernel, traced into the outer program, and gives the eager call's numbers."""
    U, V = jnp.eye(2), jnp.eye(2)
    toks = jnp.zeros((2, _xla.LONG_RUN_TOKENS // 2, 2)).at[:, :3].set(1.0)
    z = jnp.ones((1, 2))
    inside = jax.jit(operators.softmax_attention)(toks, U, V, z)
    np.testing.assert_allclose(inside, operators.softmax_attention(toks, U, V, z), rtol=1e-12)
    keys = jax.random.split(jax.random.key(0), 4)
    assert not _xla.traced(keys, U) and jax.jit(lambda k: _xla.traced(k) * 1)(keys) == 1
    mix = gmtheory.GaussianMixture(jnp.ones(1), jnp.zeros((1, 2)), jnp.eye(2)[None])
    L = _xla.LONG_RUN_TOKENS // 4                      # 4 keys: LONG_RUN_TOKENS tokens
    inside = jax.jit(problems.sample_prompts, static_argnames="L")(mix, keys, L=L)
    # the same draws; the two compile levels may round them differently (float64)
    np.testing.assert_allclose(inside, problems.sample_prompts(mix, keys, L), rtol=1e-13)


def test_the_level_1_variant_computes_the_same_numbers():
    """online_softmax compiled at the process level and at level 1: two compilations of one
    function, equal to float64 round-off (sums of 3000 terms: reordering moves ~1e-15)."""
    k1, k2 = jax.random.split(jax.random.key(7))
    toks, u = jax.random.normal(k1, (3000, 3)), jax.random.normal(k2, (5, 3))
    V = jnp.arange(6.0).reshape(2, 3) / 6
    a = operators.online_softmax(toks, u, V, chunk=512, with_se=True)
    b = operators._online_softmax_long(toks, u, V, chunk=512, with_se=True)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-12, atol=1e-15)
