import jax
import pytest

import gmtheory

jax.config.update("jax_enable_x64", True)
gmtheory.enable_compilation_cache()


@pytest.fixture
def key():
    return jax.random.key(1234)
