"""Device, dtype, lean activations and peak memory of the language-model adapter (CPU only).

The tiny random Llama (:func:`tiny_model`; the same weights saved with ``save_pretrained`` and
loaded through :func:`load_model`) stands in for a 7B model: it runs in bfloat16 and float16 on
the CPU exactly as a large model would on a GPU.

Tolerance of the reduced-precision comparisons (fixed from the formats, not from the results):
a bfloat16 number keeps 8 significant bits, so each rounding is off by at most u = 2^-8 of the
value (float16: 11 bits, u = 2^-11). Between the embedding and a second-layer attention score
of the tiny model lie about 30 roundings (stored weights, norms, projections, rotary, scores,
softmax, value mixing, output projection, MLP, residual adds); with independent signs they add
like a random walk, sqrt(30) u ~ 5.5 u, and we allow three times that, 16 u, of each
statistic's scale (its largest magnitude over heads and lags). A misread mask, a wrong block or
a dtype cut in the wrong place moves statistics by a sizeable share of their scale instead.
"""
from __future__ import annotations

import io
import json
import os
import sys

import numpy as np
import pytest

from cmr.errors import ParameterError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

N_WORDS = 12
ROUNDINGS_ALLOWED = 16  # in units of the format's unit roundoff u, see the module docstring
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11}
STATISTICS = ("profile", "prob_profile", "induction_score", "duplicate_token_score", "previous_token_score",
              "soft_crp", "copying_score", "position_loss")


@pytest.fixture(scope="module")
def tiny_dir(tl, tmp_path_factory):
    """The float32 weights of ``tiny_model(seed=0)`` as a local model directory."""
    path = tmp_path_factory.mktemp("tiny-llama")
    hf_model, tokenizer = tl.tiny_hf_model(rng=0)
    hf_model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def words(tl, tiny):
    # one word list for every dtype: the prior that picks words shifts with the dtype (near-ties
    # swap), and the comparison is about the numerics of one set of prompts
    return list(tl.make_prompts(tiny, n_words=N_WORDS, n_prompts=1).words)


@pytest.fixture(scope="module")
def heads32(tl, tiny, words):
    return tl.extract_heads(tiny, n_words=N_WORDS, n_prompts=3, rng=1, lags=4, words=words)


def _unavailable_cuda():
    import torch

    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


# --- lean activations --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hooks_keep_exactly_the_blocks_cut_from_full_matrices(tl, dtype):
    from icl_cmr.adapters import head_profiles as hp

    model = tl.tiny_model(rng=0, dtype=dtype)
    tokens = tl.make_prompts(model, n_words=N_WORDS, n_prompts=1, rng=2).tokens[0]
    lags = hp.lag_range(5, N_WORDS)
    scores, probs, loss_full = tl.attention_pass(model, tokens)
    blocks, loss = tl.attention_blocks_pass(model, tokens, N_WORDS, lags)
    cut = hp.attention_blocks(scores, probs, N_WORDS, lags)
    assert set(blocks) == set(cut)
    for name in blocks:
        assert blocks[name].dtype == np.float32
        np.testing.assert_array_equal(blocks[name], cut[name])
    np.testing.assert_array_equal(loss, loss_full)
    # what leaves the device per head: N x lags + N^2 + 2N values instead of 2 (2N+1)^2
    assert sum(b[0, 0].size for b in blocks.values()) == N_WORDS * lags.size + N_WORDS**2 + 2 * N_WORDS


def test_extract_heads_equals_the_full_matrix_path_exactly(tl, tiny, words, heads32):
    """The lean path against the one that copies whole (layer, head, seq, seq) arrays to the host."""
    from icl_cmr.adapters import head_profiles as hp

    made = tl.make_prompts(tiny, n_words=N_WORDS, n_prompts=3, rng=1, words=words)
    lags = hp.lag_range(4, N_WORDS)
    summaries, losses = [], []
    for row in made.tokens:
        scores, probs, loss = tl.attention_pass(tiny, row)
        summaries.append(hp.prompt_summary(scores, probs, N_WORDS, lags))
        losses.append(loss)
    full = hp.head_profile_dataset(hp.pool_summaries(summaries), lags=lags, n_words=N_WORDS, model=tiny.name,
                                   copying_score=tl.copying_scores(tiny), position_loss=np.mean(losses, axis=0))
    for name in full.data_vars:
        np.testing.assert_array_equal(heads32[name].values, full[name].values, err_msg=name)


# --- reduced precision ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_profiles_are_close_to_float32(tl, tiny_dir, words, heads32, dtype):
    import torch

    model = tl.load_model(str(tiny_dir), device="cpu", dtype=dtype)
    assert (model.device, model.dtype) == ("cpu", dtype)
    assert {p.dtype for p in model.bridge.parameters()} == {getattr(torch, dtype)}  # float32 copy cast
    heads = tl.extract_heads(model, n_words=N_WORDS, n_prompts=3, rng=1, lags=4, words=words)
    u = UNIT_ROUNDOFF[dtype]
    for name in STATISTICS:
        ours, reference = heads[name].values, heads32[name].values
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(reference), err_msg=name)
        scale = np.nanmax(np.abs(reference))
        error = np.nanmax(np.abs(ours - reference))
        assert error <= ROUNDINGS_ALLOWED * u * scale, f"{name}: {error:.3g} > {ROUNDINGS_ALLOWED} u x {scale:.3g}"
    assert np.nanmax(np.abs(heads["profile"].values - heads32["profile"].values)) > 0  # really ran in {dtype}


def test_datasets_record_device_dtype_and_peak_memory(tl, tiny_dir, heads32):
    model = tl.load_model(str(tiny_dir), device="cpu", dtype="bfloat16")
    heads = tl.extract_heads(model, n_words=N_WORDS, n_prompts=1, lags=2)
    record = json.loads(heads.attrs["provenance"])
    for attrs in (heads.attrs, record):
        assert (attrs["device"], attrs["dtype"]) == ("cpu", "bfloat16")
        assert type(attrs["peak_memory_bytes"]) is int and attrs["peak_memory_bytes"] > 0
        assert "resident memory" in attrs["peak_memory_measure"]
    assert (heads32.attrs["device"], heads32.attrs["dtype"]) == ("cpu", "float32")


class _Proc:
    """``/proc/self/clear_refs`` and ``/proc/self/status`` of a process whose resident memory the
    test sets: writing 5 to clear_refs resets the peak (VmHWM) to the resident memory, as Linux does."""

    def __init__(self, resident: int, peak: int):
        self.resident, self.peak = resident, peak

    def touch(self, size: int) -> None:
        self.resident += size
        self.peak = max(self.peak, self.resident)

    def free(self, size: int) -> None:
        self.resident -= size

    def open(self, path, mode="r", *args, **kwargs):
        if path == "/proc/self/clear_refs":
            return _ClearRefs(self)
        if path == "/proc/self/status":
            return io.StringIO(f"Name:\tpython\nVmHWM:\t{self.peak // 1024} kB\nVmRSS:\t{self.resident // 1024} kB\n")
        return open(path, mode, *args, **kwargs)


class _ClearRefs(io.StringIO):
    def __init__(self, proc: _Proc):
        super().__init__()
        self.proc = proc

    def close(self):
        if self.getvalue() == "5":
            self.proc.peak = self.proc.resident
        super().close()


def test_peak_memory_is_measured_from_the_start_of_the_block(tl, monkeypatch):
    from icl_cmr.adapters.lm import devices

    mb = 2**20
    proc = _Proc(resident=300 * mb, peak=900 * mb)  # the process peaked higher before the blocks
    monkeypatch.setattr(devices, "open", proc.open, raising=False)  # the adapter's reads of /proc go to `proc`
    with tl.measure_peak_memory("cpu") as before:
        pass
    with tl.measure_peak_memory("cpu") as during:
        proc.touch(50 * mb)
        proc.free(50 * mb)
    with tl.measure_peak_memory("cpu") as after:
        pass
    measure = "peak resident memory of the process during the run (VmHWM)"
    assert before == after == {"peak_memory_bytes": 300 * mb, "peak_memory_measure": measure}
    assert during == {"peak_memory_bytes": 350 * mb, "peak_memory_measure": measure}


def test_peak_memory_without_a_reset_says_it_counts_from_the_process_start(tl, monkeypatch):
    import resource

    from icl_cmr.adapters.lm import devices
    from types import SimpleNamespace

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(devices, "open", refuse, raising=False)  # no /proc (not Linux, or not writable)
    monkeypatch.setattr(resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=700 * 1024))
    with tl.measure_peak_memory("cpu") as memory:
        pass
    assert memory["peak_memory_measure"] == "peak resident memory of the process since the process started (getrusage ru_maxrss)"
    assert memory["peak_memory_bytes"] == 700 * 1024 * (1 if sys.platform == "darwin" else 1024)


def test_ablation_losses_run_in_bfloat16(tl, tiny, tiny_dir):
    import torch

    from icl_cmr.adapters.lm import interventions

    model = tl.load_model(str(tiny_dir), dtype="bfloat16")
    seen = set()

    def spy(z, hook):
        seen.add(z.dtype)
        return z

    passages = np.random.default_rng(3).integers(2, 60, size=(4, 40))
    targets = np.arange(1, 39)
    base32, means32 = interventions.passage_losses(tiny.bridge, passages, targets, capture_means=True)
    with model.bridge.hooks(fwd_hooks=[("blocks.1.attn.hook_z", spy)]):
        base, means = interventions.passage_losses(model.bridge, passages, targets, capture_means=True, batch_size=3)
    assert seen == {torch.bfloat16} and base.dtype == means.dtype == np.float64
    u = UNIT_ROUNDOFF["bfloat16"]
    assert np.abs(base - base32).max() <= ROUNDINGS_ALLOWED * u * np.abs(base32).max()
    assert np.abs(means - means32).max() <= ROUNDINGS_ALLOWED * u * np.abs(means32).max()
    for mode in interventions.MODES:
        ablated, _ = interventions.passage_losses(model.bridge, passages, targets, heads=[(1, 2), (0, 1)],
                                                  mode=mode, means=means)
        reference = interventions.full_logit_losses(model.bridge, passages, targets, heads=[(1, 2), (0, 1)],
                                                    mode=mode, means=means)
        assert np.isfinite(ablated).all() and np.abs(ablated - base).max() > 1e-3
        np.testing.assert_allclose(ablated, reference, rtol=0, atol=ROUNDINGS_ALLOWED * u * np.abs(reference).max())


# --- bad devices and dtypes ------------------------------------------------------------------------


def test_device_and_dtype_names(tl):
    import torch

    assert tl.resolve_device("cpu") == "cpu"
    assert tl.resolve_device(None) == tl.resolve_device("auto") == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert tl.resolve_device(torch.device("cpu")) == "cpu"
    assert tl.resolve_dtype(None) == ("float32", torch.float32)
    assert tl.resolve_dtype(torch.bfloat16) == ("bfloat16", torch.bfloat16)
    assert tl.resolve_dtype("float16") == ("float16", torch.float16)


@pytest.mark.parametrize("kwargs, message", [
    ({"dtype": "float8"}, r"dtype must be one of float32, bfloat16, float16; got 'float8'"),
    ({"dtype": "int8"}, r"dtype must be one of"),
    ({"device": "tpu"}, r"device must be cpu, cuda, cuda:N, mps or auto; got 'tpu' \(available here: cpu"),
    ({"device": "unavailable cuda"}, r"is not available here; available: cpu"),
])
def test_unknown_dtype_or_device_is_one_parameter_error(tl, tiny_dir, kwargs, message):
    if kwargs.get("device") == "unavailable cuda":
        kwargs = {"device": _unavailable_cuda()}
    with pytest.raises(ParameterError, match=message):
        tl.load_model(str(tiny_dir), **kwargs)
    with pytest.raises(ParameterError, match=message):
        tl.tiny_model(**kwargs)


def _cli(argv, capsys):
    from icl_cmr.analyses.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["heads", "ablate", "run"])
@pytest.mark.parametrize("option", ["device", "dtype"])
def test_cli_refuses_an_unavailable_device_or_unknown_dtype_in_one_line(tl, tiny_dir, tmp_path, capsys,
                                                                        command, option):
    value = _unavailable_cuda() if option == "device" else "float8"
    argv = {
        "heads": ["heads", tiny_dir, "-o", tmp_path / "h.nc"],
        "ablate": ["ablate", tiny_dir, "--heads", "L1.H2", "-o", tmp_path / "a.nc"],
        "run": ["run", "-o", tmp_path / "run", "--model", "tiny-llama"],
    }[command] + [f"--{option}", value]
    code, _, err = _cli(argv, capsys)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith(f"icl-cmr {command}: error: {option}") and "Traceback" not in err
    assert not (tmp_path / "run" / "manifest.json").exists()  # refused before any stage


def test_heads_and_ablate_commands_run_in_bfloat16_and_print_peak_memory(tl, tiny_dir, tmp_path, capsys):
    from cmr.io import load_dataset

    code, out, _ = _cli(["heads", tiny_dir, "--n-words", N_WORDS, "--n-prompts", 2, "--lags", 3, "--device", "cpu",
                         "--dtype", "bfloat16", "--no-progress", "-o", tmp_path / "heads.nc"], capsys)
    assert code == 0 and "on cpu in bfloat16" in out and "peak memory" in out
    heads = load_dataset(tmp_path / "heads.nc", kind="lag_profile")
    assert heads.attrs["dtype"] == "bfloat16" and heads.attrs["peak_memory_bytes"] > 0

    vocabulary = [w.lstrip("Ġ") for w in tl.tiny_hf_model()[1].get_vocab() if w.startswith("Ġ") and w[1:].isalpha()]
    text = tmp_path / "text.txt"
    text.write_text("".join(" " + w for w in np.random.default_rng(0).choice(sorted(vocabulary), 400)))
    code, out, _ = _cli(["ablate", tiny_dir, "--heads", "L1.H2", "--text", text, "--n-passages", 4,
                         "--n-tokens", 32, "--early", 5, "--late", 20, "--window", 2, "--n-random", 2,
                         "--mode", "both", "--batch-size", 2, "--dtype", "bfloat16", "-o", tmp_path / "abl.nc"], capsys)
    assert code == 0 and "in bfloat16" in out and "peak memory" in out
    result = load_dataset(tmp_path / "abl.nc", kind="ablation")
    record = json.loads(result.attrs["provenance"])
    assert result.attrs["dtype"] == record["dtype"] == "bfloat16" and result.attrs["device"] == "cpu"
    assert result.attrs["peak_memory_bytes"] == record["peak_memory_bytes"] > 0
    assert np.isfinite(result["icl_score"].values).all()


def test_the_demo_runs_on_the_cpu_in_float32():
    from icl_cmr.analyses.study.layout import DEMO_SETTINGS

    assert (DEMO_SETTINGS["device"], DEMO_SETTINGS["dtype"]) == ("cpu", "float32")
