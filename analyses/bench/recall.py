"""Benchmarks of the free-recall analyses against psifr, on psifr's Morton2013 data set."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

from cmr.deprecation import keyword_only
from cmr.crp import lag_counts, lag_crp
from cmr.errors import OptionalDependencyError
from cmr.events import group_index

from .timing import median_time
from ...adapters.recall_data import load_recall_data

_SOURCE = "psifr:Morton2013"

# Runs in a fresh interpreter: the first call there pays for loading numba's on-disk cache
# (or compiling, if the cache is cold).
_FIRST_CALL = textwrap.dedent(
    """
    import json, time
    t0 = time.perf_counter()
    from cmr.{module} import {func}
    t1 = time.perf_counter()
    from icl_cmr.adapters.recall_data import load_recall_data
    events = load_recall_data({source!r})
    t2 = time.perf_counter()
    {func}(events)
    t3 = time.perf_counter()
    print(json.dumps({{"import_s": t1 - t0, "first_call_s": t3 - t2}}))
    """
)


def _first_call(module: str, func: str) -> dict:
    code = _FIRST_CALL.format(module=module, func=func, source=_SOURCE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _prepared():
    try:
        from psifr import fr
    except ImportError as exc:
        raise OptionalDependencyError(
            f"the free-recall benchmarks compare against psifr, which is not importable ({exc}); "
            "install it with `pip install psifr` (it is in the test extra)"
        ) from exc

    events = load_recall_data(_SOURCE)
    merged = fr.merge_free_recall(fr.sample_data("Morton2013"))
    return fr, events, merged


@keyword_only
def bench_lag_crp(*, repeats: int = 7) -> dict:
    """Per-subject lag-CRP of Morton2013: ours (labelled dataset) vs psifr ``fr.lag_crp``."""
    fresh = _first_call("crp", "lag_crp")  # before anything is compiled in this process
    fr, events, merged = _prepared()
    recalls = np.ascontiguousarray(events["recalls"].values, dtype=np.int64)
    lengths = np.ascontiguousarray(events["list_length"].values, dtype=np.int64)
    group, _ = group_index(events, "subject")
    ours = median_time(lambda: lag_crp(events, by="subject"), repeats)
    counts_only = median_time(lambda: lag_counts(recalls, lengths, group=group), repeats)
    reference = median_time(lambda: fr.lag_crp(merged), repeats)
    return {
        "name": "lag-crp",
        "ours_s": ours,
        "reference": "psifr.fr.lag_crp",
        "reference_s": reference,
        "ratio": reference / ours,
        "counts_only_s": counts_only,
        "counts_only_ratio": reference / counts_only,
        "first_call_s": fresh["first_call_s"],
        "import_s": fresh["import_s"],
        "data": f"{_SOURCE} ({events.sizes['trial']} lists)",
        "repeats": repeats,
    }
