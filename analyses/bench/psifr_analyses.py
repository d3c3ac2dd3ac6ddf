"""Benchmarks of psifr's analyses beyond the plain lag-CRP, ours against psifr on Morton2013.

Both sides run on the same data in one process: ours on the events dataset, psifr on its
merged table (with the category and item-index columns). Each entry is one analysis, and one
is the loading itself: ``cmr.from_table`` against ``psifr.fr.merge_free_recall`` on the same
raw table.

Each side is timed in wall and process CPU seconds (medians): ours ``repeats`` calls one after
another, then psifr's calls, each followed by one call of ours (``ours_after_reference_s``:
ours with the caches as psifr's call left them, the cost of a single call amid other work).
"""
from __future__ import annotations

import statistics
import time
import warnings

import numpy as np

from cmr.deprecation import keyword_only
import cmr
from cmr.errors import OptionalDependencyError

from ...adapters.recall_data import load_recall_data

_SOURCE = "psifr:Morton2013"


#: benchmarks whose psifr side takes well under a second: timed as often as ours, after a warm-up
_FAST_REFERENCE = ("from-table", "spc")


def _same(a, b):
    return a == b


def _prepared():
    try:
        from psifr import fr
    except ImportError as exc:
        raise OptionalDependencyError(
            f"these benchmarks compare against psifr, which is not importable ({exc}); install it with "
            "`pip install psifr` (it is in the test extra)"
        ) from exc

    raw = fr.sample_data("Morton2013")
    raw["item_index"] = raw["item_number"] - 1
    events = load_recall_data(raw)
    merged = fr.merge_free_recall(raw, study_keys=["category", "item_index"])
    distances = fr.sample_distances("Morton2013")[1]
    edges = np.percentile(distances[np.triu_indices_from(distances, 1)], np.linspace(1, 99, 11))
    return fr, events, merged, distances, edges, raw


def _cases(fr, events, merged, distances, edges, raw):
    return {
        "from-table": (lambda: cmr.from_table(raw), lambda: fr.merge_free_recall(raw), "fr.merge_free_recall"),
        "spc": (lambda: cmr.spc(events), lambda: fr.spc(merged), "fr.spc"),
        "pnr": (lambda: cmr.pnr(events), lambda: fr.pnr(merged), "fr.pnr"),
        "pfr": (lambda: cmr.pfr(events), lambda: fr.pnr(merged).query("output == 1"), "fr.pnr (output 1)"),
        "lag-crp-masked": (lambda: cmr.lag_crp(events, test_key="category", test=_same),
                           lambda: fr.lag_crp(merged, test_key="category", test=_same), "fr.lag_crp(test_key=...)"),
        "input-crp": (lambda: cmr.input_crp(events), lambda: fr.input_crp(merged), "fr.input_crp"),
        "category-crp": (lambda: cmr.category_crp(events), lambda: fr.category_crp(merged, "category"),
                         "fr.category_crp"),
        "category-clustering": (lambda: cmr.category_clustering(events),
                                lambda: fr.category_clustering(merged, "category"), "fr.category_clustering"),
        "distance-crp": (lambda: cmr.distance_crp(events, "item_index", distances, edges),
                         lambda: fr.distance_crp(merged, "item_index", distances, edges), "fr.distance_crp"),
        "distance-rank": (lambda: cmr.distance_rank(events, "item_index", distances),
                          lambda: fr.distance_rank(merged, "item_index", distances), "fr.distance_rank"),
        "distance-rank-shifted": (lambda: cmr.distance_rank_shifted(events, "item_index", distances, 3),
                                  lambda: fr.distance_rank_shifted(merged, "item_index", distances, 3),
                                  "fr.distance_rank_shifted"),
        "distance-rank-window": (lambda: cmr.distance_rank_window(events, "item_index", distances, [-1, 0, 1]),
                                 lambda: fr.distance_rank_window(merged, "item_index", distances, [-1, 0, 1]),
                                 "fr.distance_rank_window"),
        "pli-list-lag": (lambda: cmr.pli_list_lag(events, 3), lambda: fr.pli_list_lag(merged, 3),
                         "fr.pli_list_lag"),
    }


def _bench(name: str, repeats: int) -> dict:
    state = _prepared()
    ours_fn, reference_fn, reference = _cases(*state)[name]
    reference_repeats = repeats if name in _FAST_REFERENCE else max(1, repeats // 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # psifr's nanmean over subjects without transitions warns
        ours_fn()
        if reference_repeats == repeats:
            reference_fn()
        ours_times = [_timed(ours_fn) for _ in range(max(1, repeats))]  # one after another
        # each psifr call is followed by one of ours, which then finds the caches filled by psifr's
        reference_times, after_reference = [], []
        for _ in range(reference_repeats):
            reference_times.append(_timed(reference_fn))
            after_reference.append(_timed(ours_fn))
    ours_s, ours_cpu_s = (statistics.median(t) for t in zip(*ours_times))
    reference_s, reference_cpu_s = (statistics.median(t) for t in zip(*reference_times))
    after_s, after_cpu_s = (statistics.median(t) for t in zip(*after_reference))
    return {
        "name": name,
        "ours_s": ours_s,
        "reference": f"psifr.{reference}",
        "reference_s": reference_s,
        "ratio": reference_s / ours_s,
        "ours_cpu_s": ours_cpu_s,
        "reference_cpu_s": reference_cpu_s,
        "cpu_ratio": reference_cpu_s / ours_cpu_s,
        "ours_after_reference_s": after_s,
        "ratio_after_reference": reference_s / after_s,
        "cpu_ratio_after_reference": reference_cpu_s / after_cpu_s,
        "data": f"{_SOURCE} ({state[1].sizes['trial']} lists)",
        "repeats": repeats,
        "reference_repeats": reference_repeats,
    }


def _timed(func) -> tuple[float, float]:
    """Wall and process CPU seconds of one call of ``func()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    return time.perf_counter() - wall, time.process_time() - cpu


@keyword_only
def bench_from_table(*, repeats: int = 7) -> dict:
    """Loading the raw Morton2013 table: ``cmr.from_table`` (checked, matched, all columns kept) vs
    ``psifr.fr.merge_free_recall``."""
    return _bench("from-table", repeats)


@keyword_only
def bench_spc(*, repeats: int = 7) -> dict:
    """Per-subject serial position curve: ours vs psifr ``fr.spc``."""
    return _bench("spc", repeats)


@keyword_only
def bench_pfr(*, repeats: int = 7) -> dict:
    """Per-subject probability of first recall: ours vs psifr ``fr.pnr`` at output 1."""
    return _bench("pfr", repeats)


@keyword_only
def bench_pnr(*, repeats: int = 7) -> dict:
    """Probability of nth recall, every output position: ours vs psifr."""
    return _bench("pnr", repeats)


@keyword_only
def bench_lag_crp_masked(*, repeats: int = 7) -> dict:
    """Within-category lag-CRP (``test_key="category"``): ours vs psifr."""
    return _bench("lag-crp-masked", repeats)


@keyword_only
def bench_input_crp(*, repeats: int = 7) -> dict:
    """Input-position CRP: ours vs psifr."""
    return _bench("input-crp", repeats)


@keyword_only
def bench_category_crp(*, repeats: int = 7) -> dict:
    """Within-category transition probability: ours vs psifr."""
    return _bench("category-crp", repeats)


@keyword_only
def bench_category_clustering(*, repeats: int = 7) -> dict:
    """LBC and ARC: ours vs psifr."""
    return _bench("category-clustering", repeats)


@keyword_only
def bench_distance_crp(*, repeats: int = 7) -> dict:
    """Semantic CRP over ten distance bins: ours vs psifr."""
    return _bench("distance-crp", repeats)


@keyword_only
def bench_distance_rank(*, repeats: int = 7) -> dict:
    """Distance rank: ours vs psifr."""
    return _bench("distance-rank", repeats)


@keyword_only
def bench_distance_rank_shifted(*, repeats: int = 7) -> dict:
    """Distance rank shifted 1..3 recalls back: ours vs psifr."""
    return _bench("distance-rank-shifted", repeats)


@keyword_only
def bench_distance_rank_window(*, repeats: int = 7) -> dict:
    """Distance rank relative to the window -1..+1 of study positions: ours vs psifr."""
    return _bench("distance-rank-window", repeats)


@keyword_only
def bench_pli_list_lag(*, repeats: int = 7) -> dict:
    """Prior-list intrusions by list lag: ours vs psifr."""
    return _bench("pli-list-lag", repeats)
