"""Benchmark: head extraction in bfloat16 vs float32, and cutting attention on the device vs
copying whole matrices to the host; time and peak resident memory, CPU.

Each run is a fresh process (``python -m icl_cmr.analyses.bench.heads_dtype DTYPE PATH``) so its
peak resident memory belongs to that run alone; the three configurations are interleaved in
rounds so that load on a shared machine hits them alike.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from cmr.deprecation import keyword_only

from ...adapters import head_profiles as hp
from ...adapters.lm import extraction, loading

CONFIGS = (("float32", "lean"), ("bfloat16", "lean"), ("float32", "full"))


def _resident_bytes() -> int:
    with open("/proc/self/status") as status:  # Linux; the benchmark runs there
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1]) * 1024


def _worker(dtype: str, path: str, n_words: int = 100, n_prompts: int = 5) -> dict:
    import resource

    loading.set_threads(1)  # multi-threaded torch timings swing by 2x on a shared 2-core machine
    with_torch = _resident_bytes()
    start = time.perf_counter()
    model = loading.load_model(loading.DEFAULT_MODEL, device="cpu", dtype=dtype)
    load_s = time.perf_counter() - start
    load_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    loaded = _resident_bytes()

    def full_matrices():  # whole (layer, head, seq, seq) arrays to the host, then reduced
        made = extraction.make_prompts(model, n_words=n_words, n_prompts=n_prompts, rng=0)
        lags = hp.lag_range(8, n_words)
        for row in made.tokens:
            scores, probs, _ = extraction.attention_pass(model, row)
            hp.prompt_summary(scores, probs, n_words, lags)
        extraction.copying_scores(model)

    with loading.measure_peak_memory("cpu") as memory:
        start = time.perf_counter()
        if path == "lean":
            extraction.extract_heads(model, n_words=n_words, n_prompts=n_prompts, rng=0, lags=8)
        else:
            full_matrices()
        extract_s = time.perf_counter() - start
    return {"dtype": dtype, "path": path, "load_s": load_s, "extract_s": extract_s, "torch_gb": with_torch / 1e9,
            "loaded_gb": loaded / 1e9, "load_peak_gb": load_peak / 1e9,
            "extract_peak_gb": memory["peak_memory_bytes"] / 1e9}


@keyword_only
def bench_heads_dtype(*, repeats: int = 3) -> dict:
    """All 270 heads of smollm2-135m (100 words x 5 prompts, 1 torch thread) in bfloat16 vs float32.

    ``ours_s``: :func:`extract_heads` in bfloat16; ``reference_s``: the same in float32 (after
    loading; word selection, passes, statistics, copying scores). ``full_matrix_s``: float32
    with whole attention matrices copied to the host and reduced there. Peak resident memory
    of the process while loading (``*_load_peak_gb``) and during the extraction
    (``*_extract_peak_gb``, reset after loading). Medians of ``min(repeats, 3)`` rounds, each
    configuration in a fresh process. ``*_torch_gb``: resident memory with python and torch
    alone; ``*_loaded_gb``: after loading (transformers, TransformerLens and the model).
    """
    rows = []
    for _ in range(min(max(1, repeats), 3)):
        for dtype, path in CONFIGS:
            code = [sys.executable, "-m", "icl_cmr.analyses.bench.heads_dtype", dtype, path]
            done = subprocess.run(code, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"heads-dtype worker failed:\n{done.stderr[-2000:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))

    def median(dtype, path, key):
        return statistics.median(r[key] for r in rows if r["dtype"] == dtype and r["path"] == path)

    out = {"name": "heads-dtype", "ours_s": median("bfloat16", "lean", "extract_s"),
           "reference": "float32 extraction", "reference_s": median("float32", "lean", "extract_s")}
    out["ratio"] = out["reference_s"] / out["ours_s"]
    out["full_matrix_s"] = median("float32", "full", "extract_s")
    for dtype, path in CONFIGS:
        label = dtype if path == "lean" else "full_matrix"
        for key in ("load_s", "torch_gb", "loaded_gb", "load_peak_gb", "extract_peak_gb"):
            out[f"{label}_{key}"] = round(median(dtype, path, key), 3)
    return out


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1], sys.argv[2])), flush=True)
