"""The effect of ablating attention heads on the language model's own free recall.

:func:`recall_ablation` generates the recall of the same lists
(:func:`icl_cmr.analyses.memory.llm_recall.model_recall`) intact and with head sets zero-ablated: the
target sets (the top CMR-like heads of a fits file, the top induction heads) and seeded random
sets of the same size, drawn uniformly among all heads or layer-matched (:func:`rank_test_sets`,
:func:`head_sets`). Each set's effect on a per-list measure of
:data:`icl_cmr.analyses.memory.llm_recall.MEASURES` is ablated - intact, paired by list.

"This set matters for recall more than random sets" is a claim about sets, so its primary
statistic is the target set's place among the random sets (as for ``icl-cmr ablate``,
:mod:`icl_cmr.analyses.causal.statistics`): the rank of its mean effect over lists, the exact
permutation p of a one-sided test in the direction of a loss (the set lowers the measure more
than random sets do), and z against the random sets' mean and sd. A paired t of the target
set's effect minus the random sets' mean effect over lists is kept beside it, labelled
secondary: for any fixed set it grows with the number of lists. Sets against no ablation get
paired tests over lists. Mistry et al. (2025) report that ablating induction heads removes the
model's +1 bias. See docs/llm-recall.md, "Ablation during recall".
"""
from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from cmr.checks import integer, is_integer, seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError, SchemaError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from ..memory.llm_recall import MEASURES, model_recall, recall_measures
from ...adapters.head_ranking import top_heads
from ...adapters.lm import recall_task as task_module

from .ablation import check_heads, head_sets as ablation_sets, random_head_sets
from .statistics import NULL_FAMILIES, paired_statistics, rank_pvalue, set_z

__all__ = ["KIND", "STATS", "validate_llm_recall_ablation", "head_sets", "rank_test_sets", "set_family", "set_statistics",
           "recall_ablation", "ablation_table", "rank_lines"]

#: the dataset kind of :func:`recall_ablation`
KIND = "llm_recall_ablation"
#: statistics of a comparison: the rank test among random sets first (primary), then the paired
#: tests over lists (secondary for a set against random sets; the test of a set against none)
STATS = ("set_effect", "rank", "n_null", "rank_pvalue", "rank_pvalue_upper", "z", "null_mean", "null_sd",
         "mean_difference", "t_statistic", "t_pvalue", "wilcoxon_pvalue", "cohens_dz", "n_lists")
#: the name prefixes that put a set into a random family (:func:`set_family`)
_PREFIXES = (("random", "random"), ("layer_matched", "layer_matched"))


def set_family(name: str) -> str:
    """``random`` or ``layer_matched`` for a random set (by its name's prefix), else ``target``."""
    for prefix, family in _PREFIXES:
        if str(name).startswith(prefix):
            return family
    return "target"


@renamed_keywords(seed="rng")
def head_sets(heads: xr.Dataset, fits: xr.Dataset, *, fraction: float = 0.1, n_heads: int | None = None,
              n_random: int = 5, n_layer_matched: int = 2, rng=0) -> dict:
    """Named head sets of equal size: top CMR-like, top induction, random, layer-matched random.

    ``fits`` is a ``profile_fit`` dataset of the model's heads (ranked by ``distance``, smallest
    first) and ``heads`` its ``lag_profile`` dataset (ranked by ``induction_score``). Random sets
    avoid the top CMR-like set; layer-matched sets have its count of heads in every layer. The
    set size is ``n_heads``, or ``fraction`` of all heads. The random sets use seed ``seed``, the
    layer-matched ones ``seed + 1``; ``rng``: an int is ``seed``; a Generator draws one
    (``int(rng.integers(2**63))``); None draws one from fresh entropy.
    """
    seed = seed_of(rng)
    top = top_heads(fits, fraction=fraction, n_heads=n_heads)
    induction = top_heads(heads, variable="induction_score", n_heads=len(top), largest=True)
    n_layers, n_heads = int(heads.sizes["layer"]), int(heads.sizes["head"])
    sets = {"top_cmr": top, "top_induction": induction}
    for i, chosen in enumerate(random_head_sets(n_layers, n_heads, top, n_sets=n_random, rng=seed)):
        sets[f"random_{i}"] = chosen
    if n_layer_matched:
        for i, chosen in enumerate(random_head_sets(n_layers, n_heads, top, n_sets=n_layer_matched, rng=seed + 1,
                                                    layer_matched=True)):
            sets[f"layer_matched_{i}"] = chosen
    return sets


@renamed_keywords(seed="rng")
def rank_test_sets(target, n_layers: int, n_heads: int, *, n_random: int = 19, layer_matched: bool = False,
                   rng=0) -> dict:
    """The target set and ``n_random`` random sets of its size, named for :func:`recall_ablation`.

    ``target`` is a list of (layer, head), e.g. the top set of a fits file
    (:func:`icl_cmr.adapters.head_ranking.ranked_head_set`). The random sets are those of ``icl-cmr
    ablate`` (:func:`icl_cmr.analyses.causal.ablation.head_sets`): drawn uniformly among all
    heads, each set independently (the target's own heads included, so the rank p is exact when
    the target is one more random set), or, with ``layer_matched``, with the target's count of
    heads in every layer. Names: ``top<size>`` for the target, ``random<i>`` or
    ``layer_matched<i>`` for the random sets. ``rng`` as in that function.
    """
    n_random = integer(n_random, "n_random (the rank test needs random sets)", minimum=1)
    target = check_heads(target, n_layers, n_heads)
    sets, _, families = ablation_sets(n_layers, n_heads, target, n_random=0 if layer_matched else n_random,
                                      n_matched=n_random if layer_matched else 0, rng=rng)
    named = {f"top{len(target)}": list(target)}  # the target in its ranked order, as chosen
    family = "layer_matched" if layer_matched else "random"
    for i, chosen in enumerate(s for s, f in zip(sets, families) if f != "top"):
        named[f"{family}{i}"] = chosen
    return named


def _paired(differences) -> dict:
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    return {**paired_statistics(d), "n_lists": float(d.size)}


def _mean_effects(effect) -> np.ndarray:
    """Mean over lists of each (set, measure), over the lists where the measure is defined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a set that leaves a measure undefined on every list
        return np.nanmean(effect, axis=1)


def _rank_row(value: float, null) -> dict:
    """The rank test of a set's mean effect among the random sets' (finite ones), in the direction of a loss."""
    null = np.asarray(null, dtype=np.float64)
    null = null[np.isfinite(null)]
    out = dict(rank=np.nan, n_null=float(null.size), rank_pvalue=np.nan, rank_pvalue_upper=np.nan, z=np.nan,
               null_mean=np.nan, null_sd=np.nan)
    if not np.isfinite(value) or null.size == 0:
        return out
    z, centre, spread = set_z(value, null)
    out.update(rank=float(1 + np.sum(null < value)), rank_pvalue=rank_pvalue(-value, -null),
               rank_pvalue_upper=rank_pvalue(value, null), z=z, null_mean=centre, null_sd=spread)
    return out


def set_statistics(effect, names, families) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every comparison of :func:`recall_ablation` from the per-list effects.

    Parameters
    ----------
    effect : array, shape (head_set, trial, measure)
        Ablated - intact per list (NaN where the measure is undefined); ``none`` first.
    names, families : sequences of str, one per head set
        Families ``none`` (the intact model), ``target``, ``random`` or ``layer_matched``.

    Returns
    -------
    comparisons : list of str
        ``<set>_vs_none`` for every ablated set, then ``<target>_vs_<family>``.
    statistic : ndarray, shape (comparison, measure, len(STATS))
    set_effect : ndarray, shape (head_set, measure)
        Mean effect over the lists where the measure is defined.
    """
    effect = np.asarray(effect, dtype=np.float64)
    names, families = list(map(str, names)), list(map(str, families))
    means = _mean_effects(effect)
    n_measures = effect.shape[2]
    comparisons, rows = [], []
    for i, name in enumerate(names):
        if families[i] != "none":
            comparisons.append(f"{name}_vs_none")
            rows.append([{"set_effect": means[i, m], **_paired(effect[i, :, m])} for m in range(n_measures)])
    for null_family in NULL_FAMILIES:
        members = [i for i, f in enumerate(families) if f == null_family]
        if not members:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a list no random set defines stays NaN
            base = np.nanmean(effect[members], axis=0)
        for i, name in enumerate(names):
            if families[i] != "target":
                continue
            comparisons.append(f"{name}_vs_{null_family}")
            rows.append([{"set_effect": means[i, m], **_rank_row(means[i, m], means[members, m]),
                          **_paired(effect[i, :, m] - base[:, m])} for m in range(n_measures)])
    statistic = np.array([[[row[m].get(s, np.nan) for s in STATS] for m in range(n_measures)] for row in rows],
                         dtype=np.float64).reshape(len(rows), n_measures, len(STATS))
    return comparisons, statistic, means


@renamed_keywords(seed="rng")
def recall_ablation(model, sets: dict, *, pool="psifr:peers_notask", n_lists: int = 20, list_length: int = 16,
                    task: str = "free", rng=0, batch_size: int = 16, baseline=None, families=None,
                    max_new_tokens: int | None = None, progress=None, keep_events: bool = False, info=None):
    """Recall of the same lists with each head set zero-ablated; each target set ranked among random sets.

    Parameters
    ----------
    model : LoadedModel
    sets : mapping of str to list of (layer, head)
        Named head sets (:func:`head_sets`, :func:`rank_test_sets`). Names starting with
        ``random`` or ``layer_matched`` form the two random families (:func:`set_family`); the
        others are target sets.
    pool, n_lists, list_length, task, rng, batch_size, max_new_tokens
        As :func:`~icl_cmr.analyses.memory.llm_recall.model_recall` (greedy decoding, so differences
        come from the ablation alone). ``pool`` is a bundled data set's name or a sequence of words.
    baseline : xarray.Dataset, optional
        Events of the intact model on the same lists (from :func:`~icl_cmr.analyses.memory.llm_recall.model_recall`
        with the same pool, ``n_lists``, ``list_length``, ``task`` and ``rng``), so they are not generated twice.
    families : mapping of str to str, optional
        The family of a set (``target``, ``random`` or ``layer_matched``) where its name does not say it.
    progress : callable, optional
        Called with each set's name when it is done.
    keep_events : bool
        Also return the events of every set (intact first), each subject labelled by its set
        (``model|greedy|0|ablate:top5``).
    info : mapping, optional
        More provenance (JSON-safe): where the sets came from, their seed. Text and integer
        entries are also attrs of their own.

    Returns
    -------
    xarray.Dataset, or (xarray.Dataset, list of xarray.Dataset) with ``keep_events``
        Kind ``llm_recall_ablation``: ``measure_value`` (head_set, trial, measure) with head_set
        ``none`` first; ``effect`` = ablated - none; ``set_effect`` (head_set, measure), the mean
        effect over the lists where the measure is defined; ``family`` (head_set); ``statistic``
        (comparison, measure, stat) over :data:`STATS`: ``<target>_vs_<family>`` ranks the
        target's mean effect among the family's (``rank`` 1 = the lowest effect; ``rank_pvalue``
        = (1 + #{random <= target}) / (1 + n), one-sided, the set lowers the measure more than
        random sets; ``rank_pvalue_upper`` the other direction; ``z``), with the paired tests of
        its per-list effect minus the family's mean effect as secondary statistics;
        ``<set>_vs_none`` has the paired tests over lists (t-test, Wilcoxon, Cohen's d_z) alone.
        Random sets whose mean effect is undefined (the measure undefined on every list) leave
        the family's null (``n_null`` counts those left).
    """
    seed = seed_of(rng)
    if not sets:
        raise ParameterError("need at least one head set to ablate")
    families = dict(families or {})
    family = {name: families.get(name, set_family(name)) for name in sets}
    unknown = sorted(f for f in family.values() if f not in ("target", *NULL_FAMILIES))
    if unknown:
        raise ParameterError(f"head set families must be target, {' or '.join(NULL_FAMILIES)}; got {unknown}")
    if "none" in sets:
        raise ParameterError("'none' names the intact model; give the head sets other names")
    words = task_module.word_pool(pool) if isinstance(pool, str) else list(pool)
    lists = task_module.study_lists(words, n_lists=n_lists, list_length=list_length, rng=seed)
    if baseline is not None and [list(r) for r in baseline["study_item"].values[:, :list_length]] != lists:
        raise ParameterError("baseline events were made from other study lists than pool, n_lists, list_length and seed give")
    names = ["none", *sets]
    values, kept = [], []
    for name in names:
        if name == "none" and baseline is not None:
            events = baseline
        else:
            # the pool's words, not its name: intrusions are bounded by the pool's longest item, as for the baseline
            events, _ = model_recall(model, lists=lists, pool=words, task=task, batch_size=batch_size,
                                     heads=sets.get(name, ()), head_set=None if name == "none" else f"ablate:{name}",
                                     max_new_tokens=max_new_tokens)
            events.attrs["pool"] = pool if isinstance(pool, str) else "word list"
        measures = recall_measures(events)
        values.append(np.stack([measures[m].values for m in MEASURES], axis=-1))
        if keep_events:
            kept.append(events)
        if progress is not None:
            progress(name)
    values = np.stack(values)  # (head_set, trial, measure)
    effect = values - values[:1]
    comparisons, statistic, means = set_statistics(effect, names, [family.get(n, "none") for n in names])
    ds = xr.Dataset(
        {
            "measure_value": (("head_set", "trial", "measure"), values),
            "effect": (("head_set", "trial", "measure"), effect),
            "set_effect": (("head_set", "measure"), means),
            "statistic": (("comparison", "measure", "stat"), statistic),
            "family": ("head_set", np.array(["none", *(family[n] for n in sets)], dtype=object)),
            "n_ablated": ("head_set", np.array([len(sets.get(n, ())) for n in names], dtype=np.int64)),
            "heads": ("head_set", np.array([",".join(f"L{l}.H{h}" for l, h in sets.get(n, ())) for n in names],
                                           dtype=object)),
        },
        coords={"head_set": names, "trial": np.arange(values.shape[1]), "measure": list(MEASURES),
                "comparison": comparisons, "stat": list(STATS)},
    )
    settings = dict(model=model.name, task=task, pool=pool if isinstance(pool, str) else "word list",
                    n_lists=int(n_lists), list_length=int(list_length), list_seed=int(seed), mode="zero",
                    decoding="greedy",
                    primary_test="rank of the target set's mean effect among the random sets' (one-sided: the set lowers "
                                 "the measure more than random sets); paired t over lists secondary")
    extra = dict(info or {})
    record = {**extra, **settings}
    if hasattr(model, "provenance"):
        record.setdefault("model_provenance", model.provenance())
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.recall.recall_ablation", **record))
    ds.attrs.update({k: v for k, v in extra.items()
                     if isinstance(v, str) or is_integer(v)})
    ds.attrs.update(settings)
    validate_llm_recall_ablation(ds)
    return (ds, kept) if keep_events else ds


def validate_llm_recall_ablation(ds: xr.Dataset) -> None:
    """Check an ``llm_recall_ablation`` dataset (see docs/schema.md)."""
    require_variables(ds, ["measure_value", "effect", "statistic", "n_ablated", "heads"], KIND)
    require_dims(ds["measure_value"], ["head_set", "trial", "measure"], KIND, "measure_value")
    require_dims(ds["statistic"], ["comparison", "measure", "stat"], KIND, "statistic")
    if str(ds["head_set"].values[0]) != "none":
        raise SchemaError(f"{KIND} dataset: the first head_set must be 'none' (no ablation)")


def ablation_table(result: xr.Dataset):
    """One row per (comparison, measure): the statistics as a pandas DataFrame (columns as the file's ``stat``)."""
    validate(result, kind=KIND)
    frame = result["statistic"].to_dataframe().reset_index().pivot_table(
        index=["comparison", "measure"], columns="stat", values="statistic", sort=False, dropna=False)
    return frame[[str(s) for s in result["stat"].values]].reset_index()


@keyword_only
def rank_lines(result: xr.Dataset, *, measures=None) -> list[str]:
    """One line per (target set vs random family, measure): the rank test (primary) and the paired t (secondary)."""
    validate(result, kind=KIND)
    lines = []
    for comparison in map(str, result["comparison"].values):
        if comparison.endswith("_vs_none"):
            continue
        for measure in measures or map(str, result["measure"].values):
            v = {str(s): float(result["statistic"].sel(comparison=comparison, measure=measure, stat=s))
                 for s in result["stat"].values}
            if not np.isfinite(v["rank_pvalue"]):
                lines.append(f"{comparison} {measure}: no rank test (the measure is undefined on every list for "
                             f"the target set, or for every random set; {v['n_null']:.0f} random sets with a value)")
                continue
            lines.append(
                f"{comparison} {measure}: rank test among {v['n_null']:.0f} random sets: effect {v['set_effect']:+.3f} "
                f"(random {v['null_mean']:+.3f} +- {v['null_sd']:.3f}), rank {v['rank']:.0f} of {v['n_null'] + 1:.0f} "
                f"(1 = lowest), p {v['rank_pvalue']:.3f} (one-sided, lowers {measure} more than random sets; other "
                f"direction p {v['rank_pvalue_upper']:.3f}), z {v['z']:+.2f}; secondary: paired t over "
                f"{v['n_lists']:.0f} lists of the effect minus the random mean, p {v['t_pvalue']:.2g}")
    return lines
