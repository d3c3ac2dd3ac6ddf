"""Fixtures of the unit tests that use the language-model adapter on the tiny random Llama."""
from __future__ import annotations

import pytest

from tests.conftest import require


@pytest.fixture(scope="module")
def tl():
    """The public names of :mod:`icl_cmr.adapters.lm.loading` and :mod:`~icl_cmr.adapters.lm.extraction`
    as one namespace (skipped, or failed under ICL_CMR_REQUIRE_ALL=1, without torch)."""
    import types

    require("torch")
    require("transformer_lens")
    from icl_cmr.adapters.lm import extraction, loading

    return types.SimpleNamespace(**{name: getattr(module, name) for module in (loading, extraction)
                                    for name in module.__all__})


@pytest.fixture(scope="module")
def tiny(tl):
    """``tiny_model(seed=0)``: 2 layers, 4 query heads, 2 key/value heads, float32 on the CPU."""
    return tl.tiny_model(seed=0)
