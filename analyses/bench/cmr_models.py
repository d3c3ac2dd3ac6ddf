"""Benchmarks of whole fits against cymr 0.14: all peers_notask subjects, and semantic CMR on one subject.

cymr's own fits of these data take hours (seconds per likelihood evaluation times thousands of
evaluations), so the reference side is measured per evaluation in the same run, on the same
subjects, and multiplied by the number of evaluations our fits used (cymr's differential
evolution uses the same scipy defaults: popsize 15, tol 0.01, polish). Both sides use two
processes/threads: ours ``n_jobs=2``; cymr's ``fit_indiv(n_jobs=2)`` runs two subjects at once,
so its estimate is halved for the many-subject benchmark.
"""
from __future__ import annotations

import time

import numpy as np

from cmr.deprecation import keyword_only
from cmr.events import to_table
import cmr

from .timing import median_time
from .cmr_fit import MORTON_MIXED_PARAMS, cymr_modules
from ...adapters.item_pools import load_item_patterns
from ...adapters.recall_data import load_recall_data, read_recall_table

SEMANTIC_FREE = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2", "Scf", "Sff")
SEMANTIC_PARAMS = dict(MORTON_MIXED_PARAMS, Scf=0.1, Sff=0.5)


def _cymr_per_eval(table, param, param_def, patterns, repeats=3) -> float:
    cymr_cmr, _ = cymr_modules()
    model = cymr_cmr.CMR()
    return median_time(lambda: model.likelihood(table, param, param_def=param_def, patterns=patterns), repeats)


def _localist_table(events):
    table = to_table(events)
    table["item_index"] = table.groupby("item", sort=True).ngroup()
    return table


@keyword_only
def bench_fit_peers(*, repeats: int = 1) -> dict:
    """Ten free parameters, every psifr:peers_notask subject (126), two threads, vs cymr."""
    cymr_cmr, _ = cymr_modules()
    events = load_recall_data("psifr:peers_notask")
    cmr.log_likelihood(events.isel(trial=[0]), MORTON_MIXED_PARAMS)  # compile outside the timing
    times, fits = [], None
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fits = cmr.fit_recall(events, cmr.FitSpec(cmr.STANDARD_FREE, dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)),
                              rng=0, n_jobs=2, progress=False)
        times.append(time.perf_counter() - start)
    ours = float(np.median(times))
    subjects = fits["subject"].values
    sample = subjects[:: max(1, subjects.size // 4)][:4]  # four subjects spread over the data set
    per_eval = []
    for subject in sample:
        table = _localist_table(events.isel(trial=np.flatnonzero(events["subject"].values == subject)))
        param_def, patterns = cymr_cmr.config_loc_cmr(int(table["item_index"].max()) + 1)
        per_eval.append(_cymr_per_eval(table, MORTON_MIXED_PARAMS, param_def, patterns))
    nfev = int(fits["nfev"].sum())
    reference = float(np.mean(per_eval)) * nfev / 2  # two subjects at once, as fit_indiv(n_jobs=2)
    return {
        "name": "fit-peers",
        "ours_s": ours,
        "reference": "cymr likelihood per evaluation x our evaluations / 2 processes (estimate)",
        "reference_s": reference,
        "ratio": reference / ours,
        "subjects": int(subjects.size),
        "nfev": nfev,
        "ours_per_eval_s": ours * 2 / nfev,
        "cymr_per_eval_s": float(np.mean(per_eval)),
        "success": int(fits["success"].sum()),
        "total_logl": float(fits["logl"].sum()),
    }


@keyword_only
def bench_fit_semantic(*, repeats: int = 1) -> dict:
    """Semantic CMR (12 free parameters: the ten, Scf, Sff) on one psifr:Morton2013 subject, vs cymr."""
    cymr_cmr, _ = cymr_modules()
    events = load_recall_data("psifr:Morton2013")
    subject = events["subject"].values[0]
    one = events.isel(trial=np.flatnonzero(events["subject"].values == subject))
    patterns = load_item_patterns("psifr:Morton2013", categories=False)
    cmr.log_likelihood(one.isel(trial=[0]), SEMANTIC_PARAMS, patterns=patterns)  # compile outside the timing
    times, fits = [], None
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fits = cmr.fit_recall(one, cmr.FitSpec(SEMANTIC_FREE, dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85),
                                               patterns=patterns), rng=0, n_jobs=2, progress=False)
        times.append(time.perf_counter() - start)
    ours = float(np.median(times))
    nfev = int(fits["nfev"].sum())
    table, param_def, cymr_patterns = _cymr_semantic(subject, patterns)
    param = dict(SEMANTIC_PARAMS, Sfc=0.0)
    per_eval = _cymr_per_eval(table, param, param_def, cymr_patterns)
    same = cmr.log_likelihood(one, param, patterns=patterns).attrs["total_logl"]
    reference_logl = float(cymr_cmr.CMR().likelihood(table, param, param_def=param_def, patterns=cymr_patterns)["logl"].sum())
    return {
        "name": "fit-semantic",
        "ours_s": ours,
        "reference": "cymr likelihood per evaluation x our evaluations (estimate)",
        "reference_s": per_eval * nfev,
        "ratio": per_eval * nfev / ours,
        "nfev": nfev,
        "ours_per_eval_s": ours * 2 / nfev,
        "cymr_per_eval_s": per_eval,
        "logl": float(fits["logl"].values[0]),
        "likelihood_check": {"ours": same, "cymr": reference_logl},
    }


def _cymr_semantic(subject, patterns):
    """One Morton2013 subject's table, cymr's semantic configuration and patterns (docs/semantic-cmr.md)."""
    cymr_cmr, _ = cymr_modules()
    table = read_recall_table("psifr:Morton2013")
    table = table[table["subject"] == subject].copy()
    index = {item: k for k, item in enumerate(patterns.items)}
    table["item_index"] = [index.get(str(item), np.nan) for item in table["item"]]
    param_def = cymr_cmr.CMRParameters()
    param_def.set_sublayers(f=["task"], c=["task"])
    param_def.set_weights("fc", {(("task", "item"), ("task", "item")): "Afc + Dfc * loc + Sfc * sem"})
    param_def.set_weights("cf", {(("task", "item"), ("task", "item")): "Acf + Dcf * loc + Scf * sem"})
    param_def.set_weights("ff", {("task", "item"): "Sff * sem"})
    cymr_patterns = {"items": patterns.items, "vector": {"loc": np.eye(patterns.size), "sem": patterns.similarity},
                     "similarity": {"sem": patterns.similarity}}
    return table, param_def, cymr_patterns


@keyword_only
def bench_likelihood_semantic(*, repeats: int = 21) -> dict:
    """One public semantic CMR likelihood call (Morton2013 subject 1, 768-item pool) vs cymr's.

    Ours is ``cmr.log_likelihood(events, params, patterns=patterns)`` as a user calls it again
    with other parameters (the pool's list terms of these lists kept from the call before),
    the median of ``repeats`` calls one after another after a warm-up; ``first_s`` is one call
    with a fresh pool (the list terms built). cymr's is ``CMR().likelihood`` with the same
    configuration, the median of ``max(3, repeats // 3)`` calls, each followed by one call of
    ours (``ours_after_reference_s``: with the caches as cymr's call left them). Wall and
    process CPU seconds, both sides in the same process.
    """
    cymr_cmr, _ = cymr_modules()
    events = load_recall_data("psifr:Morton2013")
    subject = events["subject"].values[0]
    one = events.isel(trial=np.flatnonzero(events["subject"].values == subject))
    patterns = load_item_patterns("psifr:Morton2013", categories=False)
    table, param_def, cymr_patterns = _cymr_semantic(subject, patterns)
    param = dict(SEMANTIC_PARAMS, Sfc=0.0)
    model = cymr_cmr.CMR()

    def ours_call():
        return cmr.log_likelihood(one, param, patterns=patterns)

    def reference_call():
        return model.likelihood(table, param, param_def=param_def, patterns=cymr_patterns)

    ours_call()  # compile (or load) the kernel outside the timing
    fresh = cmr.item_patterns(patterns.items, patterns.similarity)
    start = time.perf_counter()
    cmr.log_likelihood(one, param, patterns=fresh)
    first = time.perf_counter() - start
    reference_repeats = max(3, repeats // 3)
    reference_call()
    ours_times = [_timed(ours_call) for _ in range(max(1, repeats))]
    reference_times, after_reference = [], []
    for _ in range(reference_repeats):
        reference_times.append(_timed(reference_call))
        after_reference.append(_timed(ours_call))
    ours, ours_cpu = np.median(ours_times, axis=0).tolist()
    reference, reference_cpu = np.median(reference_times, axis=0).tolist()
    after, after_cpu = np.median(after_reference, axis=0).tolist()
    return {
        "name": "likelihood-semantic",
        "ours_s": ours,
        "reference": "cymr CMR().likelihood (semantic configuration)",
        "reference_s": reference,
        "ratio": reference / ours,
        "ours_cpu_s": ours_cpu,
        "reference_cpu_s": reference_cpu,
        "cpu_ratio": reference_cpu / ours_cpu,
        "ours_after_reference_s": after,
        "ratio_after_reference": reference / after,
        "cpu_ratio_after_reference": reference_cpu / after_cpu,
        "first_s": first,
        "repeats": repeats,
        "reference_repeats": reference_repeats,
        "logl": float(ours_call().attrs["total_logl"]),
        "reference_logl": float(reference_call()["logl"].sum()),
        "data": f"psifr:Morton2013 subject {subject} ({one.sizes['trial']} lists, pool of {patterns.size})",
    }


def _timed(func) -> tuple[float, float]:
    """Wall and process CPU seconds of one call of ``func()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    return time.perf_counter() - wall, time.process_time() - cpu
