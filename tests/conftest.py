import jax
import pytest

import gmtheory

jax.config.update("jax_enable_x64", True)
gmtheory.enable_compilation_cache()
gmtheory.limit_blas_threads()


@pytest.fixture
def key():
    return jax.random.key(1234)
