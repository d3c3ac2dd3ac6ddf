"""Benchmarks of the textbook-CMR likelihood and fits against cymr 0.14, same process."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

from cmr.deprecation import keyword_only
from cmr.errors import OptionalDependencyError
from cmr.events import from_table, to_table
from cmr.textbook.fit import STANDARD_FREE, fit_recall
from cmr.textbook.likelihood import log_likelihood
from cmr.textbook.spec import FitSpec

from .timing import median_time
from ...adapters.recall_data import load_recall_data

MORTON_MIXED_PARAMS = dict(
    T=0.1, Lfc=0.15, Lcf=0.15, Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85,
    P1=0.2, P2=2.0, B_start=0.3, B_rec=0.9, X1=0.001, X2=0.25, B_enc=0.7,
)

# first call in a fresh interpreter: loading numba's on-disk cache (or compiling when cold)
_FIRST_CALL = textwrap.dedent(
    """
    import json, time
    from icl_cmr.adapters.recall_data import load_recall_data
    events = load_recall_data("cymr:Morton2013_mixed")
    t0 = time.perf_counter()
    from cmr.textbook.likelihood import log_likelihood
    log_likelihood(events, {params!r})
    print(json.dumps({{"first_call_s": time.perf_counter() - t0}}))
    """
)


def cymr_modules():
    try:
        from cymr import cmr as cymr_cmr
        from cymr import fit as cymr_fit
    except ImportError as exc:  # cymr is a test/bench extra
        raise OptionalDependencyError(f"this benchmark needs cymr (pip install 'icl-cmr[test]'): {exc}") from exc
    return cymr_cmr, cymr_fit


@keyword_only
def bench_likelihood(*, repeats: int = 7) -> dict:
    """Whole Morton2013_mixed likelihood: ours (public log_likelihood) vs cymr CMR().likelihood."""
    cymr_cmr, cymr_fit = cymr_modules()
    code = _FIRST_CALL.format(params=MORTON_MIXED_PARAMS)
    fresh = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      check=True).stdout.strip().splitlines()[-1])
    table = cymr_fit.sample_data("Morton2013_mixed")
    n_pool = int(table["item_index"].nunique())  # as in cymr's own tests
    param_def, patterns = cymr_cmr.config_loc_cmr(n_pool)
    model = cymr_cmr.CMR()
    events = from_table(table)

    def ours_call():
        return log_likelihood(events, MORTON_MIXED_PARAMS, pool_size=n_pool)

    def reference_call():
        return model.likelihood(table, MORTON_MIXED_PARAMS, param_def=param_def, patterns=patterns)

    ours = median_time(ours_call, repeats)
    with_table = median_time(lambda: log_likelihood(from_table(table), MORTON_MIXED_PARAMS, pool_size=n_pool), repeats)
    reference = median_time(reference_call, max(1, min(repeats, 3)))
    ours_total = ours_call().attrs["total_logl"]
    reference_total = float(reference_call()["logl"].sum())
    return {
        "name": "likelihood",
        "ours_s": ours,
        "reference": "cymr CMR().likelihood",
        "reference_s": reference,
        "ratio": reference / ours,
        "ours_including_from_table_s": with_table,
        "first_call_s": fresh["first_call_s"],
        "total_logl": ours_total,
        "reference_total_logl": reference_total,
        "pool_size": n_pool,
    }


@keyword_only
def bench_fit_subject(*, repeats: int = 1) -> dict:
    """10-free-parameter ML fit of Morton2013 subject 1: our wall time vs cymr's estimated cost.

    The reference is estimated, not run (cymr's default takes minutes): cymr's measured time
    per likelihood evaluation of this subject times the number of evaluations our fit used.
    """
    cymr_cmr, _ = cymr_modules()
    events = load_recall_data("psifr:Morton2013")
    subject = events["subject"].values[0]
    one = events.isel(trial=(events["subject"] == subject).values)
    fixed = dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)
    log_likelihood(one, MORTON_MIXED_PARAMS)  # compile outside the timing
    times, fits = [], None
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fits = fit_recall(one, FitSpec(STANDARD_FREE, fixed), rng=0, progress=False)
        times.append(time.perf_counter() - start)
    ours = sorted(times)[len(times) // 2]
    nfev = int(fits["nfev"].values[0])

    table = to_table(one)
    table["item_index"] = table.groupby("item", sort=True).ngroup()
    param_def, patterns = cymr_cmr.config_loc_cmr(int(table["item_index"].max()) + 1)
    model = cymr_cmr.CMR()
    per_eval = median_time(
        lambda: model.likelihood(table, MORTON_MIXED_PARAMS, param_def=param_def, patterns=patterns), 3
    )
    reference = per_eval * nfev
    return {
        "name": "fit-subject",
        "ours_s": ours,
        "reference": "cymr likelihood x our nfev (estimate)",
        "reference_s": reference,
        "ratio": reference / ours,
        "nfev": nfev,
        "cymr_per_eval_s": per_eval,
        "ours_per_eval_s": ours / nfev,
        "logl": float(fits["logl"].values[0]),
        "free": list(STANDARD_FREE),
    }
