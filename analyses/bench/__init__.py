"""Benchmarks run by ``icl-cmr bench``: ours against a reference, side by side in one process.

Each entry maps a benchmark name to ``"module:function"``; the function takes
``repeats: int`` and returns a dict with at least ``name``, ``ours_s``, ``reference``,
``reference_s`` and ``ratio`` (reference / ours), medians over ``repeats`` runs after warm-up.
Where there is nothing to compare against, ``reference`` says so and ``reference_s`` and
``ratio`` are None; the measured numbers are reported, never checked against a limit.
"""
from __future__ import annotations

import importlib

from .timing import median_time  # noqa: F401  (public: the timer of every benchmark)

BENCHMARKS = {
    "likelihood": "icl_cmr.analyses.bench.cmr_fit:bench_likelihood",
    "fit-subject": "icl_cmr.analyses.bench.cmr_fit:bench_fit_subject",
    "fit-peers": "icl_cmr.analyses.bench.cmr_models:bench_fit_peers",
    "fit-semantic": "icl_cmr.analyses.bench.cmr_models:bench_fit_semantic",
    "likelihood-semantic": "icl_cmr.analyses.bench.cmr_models:bench_likelihood_semantic",
    "lag-crp": "icl_cmr.analyses.bench.recall:bench_lag_crp",
    "spc": "icl_cmr.analyses.bench.psifr_analyses:bench_spc",
    "pfr": "icl_cmr.analyses.bench.psifr_analyses:bench_pfr",
    "pnr": "icl_cmr.analyses.bench.psifr_analyses:bench_pnr",
    "from-table": "icl_cmr.analyses.bench.psifr_analyses:bench_from_table",
    "tf-grid": "icl_cmr.analyses.bench.profiles:bench_tf_grid",
    "mc-grid": "icl_cmr.analyses.bench.profiles:bench_mc_grid",
    "fit-units": "icl_cmr.analyses.bench.fitting:bench_fit_units",
    "fit-quality": "icl_cmr.analyses.bench.fit_quality:bench_fit_quality",
    "fit-quality-peers": "icl_cmr.analyses.bench.fit_quality:bench_fit_quality_peers",
    "fit-quality-examples": "icl_cmr.analyses.bench.fit_quality_examples:bench_fit_quality_examples",
    "heads": "icl_cmr.analyses.bench.heads:bench_heads",
    "heads-dtype": "icl_cmr.analyses.bench.heads_dtype:bench_heads_dtype",
    "ablation-forward": "icl_cmr.analyses.bench.ablation:bench_ablation",
    "lag-crp-masked": "icl_cmr.analyses.bench.psifr_analyses:bench_lag_crp_masked",
    "input-crp": "icl_cmr.analyses.bench.psifr_analyses:bench_input_crp",
    "category-crp": "icl_cmr.analyses.bench.psifr_analyses:bench_category_crp",
    "category-clustering": "icl_cmr.analyses.bench.psifr_analyses:bench_category_clustering",
    "distance-crp": "icl_cmr.analyses.bench.psifr_analyses:bench_distance_crp",
    "distance-rank": "icl_cmr.analyses.bench.psifr_analyses:bench_distance_rank",
    "distance-rank-shifted": "icl_cmr.analyses.bench.psifr_analyses:bench_distance_rank_shifted",
    "distance-rank-window": "icl_cmr.analyses.bench.psifr_analyses:bench_distance_rank_window",
    "pli-list-lag": "icl_cmr.analyses.bench.psifr_analyses:bench_pli_list_lag",
    "llm-recall": "icl_cmr.analyses.bench.llm_recall:bench_llm_recall",
    "composition": "icl_cmr.analyses.bench.composition:bench_composition",
    "import-cmr": "icl_cmr.analyses.bench.startup:bench_import_cmr",
    "unknown-model": "icl_cmr.analyses.bench.startup:bench_unknown_model",
    "peak-memory": "icl_cmr.analyses.bench.peak_memory:bench_peak_memory",
}


def get(name: str):
    try:
        target = BENCHMARKS[name]
    except KeyError:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)
