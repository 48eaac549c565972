import jax
import pytest

import gmtheory

jax.config.update("jax_enable_x64", True)
gmtheory.enable_compilation_cache()
gmtheory.limit_blas_threads()


@pytest.fixture
def key():
    return jax.random.key(1234)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` on pytest >= 9.2: pytest-xdist (3.8) tags a grouped test by
    assigning ``item._nodeid``, which pytest 9.2 no longer reads (``nodeid`` comes from
    ``item._id``), so ``xdist_group`` was silently ignored.  Tag it the way xdist means to:
    ``<nodeid>@<group>``, which its loadgroup scheduler sends to a single worker."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:      # older pytest: xdist's own tagging works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")
