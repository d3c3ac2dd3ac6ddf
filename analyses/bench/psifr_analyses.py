"""Benchmarks of psifr's analyses beyond the plain lag-CRP, ours against psifr on Morton2013.

Both sides run on the same data in one process: ours on the events dataset, psifr on its
merged table (with the category and item-index columns). Each entry is one analysis, and one
is the loading itself: ``cmr.from_table`` against ``psifr.fr.merge_free_recall`` on the same
raw table.
"""
from __future__ import annotations

from icl_cmr.analyses.bench import median_time

_SOURCE = "psifr:Morton2013"


#: benchmarks whose psifr side takes well under a second: timed as often as ours, after a warm-up
_FAST_REFERENCE = ("from-table",)


def _same(a, b):
    return a == b


def _prepared():
    try:
        from psifr import fr
    except ImportError as exc:
        from cmr.errors import OptionalDependencyError

        raise OptionalDependencyError(
            f"these benchmarks compare against psifr, which is not importable ({exc}); install it with "
            "`pip install psifr` (it is in the test extra)"
        ) from exc
    import numpy as np

    from icl_cmr.adapters.recall_data import load_recall_data

    raw = fr.sample_data("Morton2013")
    raw["item_index"] = raw["item_number"] - 1
    events = load_recall_data(raw)
    merged = fr.merge_free_recall(raw, study_keys=["category", "item_index"])
    distances = fr.sample_distances("Morton2013")[1]
    edges = np.percentile(distances[np.triu_indices_from(distances, 1)], np.linspace(1, 99, 11))
    return fr, events, merged, distances, edges, raw


def _cases(fr, events, merged, distances, edges, raw):
    import cmr

    return {
        "from-table": (lambda: cmr.from_table(raw), lambda: fr.merge_free_recall(raw), "fr.merge_free_recall"),
        "pnr": (lambda: cmr.pnr(events), lambda: fr.pnr(merged), "fr.pnr"),
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
    import warnings

    state = _prepared()
    ours_fn, reference_fn, reference = _cases(*state)[name]
    ours = median_time(ours_fn, repeats)
    reference_repeats = repeats if name in _FAST_REFERENCE else max(1, repeats // 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # psifr's nanmean over subjects without transitions warns
        reference_s = median_time(reference_fn, reference_repeats, warmup=0 if reference_repeats < repeats else 1)
    return {
        "name": name,
        "ours_s": ours,
        "reference": f"psifr.{reference}",
        "reference_s": reference_s,
        "ratio": reference_s / ours,
        "data": f"{_SOURCE} ({state[1].sizes['trial']} lists)",
        "repeats": repeats,
        "reference_repeats": reference_repeats,
    }


def bench_from_table(repeats: int = 7) -> dict:
    """Loading the raw Morton2013 table: ``cmr.from_table`` (checked, matched, all columns kept) vs
    ``psifr.fr.merge_free_recall``."""
    return _bench("from-table", repeats)


def bench_pnr(repeats: int = 7) -> dict:
    """Probability of nth recall, every output position: ours vs psifr."""
    return _bench("pnr", repeats)


def bench_lag_crp_masked(repeats: int = 7) -> dict:
    """Within-category lag-CRP (``test_key="category"``): ours vs psifr."""
    return _bench("lag-crp-masked", repeats)


def bench_input_crp(repeats: int = 7) -> dict:
    """Input-position CRP: ours vs psifr."""
    return _bench("input-crp", repeats)


def bench_category_crp(repeats: int = 7) -> dict:
    """Within-category transition probability: ours vs psifr."""
    return _bench("category-crp", repeats)


def bench_category_clustering(repeats: int = 7) -> dict:
    """LBC and ARC: ours vs psifr."""
    return _bench("category-clustering", repeats)


def bench_distance_crp(repeats: int = 7) -> dict:
    """Semantic CRP over ten distance bins: ours vs psifr."""
    return _bench("distance-crp", repeats)


def bench_distance_rank(repeats: int = 7) -> dict:
    """Distance rank: ours vs psifr."""
    return _bench("distance-rank", repeats)


def bench_distance_rank_shifted(repeats: int = 7) -> dict:
    """Distance rank shifted 1..3 recalls back: ours vs psifr."""
    return _bench("distance-rank-shifted", repeats)


def bench_distance_rank_window(repeats: int = 7) -> dict:
    """Distance rank relative to the window -1..+1 of study positions: ours vs psifr."""
    return _bench("distance-rank-window", repeats)


def bench_pli_list_lag(repeats: int = 7) -> dict:
    """Prior-list intrusions by list lag: ours vs psifr."""
    return _bench("pli-list-lag", repeats)
