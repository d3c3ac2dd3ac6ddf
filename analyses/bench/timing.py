"""The one timer of every benchmark: the median wall time of a call after warm-up.

It lives below :mod:`icl_cmr.analyses.bench`, which looks benchmarks up by name, so that no
benchmark module imports the package that imports it.
"""
from __future__ import annotations

import statistics
import time

from cmr.deprecation import keyword_only

__all__ = ["median_time"]


@keyword_only
def median_time(func, repeats: int, *, warmup: int = 1) -> float:
    """Median wall time of ``func()`` in seconds over ``repeats`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        func()
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
