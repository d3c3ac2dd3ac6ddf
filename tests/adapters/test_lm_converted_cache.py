"""The converted-model cache writes through cmr.io.atomic_directory: one writer at a time,
a second process waits for the first and keeps its copy, failures become ModelNotAvailableError."""
import subprocess
import sys
import textwrap
import time

import pytest

from icl_cmr.adapters.errors import ModelNotAvailableError

pytest.importorskip("fcntl")


def _fake_convert(calls):
    def convert(gguf, out):  # stands in for the 15-45 s GGUF conversion
        calls.append(out)
        (out / "config.json").write_text('{"model_type": "llama"}')
        (out / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    return convert


def test_a_second_process_waits_for_the_conversion_and_keeps_its_copy(tmp_path, monkeypatch):
    from icl_cmr.adapters.lm import loading
    from icl_cmr.adapters.lm._model_files import converted_problem

    gguf = tmp_path / "model.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    cache = tmp_path / "cache"
    started = tmp_path / "started"
    script = textwrap.dedent(f"""
        import pathlib, time
        from icl_cmr.adapters.lm import loading

        def convert(gguf, out):
            pathlib.Path({str(started)!r}).touch()
            time.sleep(2.0)
            (out / "config.json").write_text('{{"model_type": "llama"}}')
            (out / "model.safetensors").write_bytes(bytes(range(256)) * 64)

        loading._convert_gguf = convert
        print(loading._converted_dir("m", pathlib.Path({str(gguf)!r}), pathlib.Path({str(cache)!r})))
    """)
    first = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            if first.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the converting process did not start its conversion")
            time.sleep(0.05)
        calls = []
        monkeypatch.setattr(loading, "_convert_gguf", _fake_convert(calls))
        mine = loading._converted_dir("m", gguf, cache)
    finally:
        out, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and out.strip() == str(mine)
    assert calls == [] and converted_problem(mine) is None
    assert sorted(p.name for p in mine.parent.iterdir()) == [mine.name]  # no lock, nothing partial left


def test_an_unwritable_cache_names_icl_cmr_cache(tmp_path, monkeypatch):
    from icl_cmr.adapters.lm import loading

    gguf = tmp_path / "model.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder should be")
    calls = []
    monkeypatch.setattr(loading, "_convert_gguf", _fake_convert(calls))
    with pytest.raises(ModelNotAvailableError, match="is a file.*ICL_CMR_CACHE"):
        loading._converted_dir("m", gguf, cache)
    assert calls == []


def test_a_failed_conversion_leaves_nothing(tmp_path, monkeypatch):
    from icl_cmr.adapters.lm import loading

    gguf = tmp_path / "model.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    cache = tmp_path / "cache"

    def broken(gguf, out):
        (out / "config.json").write_text("{}")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(loading, "_convert_gguf", broken)
    with pytest.raises(ModelNotAvailableError, match="No space left on device.*ICL_CMR_CACHE"):
        loading._converted_dir("m", gguf, cache)
    assert list((cache / "m").iterdir()) == []
