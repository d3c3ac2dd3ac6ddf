"""Benchmark: the peak memory measure of the language-model adapter on a known allocation.

Runs in a fresh subprocess (``python -m icl_cmr.analyses.bench.peak_memory``) so that no earlier
work's memory lies in the process. Each round measures three blocks with
:func:`icl_cmr.adapters.lm.loading.measure_peak_memory` on the CPU: an empty one, one that
allocates and touches ``ALLOCATED_BYTES`` and frees them, and an empty one again. A measure
that starts its peak at each block's start rises by the allocation in the second block and
drops back in the third; one counted from the start of the process would not drop.
"""
from __future__ import annotations

import json
import subprocess
import sys
import gc
import statistics
import time

import numpy as np

from cmr.deprecation import keyword_only

from ...adapters.lm import loading

ALLOCATED_BYTES = 50_000_000


def _worker(repeats: int) -> dict:
    with loading.measure_peak_memory("cpu"):
        pass  # the first block imports torch
    rows, empty_times, measures = [], [], set()
    for _ in range(max(1, repeats)):
        gc.collect()  # garbage freed inside a block would lower the level its peak is reset to
        start = time.perf_counter()
        with loading.measure_peak_memory("cpu") as before:
            pass
        empty_times.append(time.perf_counter() - start)
        with loading.measure_peak_memory("cpu") as during:
            block = np.ones(ALLOCATED_BYTES // 8)  # written, so every page is resident
            del block
        with loading.measure_peak_memory("cpu") as after:
            pass
        rows.append((before["peak_memory_bytes"], during["peak_memory_bytes"], after["peak_memory_bytes"]))
        measures.add(during["peak_memory_measure"])
    before, during, after = (statistics.median(row[i] for row in rows) for i in range(3))
    return {
        "name": "peak-memory",
        "ours_s": statistics.median(empty_times),
        "reference": "none",
        "reference_s": None,
        "ratio": None,
        "allocated_mb": ALLOCATED_BYTES / 1e6,
        "rise_mb": statistics.median((d - b) / 1e6 for b, d, _ in rows),
        "drop_after_mb": statistics.median((d - a) / 1e6 for _, d, a in rows),
        "peak_before_mb": before / 1e6,
        "peak_during_mb": during / 1e6,
        "peak_after_mb": after / 1e6,
        "measure": "; ".join(sorted(measures)),
        "repeats": len(rows),
    }


@keyword_only
def bench_peak_memory(*, repeats: int = 7) -> dict:
    """Peak resident memory of three measured blocks around a 50 MB allocation, CPU, fresh process.

    ``rise_mb``: peak of the allocating block minus peak of the empty block before it;
    ``drop_after_mb``: peak of the allocating block minus peak of the empty block after it (both
    near 50 where the peak is reset at each block's start; ``drop_after_mb`` near 0 where it
    is counted from the process start, as ``measure`` then says). ``ours_s``: one empty measured
    block, the cost of measuring. Medians over ``repeats`` rounds; there is no reference.
    """
    code = [sys.executable, "-m", "icl_cmr.analyses.bench.peak_memory", str(int(repeats))]
    done = subprocess.run(code, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"peak-memory benchmark worker failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(_worker(int(sys.argv[1]))), flush=True)
