"""Does CMR-likeness explain causal importance beyond induction? (docs/dissociation.md)

Three experiments, each a function that returns an xarray Dataset of kind ``dissociation``:

``sets`` (:func:`set_experiment`, from effects :func:`set_effects` computes)
    The CMR-like heads that are not induction heads (induction score below a stated
    threshold), as one set and as the subgroups whose lag profile peaks at lag 0 and at lag +1,
    each against random sets **stratified on layer and induction score** (every random set has
    as many heads as the target in every (layer, induction-score bin) cell, drawn among that
    cell's heads, so the target is one possible draw and the rank p is exact under the null).
    The positive control, the induction-only heads (induction score at or above the threshold,
    not CMR-like), is ranked among layer-matched sets (stratified on layer alone: matching its
    induction score would remove what it controls for). Inference by sets: the rank p and z
    of the set's mean effect among its random sets (:mod:`.statistics`).
``heads`` (:func:`head_regression`, on effects :func:`single_head_effects` computes)
    Every head ablated alone. The per-head effects are regressed on the baseline features
    (induction, previous-token and duplicate-token scores, layer as a factor), then with the CMR
    features added (CMR distance, forward asymmetry, fitted beta_enc): the share of variance the
    CMR features explain beyond the baseline (:func:`.regression.nested_regression`).
``random_sets`` (:func:`random_set_regression`)
    The random sets of an ``ablation`` result: their mean effects regressed on their members'
    mean induction score, on whether a named head (default L16.H0) is a member, and on their
    count of CMR-like heads.

Holm's correction (Holm 1979) runs within each experiment over two named families: ``primary``
(the CMR tests on the primary measure, every mode) and ``all measures`` (every test of the
experiment). Every torch call lives in :mod:`icl_cmr.adapters.lm.ablation_engine`.
"""
from __future__ import annotations

import json
from math import comb, log10

import numpy as np
import xarray as xr

from cmr.checks import as_generator, seed_of
from cmr.cmr_like import forward_effect
from cmr.constants import CMR_LIKE_DISTANCE
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError, SchemaError
from cmr.multiple_comparisons import holm
from cmr.schema import provenance_attrs

from .dissociation_io import HOLM_FAMILIES, KIND, validate_dissociation
from .head_effects import set_effects
from .regression import ols_table
from .statistics import rank_pvalue, set_z

__all__ = ["KIND", "DEFINITIONS", "DIS_MEASURES", "INDUCTION_THRESHOLD", "head_table", "induction_bins",
           "stratified_sets", "target_sets", "null_sets", "set_statistics", "set_experiment", "random_set_regression",
           "validate_dissociation", "head_grid", "HOLM_FAMILIES"]

#: definitions of CMR-like (docs/null-models.md)
DEFINITIONS = ("study", "strict")
#: the measures with power the experiments ablate on (docs/ablation.md)
DIS_MEASURES = ("bigram", "repeated_tokens")
#: default induction-score threshold: attention probability 0.1 on the induction target
INDUCTION_THRESHOLD = 0.1
#: the target sets of the ``sets`` experiment, with the null family each is ranked among
TARGETS = {"cmr_not_induction": "stratified", "cmr_lag0": "stratified", "cmr_lag1": "stratified",
           "induction_only": "layer"}
#: targets whose tests form the family ``primary``
PRIMARY_TARGETS = ("cmr_not_induction", "cmr_lag0", "cmr_lag1")


def head_grid(dataset, variable) -> xr.DataArray:
    """``variable`` of a dataset as a float64 (layer, head) DataArray (other dims must have size 1)."""
    if variable not in dataset:
        raise SchemaError(f"dataset has no variable {variable!r}; variables: {', '.join(map(str, dataset.data_vars))}")
    values = dataset[variable]
    extra = [d for d in values.dims if d not in ("layer", "head", "lag", "parameter")]
    if not {"layer", "head"} <= set(values.dims) or any(values.sizes[d] != 1 for d in extra):
        raise SchemaError(f"{variable!r} must have dims layer and head (others of size 1); got {dict(values.sizes)}")
    values = values.squeeze(extra, drop=True)
    rest = [d for d in values.dims if d not in ("layer", "head")]
    return values.transpose("layer", "head", *rest).astype(np.float64)


@keyword_only
def head_table(heads: xr.Dataset, fits: xr.Dataset, *, null: xr.Dataset | None = None, definition: str = "study",
               induction_threshold: float = INDUCTION_THRESHOLD) -> xr.Dataset:
    """Per head (layer, head): the baseline and CMR features, CMR-likeness and the peak lag.

    Parameters
    ----------
    heads : xarray.Dataset
        ``lag_profile`` of the heads (``icl-cmr heads``): ``induction_score``,
        ``previous_token_score``, ``duplicate_token_score``.
    fits : xarray.Dataset
        ``profile_fit`` of those profiles (``icl-cmr fit``): ``distance``, ``profile``,
        ``parameters`` (``beta_enc``).
    null : xarray.Dataset, optional
        ``profile_null`` (``icl-cmr null``): its ``cmr_like_study`` / ``cmr_like_strict`` flags.
    definition : {"study", "strict"}
        ``study``: ``cmr_like_study`` of ``null`` when given, else CMR distance below
        :data:`cmr.constants.CMR_LIKE_DISTANCE` (0.5); ``strict`` needs ``null``.
    induction_threshold : float
        Heads with ``induction_score >= induction_threshold`` are induction heads.

    Returns
    -------
    xarray.Dataset over (layer, head): ``induction_score``, ``previous_token_score``,
    ``duplicate_token_score``, ``distance``, ``forward_effect`` ((y(+1) - y(-1)) / range of the
    fitted profile), ``beta_enc``, ``peak_lag`` (lag of the profile's maximum), ``cmr_like`` and
    ``induction`` (0/1); attrs say how CMR-like was decided.
    """
    if definition not in DEFINITIONS:
        raise ParameterError(f"definition must be one of {', '.join(DEFINITIONS)}; got {definition!r}")
    if not np.isfinite(float(induction_threshold)):
        raise ParameterError(f"induction_threshold must be a finite number; got {induction_threshold!r}")
    table = xr.Dataset()
    for name in ("induction_score", "previous_token_score", "duplicate_token_score"):
        table[name] = head_grid(heads, name)
    distance = head_grid(fits, "distance")
    profile = head_grid(fits, "profile")
    lags = [int(v) for v in profile["lag"].values]
    table["distance"] = distance
    table["forward_effect"] = (("layer", "head"), forward_effect(profile.values, lags))
    parameters = head_grid(fits, "parameters")
    if "beta_enc" not in [str(p) for p in parameters["parameter"].values]:
        raise SchemaError(f"the fit dataset has no parameter beta_enc; parameters: "
                          f"{', '.join(map(str, parameters['parameter'].values))}")
    table["beta_enc"] = parameters.sel(parameter="beta_enc", drop=True)
    values = np.where(np.isfinite(profile.values), profile.values, -np.inf)
    peak = np.asarray(lags)[values.argmax(axis=-1)].astype(np.float64)
    table["peak_lag"] = (("layer", "head"), np.where(np.isfinite(profile.values).any(axis=-1), peak, np.nan))
    if definition == "strict" or null is not None:
        if null is None or f"cmr_like_{definition}" not in null:
            raise SchemaError(f"the {definition} definition of CMR-like needs a profile_null dataset with "
                              f"cmr_like_{definition} (icl-cmr null HEADS.nc -o NULL.nc)")
        flag = head_grid(null, f"cmr_like_{definition}") == 1
        rule = f"cmr_like_{definition} of the profile_null dataset (docs/null-models.md)"
    else:
        flag = distance < CMR_LIKE_DISTANCE
        rule = f"CMR distance below {CMR_LIKE_DISTANCE} (the study's distance criterion, without its null)"
    table["cmr_like"] = flag.astype(np.int64)
    table["induction"] = (table["induction_score"] >= float(induction_threshold)).astype(np.int64)
    if table["layer"].size * table["head"].size != distance.size or not (
            np.array_equal(table["layer"], distance["layer"]) and np.array_equal(table["head"], distance["head"])):
        raise SchemaError("the heads and fits datasets must cover the same layers and heads")
    table.attrs.update(cmr_like_definition=definition, cmr_like_rule=rule,
                       induction_threshold=float(induction_threshold))
    return table


@keyword_only
def induction_bins(scores, *, threshold: float = INDUCTION_THRESHOLD, n_bins: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(bin index per head, bin edges): quantile bins of the induction scores below ``threshold``
    (``n_bins - 1`` of them, at least 1) and one bin at or above it, so a random set stratified
    on these bins holds induction heads only where the target does."""
    scores = np.asarray(scores, dtype=np.float64)
    if int(n_bins) < 2:
        raise ParameterError(f"n_bins must be at least 2 (below and above the threshold); got {n_bins}")
    below = scores[np.isfinite(scores) & (scores < threshold)]
    inner = np.quantile(below, np.linspace(0, 1, int(n_bins))[1:-1]) if below.size else np.empty(0)
    edges = np.unique(np.r_[inner, float(threshold)])
    bins = np.searchsorted(edges, scores, side="right").astype(np.int64)
    return np.where(np.isfinite(scores), bins, -1), edges


@keyword_only
@renamed_keywords(seed="rng")
def stratified_sets(target, strata, *, n_sets: int, rng) -> tuple[list[list[tuple[int, int]]], float]:
    """``n_sets`` random sets with the target's composition over ``strata``.

    ``strata`` maps every head (layer, head) to its stratum (e.g. (layer, induction bin)); each
    set draws, in every stratum, as many heads as ``target`` holds there, uniformly without
    replacement among all of that stratum's heads (the target's included), with
    ``numpy.random.default_rng(rng)`` (a Generator ``rng`` is used as is). Returns the sets (each
    sorted) and log10 of the number of
    distinct sets the design allows (small: the rank test cannot resolve small p)."""
    target = [(int(l), int(h)) for l, h in target]
    if not target:
        raise ParameterError("a stratified random set needs a non-empty target")
    missing = [h for h in target if h not in strata]
    if missing:
        raise ParameterError(f"target heads without a stratum: {missing[:5]}")
    cells: dict = {}
    for head, stratum in strata.items():
        cells.setdefault(stratum, []).append(head)
    need: dict = {}
    for head in target:
        need[strata[head]] = need.get(strata[head], 0) + 1
    rng = as_generator(rng)
    order = sorted(need)
    sets = []
    for _ in range(int(n_sets)):
        chosen = []
        for stratum in order:
            pool = sorted(cells[stratum])
            chosen += [pool[i] for i in rng.choice(len(pool), size=need[stratum], replace=False)]
        sets.append(sorted(chosen))
    log_count = float(sum(log10(comb(len(cells[s]), k)) for s, k in need.items()))
    return sets, log_count


def _heads_where(table, mask) -> list[tuple[int, int]]:
    rows, cols = np.nonzero(np.asarray(mask))
    layers, heads = table["layer"].values, table["head"].values
    return [(int(layers[r]), int(heads[c])) for r, c in zip(rows, cols)]


def target_sets(table: xr.Dataset) -> dict:
    """The target sets of the ``sets`` experiment (:data:`TARGETS`), possibly empty."""
    cmr, induction = table["cmr_like"].values == 1, table["induction"].values == 1
    finite = np.isfinite(table["induction_score"].values)
    peak = table["peak_lag"].values
    plain = cmr & ~induction & finite
    return {"cmr_not_induction": _heads_where(table, plain), "cmr_lag0": _heads_where(table, plain & (peak == 0)),
            "cmr_lag1": _heads_where(table, plain & (peak == 1)),
            "induction_only": _heads_where(table, induction & ~cmr)}


@keyword_only
@renamed_keywords(seed="rng")
def null_sets(table: xr.Dataset, targets: dict, *, n_sets: int, rng, n_bins: int = 3) -> dict:
    """Per non-empty target: (its null family, its random sets, log10 of the distinct sets possible).

    Target ``k`` (in the order of ``targets``) draws its sets with seed ``seed + k``; ``rng``: an
    int is ``seed``; a Generator draws one (``int(rng.integers(2**63))``)."""
    seed = seed_of(rng)
    bins, _ = induction_bins(table["induction_score"].values.ravel(), threshold=table.attrs["induction_threshold"],
                             n_bins=n_bins)
    layers = np.repeat(table["layer"].values, table.sizes["head"])
    heads = np.tile(table["head"].values, table.sizes["layer"])
    out = {}
    for k, (name, members) in enumerate(targets.items()):
        if not members:
            continue
        family = TARGETS[name]
        strata = {(int(l), int(h)): (int(l), int(b)) if family == "stratified" else (int(l),)
                  for l, h, b in zip(layers, heads, bins) if b >= 0}
        sets, log_count = stratified_sets(members, strata, n_sets=n_sets, rng=seed + k)
        out[name] = (family, sets, log_count)
    return out


def _finite_mean(values) -> float:
    """Mean of the finite values (a passage without bigram-completing tokens has none); NaN if none."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else np.nan


def set_statistics(effects, sizes, names, families, *, measures=DIS_MEASURES, modes=("zero",),
                   primary_measure: str = "bigram", info=None) -> xr.Dataset:
    """The ``sets`` experiment's statistics from per-passage effects.

    Parameters
    ----------
    effects : dict
        Per target name: (target effects (measure, mode, passage), null effects (measure, mode,
        set, passage)), effect = ablated - intact (> 0: ablation hurts).
    sizes, names, families : dict
        Per target: its number of heads, its heads as ``L16.H0,...`` text, its null family.

    Returns
    -------
    Dataset of kind ``dissociation`` with dims (target, measure, mode): ``set_mean_effect``,
    ``set_rank``, ``set_n_null``, ``set_rank_pvalue``, ``set_z``, ``set_null_mean``,
    ``set_null_sd``, ``set_holm_pvalue`` (family ``primary``: the CMR-like non-induction targets
    on ``primary_measure``, NaN elsewhere) and ``set_measure_holm_pvalue`` (family ``all
    measures``).
    """
    targets = list(effects)
    shape = (len(targets), len(measures), len(modes))
    stats = {k: np.full(shape, np.nan) for k in ("mean_effect", "rank", "n_null", "rank_pvalue", "z", "null_mean",
                                                 "null_sd")}
    for t, name in enumerate(targets):
        mine, null = effects[name]
        for m in range(len(measures)):
            for d in range(len(modes)):
                value = _finite_mean(mine[m, d])
                means = np.array([_finite_mean(row) for row in null[m, d]])
                means = means[np.isfinite(means)]
                if not np.isfinite(value) or means.size == 0:
                    continue
                z, centre, spread = set_z(value, means)
                for key, v in (("mean_effect", value), ("rank", 1 + np.sum(means > value)), ("n_null", means.size),
                               ("rank_pvalue", rank_pvalue(value, means)), ("z", z), ("null_mean", centre),
                               ("null_sd", spread)):
                    stats[key][t, m, d] = v
    primary = np.full(shape, np.nan)
    in_primary = np.array([n in PRIMARY_TARGETS for n in targets])[:, None, None] & (
        np.array([m == primary_measure for m in measures])[None, :, None])
    primary[np.broadcast_to(in_primary, shape)] = stats["rank_pvalue"][np.broadcast_to(in_primary, shape)]
    ds = xr.Dataset(coords={"target": targets, "measure": list(measures), "mode": list(modes),
                            "null_family": ("target", [families[n] for n in targets]),
                            "target_heads": ("target", [names[n] for n in targets]),
                            "target_size": ("target", np.array([sizes[n] for n in targets], dtype=np.int64))})
    dims = ("target", "measure", "mode")
    for key, values in stats.items():
        ds[f"set_{key}"] = (dims, values)
    ds["set_holm_pvalue"] = (dims, holm(primary))
    ds["set_measure_holm_pvalue"] = (dims, holm(stats["rank_pvalue"]))
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.dissociation.set_experiment",
                                     primary_measure=primary_measure, **(info or {})))
    ds.attrs.update(experiments="sets", primary_measure=primary_measure,
                    holm_families=json.dumps(HOLM_FAMILIES["sets"]))
    return ds


@renamed_keywords(seed="rng")
def set_experiment(bridge, passages, table: xr.Dataset, *, n_sets: int = 60, n_bins: int = 3, modes=("zero",),
                   measures=DIS_MEASURES, primary_measure: str = "bigram", rng=0, batch_size: int = 8,
                   repeat_length: int = 100, deadline=None, progress=True, info=None) -> xr.Dataset:
    """Experiment ``sets``: the CMR-like non-induction heads (all, lag 0, lag +1) against random
    sets stratified on layer and induction score, the induction-only heads against layer-matched
    sets (module docstring). ``n_sets`` random sets per target (seeds ``seed``, ``seed + 1``, ...
    by target; ``rng``: an int is ``seed``, default 0; a Generator draws one,
    ``int(rng.integers(2**63))``); empty targets are left out (attr ``empty_targets``). Returns
    :func:`set_statistics` with the passages done (attr ``n_passages_done``)."""
    seed = seed_of(rng)
    targets = target_sets(table)
    nulls = null_sets(table, targets, n_sets=n_sets, rng=seed, n_bins=n_bins)
    if not nulls:
        raise ParameterError("no target set has any head: no CMR-like head below the induction threshold and no "
                             "induction-only head")
    order = list(nulls)
    all_sets, spans = [], {}
    for name in order:
        start = len(all_sets)
        all_sets += [targets[name], *nulls[name][1]]
        spans[name] = (start, len(all_sets))
    effects, done = set_effects(bridge, passages, all_sets, modes=modes, measures=measures, rng=seed,
                                batch_size=batch_size,
                                repeat_length=repeat_length, deadline=deadline, progress=progress,
                                desc=f"sets ({len(all_sets)} sets x {len(modes)} modes)")
    per_target = {n: (effects[:, :, spans[n][0]], effects[:, :, spans[n][0] + 1:spans[n][1]]) for n in order}
    text = {n: ",".join(f"L{l}.H{h}" for l, h in targets[n]) for n in order}
    details = dict(n_sets=int(n_sets), n_bins=int(n_bins), seed=int(seed), n_passages_done=int(done),
                   cmr_like_rule=table.attrs["cmr_like_rule"], induction_threshold=table.attrs["induction_threshold"],
                   empty_targets=",".join(n for n in TARGETS if n not in nulls) or "none",
                   log10_possible_sets=json.dumps({n: round(nulls[n][2], 2) for n in order}), **(info or {}))
    ds = set_statistics(per_target, {n: len(targets[n]) for n in order}, text, {n: nulls[n][0] for n in order},
                        measures=measures, modes=modes, primary_measure=primary_measure, info=details)
    ds.attrs.update({k: v for k, v in details.items() if isinstance(v, (int, float, str))})
    return ds


@keyword_only
def random_set_regression(ablation: xr.Dataset, table: xr.Dataset, *, named_head=(16, 0), families=("random",),
                          primary_measure: str = "bigram") -> xr.Dataset:
    """Experiment ``random_sets``: the random sets' mean effects regressed on their members.

    Predictors (with an intercept): ``mean_induction`` (the members' mean induction score),
    ``has_named_head`` (1 when ``named_head`` is a member) and ``n_cmr_like`` (members that are
    CMR-like by ``table``). One ordinary least-squares fit per measure and mode of the
    ``ablation`` result (``measure_mean_effect``, or ``mean_effect`` of the ICL score), over
    its sets of ``families``.

    Returns
    -------
    Dataset of kind ``dissociation`` with dims (measure, mode, predictor): ``random_estimate``,
    ``random_se``, ``random_t_pvalue``, ``random_holm_pvalue`` (family ``primary``: the named head
    and the CMR-like count on ``primary_measure``), ``random_measure_holm_pvalue`` (``all
    measures``); (measure, mode): ``random_r2``, ``random_n_sets``; and per set the predictors.
    """
    for name in ("set_layer", "set_head", "family"):
        if name not in ablation.variables:
            raise SchemaError(f"random_set_regression needs an ablation dataset (icl-cmr ablate) with {name!r}")
    chosen = np.isin(ablation["family"].values.astype(str), list(families))
    if chosen.sum() < 4:
        raise ParameterError(f"the ablation result holds {int(chosen.sum())} sets of families "
                             f"{', '.join(families)}; the regression needs at least 4")
    named = (int(named_head[0]), int(named_head[1]))
    layers, heads = ablation["set_layer"].values[chosen], ablation["set_head"].values[chosen]
    induction = table["induction_score"].to_series().to_dict()
    cmr = table["cmr_like"].to_series().to_dict()
    if named not in induction:
        raise ParameterError(f"the named head L{named[0]}.H{named[1]} is not in the head table")
    members = [list(zip(map(int, l), map(int, h))) for l, h in zip(layers, heads)]
    mean_induction = np.array([np.mean([induction.get(m, np.nan) for m in s]) for s in members])
    has_named = np.array([float(named in s) for s in members])
    n_cmr = np.array([float(sum(cmr.get(m, 0) for m in s)) for s in members])
    x = np.column_stack([np.ones(len(members)), mean_induction, has_named, n_cmr])
    predictors = ["intercept", "mean_induction", "has_named_head", "n_cmr_like"]
    if "measure_mean_effect" in ablation:
        effect = ablation["measure_mean_effect"].transpose("measure", "mode", "head_set").values[..., chosen]
        measures = [str(m) for m in ablation["measure"].values]
    else:
        effect = ablation["mean_effect"].transpose("mode", "head_set").values[None, :, chosen]
        measures = ["icl"]
    modes = [str(m) for m in ablation["mode"].values]
    shape = (len(measures), len(modes), len(predictors))
    out = {k: np.full(shape, np.nan) for k in ("estimate", "se", "t_pvalue")}
    r2, n_rows = np.full(shape[:2], np.nan), np.zeros(shape[:2])
    for m in range(len(measures)):
        for d in range(len(modes)):
            fit = ols_table(x, effect[m, d], predictors)
            for key in out:
                out[key][m, d] = fit[key]
            r2[m, d], n_rows[m, d] = fit["r2"], fit["n_rows"]
    tested = np.array([p != "intercept" for p in predictors])
    pvalues = np.where(tested[None, None, :], out["t_pvalue"], np.nan)
    primary = np.where(np.array([m == primary_measure for m in measures])[:, None, None]
                       & np.isin(predictors, ["has_named_head", "n_cmr_like"])[None, None, :], pvalues, np.nan)
    ds = xr.Dataset(coords={"measure": measures, "mode": modes, "predictor": predictors,
                            "random_set": np.arange(len(members), dtype=np.int64)})
    dims = ("measure", "mode", "predictor")
    for key, values in out.items():
        ds[f"random_{key}"] = (dims, values)
    ds["random_holm_pvalue"] = (dims, holm(primary))
    ds["random_measure_holm_pvalue"] = (dims, holm(pvalues))
    ds["random_r2"] = (("measure", "mode"), r2)
    ds["random_n_sets"] = (("measure", "mode"), n_rows)
    ds["random_mean_induction"] = ("random_set", mean_induction)
    ds["random_has_named_head"] = ("random_set", has_named.astype(np.int64))
    ds["random_n_cmr_like"] = ("random_set", n_cmr.astype(np.int64))
    details = dict(named_head=f"L{named[0]}.H{named[1]}", families=",".join(families),
                   cmr_like_rule=table.attrs.get("cmr_like_rule", ""),
                   ablation_provenance=ablation.attrs.get("provenance", ""), primary_measure=primary_measure)
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.dissociation.random_set_regression", **details))
    ds.attrs.update(experiments="random_sets", named_head=details["named_head"], primary_measure=primary_measure,
                    cmr_like_rule=details["cmr_like_rule"],
                    holm_families=json.dumps(HOLM_FAMILIES["random_sets"]))
    return ds
