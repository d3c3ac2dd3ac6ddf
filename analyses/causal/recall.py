"""The effect of ablating attention heads on the language model's own free recall.

:func:`recall_ablation` generates the recall of the same lists
(:func:`icl_cmr.analyses.llm_recall.model_recall`) with head sets zero-ablated (the top
CMR-like heads, the top induction heads, seeded random sets of the same size, optionally
layer-matched) and compares the per-list measures of
:data:`icl_cmr.analyses.llm_recall.MEASURES` with paired statistics over lists (Mistry et al.
2025 report that ablating induction heads removes the model's +1 bias). See docs/llm-recall.md.
"""
from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from cmr.errors import ParameterError, SchemaError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from ..llm_recall import MEASURES, model_recall, recall_measures
from icl_cmr.adapters.head_ranking import top_heads

from .ablation import random_head_sets
from .statistics import paired_statistics

__all__ = ["KIND", "validate_llm_recall_ablation", "head_sets", "recall_ablation", "ablation_table"]

#: the dataset kind of :func:`recall_ablation`
KIND = "llm_recall_ablation"
_STATS = ("mean_difference", "t_statistic", "t_pvalue", "wilcoxon_pvalue", "cohens_dz", "n_lists")


def head_sets(heads: xr.Dataset, fits: xr.Dataset, *, fraction: float = 0.1, n_heads: int | None = None,
              n_random: int = 5, n_layer_matched: int = 2, seed: int = 0) -> dict:
    """Named head sets of equal size: top CMR-like, top induction, random, layer-matched random.

    ``fits`` is a ``profile_fit`` dataset of the model's heads (ranked by ``distance``, smallest
    first) and ``heads`` its ``lag_profile`` dataset (ranked by ``induction_score``). Random sets
    avoid the top CMR-like set; layer-matched sets have its count of heads in every layer. The
    set size is ``n_heads``, or ``fraction`` of all heads.
    """
    top = top_heads(fits, fraction=fraction, n_heads=n_heads)
    induction = top_heads(heads, "induction_score", n_heads=len(top), largest=True)
    n_layers, n_heads = int(heads.sizes["layer"]), int(heads.sizes["head"])
    sets = {"top_cmr": top, "top_induction": induction}
    for i, chosen in enumerate(random_head_sets(n_layers, n_heads, top, n_random, seed)):
        sets[f"random_{i}"] = chosen
    if n_layer_matched:
        for i, chosen in enumerate(random_head_sets(n_layers, n_heads, top, n_layer_matched, seed + 1,
                                                    layer_matched=True)):
            sets[f"layer_matched_{i}"] = chosen
    return sets


def _paired(differences) -> dict:
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    return {**paired_statistics(d), "n_lists": float(d.size)}


def recall_ablation(model, sets: dict, *, pool: str = "psifr:peers_notask", n_lists: int = 20, list_length: int = 16,
                    task: str = "free", seed: int = 0, batch_size: int = 16, baseline=None,
                    progress=None) -> xr.Dataset:
    """Recall of the same lists with each head set zero-ablated, against no ablation.

    Parameters
    ----------
    model : LoadedModel
    sets : mapping of str to list of (layer, head)
        Named head sets (:func:`head_sets`); names starting with ``random`` or
        ``layer_matched`` form the two random baselines.
    pool, n_lists, list_length, task, seed, batch_size
        As :func:`~icl_cmr.analyses.llm_recall.model_recall` (greedy decoding, so differences come from the ablation alone).
    baseline : xarray.Dataset, optional
        Events of the intact model on the same lists (from :func:`~icl_cmr.analyses.llm_recall.model_recall` with the same
        pool, ``n_lists``, ``list_length``, ``task`` and ``seed``), so they are not generated twice.
    progress : callable, optional
        Called with each set's name when it is done.

    Returns
    -------
    xarray.Dataset
        Kind ``llm_recall_ablation``: ``measure_value`` (head_set, trial, measure) with head_set
        ``none`` first; ``effect`` = ablated - none; ``statistic`` (comparison, measure, stat):
        each set against none, ``top_cmr_vs_random`` / ``top_induction_vs_random`` (the top
        set's effect minus the mean effect of the random sets, per list), the same against the
        layer-matched sets, all paired over lists (t-test, Wilcoxon, Cohen's d_z; lists where a
        measure is undefined are left out of that test).
    """
    from icl_cmr.adapters.lm import recall_task as task_module

    if not sets:
        raise ParameterError("need at least one head set to ablate")
    words = task_module.word_pool(pool)
    lists = task_module.study_lists(words, n_lists, list_length, seed=seed)
    names = ["none", *sets]
    values = []
    if baseline is not None and [list(r) for r in baseline["study_item"].values[:, :list_length]] != lists:
        raise ParameterError("baseline events were made from other study lists than pool, n_lists, list_length and seed give")
    for name in names:
        if name == "none" and baseline is not None:
            events = baseline
        else:
            events, _ = model_recall(model, lists=lists, pool=pool, task=task, batch_size=batch_size,
                                     heads=sets.get(name, ()))
        measures = recall_measures(events)
        values.append(np.stack([measures[m].values for m in MEASURES], axis=-1))
        if progress is not None:
            progress(name)
    values = np.stack(values)  # (head_set, trial, measure)
    effect = values - values[:1]
    comparisons, rows = [], []
    for i, name in enumerate(names[1:], 1):
        comparisons.append(f"{name}_vs_none")
        rows.append([_paired(effect[i, :, m]) for m in range(len(MEASURES))])
    for baseline in ("random", "layer_matched"):
        members = [i for i, n in enumerate(names) if n.startswith(baseline)]
        if not members:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a list no random set defines stays NaN
            base = np.nanmean(effect[members], axis=0)
        for top in ("top_cmr", "top_induction"):
            if top in names:
                comparisons.append(f"{top}_vs_{baseline}")
                rows.append([_paired(effect[names.index(top), :, m] - base[:, m]) for m in range(len(MEASURES))])
    statistic = np.array([[[row[m][s] for s in _STATS] for m in range(len(MEASURES))] for row in rows])
    ds = xr.Dataset(
        {
            "measure_value": (("head_set", "trial", "measure"), values),
            "effect": (("head_set", "trial", "measure"), effect),
            "statistic": (("comparison", "measure", "stat"), statistic),
            "n_ablated": ("head_set", np.array([len(sets.get(n, ())) for n in names], dtype=np.int64)),
            "heads": ("head_set", np.array([",".join(f"L{l}.H{h}" for l, h in sets.get(n, ())) for n in names],
                                           dtype=object)),
        },
        coords={"head_set": names, "trial": np.arange(values.shape[1]), "measure": list(MEASURES),
                "comparison": comparisons, "stat": list(_STATS)},
    )
    info = dict(model=model.name, task=task, pool=pool, n_lists=int(n_lists), list_length=int(list_length),
                list_seed=int(seed), mode="zero", decoding="greedy")
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.recall.recall_ablation", **info))
    ds.attrs.update(info)
    validate_llm_recall_ablation(ds)
    return ds


def validate_llm_recall_ablation(ds: xr.Dataset) -> None:
    """Check an ``llm_recall_ablation`` dataset (see docs/schema.md)."""
    require_variables(ds, ["measure_value", "effect", "statistic", "n_ablated", "heads"], KIND)
    require_dims(ds["measure_value"], ["head_set", "trial", "measure"], KIND, "measure_value")
    require_dims(ds["statistic"], ["comparison", "measure", "stat"], KIND, "statistic")
    if str(ds["head_set"].values[0]) != "none":
        raise SchemaError(f"{KIND} dataset: the first head_set must be 'none' (no ablation)")


def ablation_table(result: xr.Dataset):
    """One row per (comparison, measure): the paired statistics as a pandas DataFrame."""
    validate(result, kind=KIND)
    frame = result["statistic"].to_dataframe().reset_index().pivot_table(
        index=["comparison", "measure"], columns="stat", values="statistic", sort=False, dropna=False)
    return frame[list(_STATS)].reset_index()
