"""The standard figure of each kind of result: which figure function draws a dataset (``icl-cmr plot``)."""
from __future__ import annotations

import sys
import json

import xarray as xr

from cmr.errors import ParameterError, SchemaError
from cmr.schema import KIND_ATTR
from cmr.analysis_set import analysis_of

from . import (ablation, comparison, composition, first_presentation, fits, grids, heads, llm_recall, nulls, organisation,
               predictive, recall, repetition, states)
from .style import house_style, new_figure, plain_text

__all__ = ["STANDARD_FIGURES", "NO_STANDARD_FIGURE", "standard_figure", "figure_function"]

#: (dataset kind, which of them, figure function of icl_cmr.analyses.plots, what it draws), in the order of the help
STANDARD_FIGURES = (
    ("events", "", "recall_curves", "lag-CRP, SPC and PFR, mean +- SEM across subjects"),
    ("lag_profile", "profile_kind lag_crp", "lag_crp", "lag-CRP, mean +- SEM across subjects"),
    ("lag_profile", "heads: dims layer, head", "head_profiles", "lag profiles of the top induction heads"),
    ("lag_profile", "a CMR grid: unit_kind cmr_parameters", "grid_profiles", "CMR's lag profile along each parameter"),
    ("recall_stat", "stat_kind spc", "spc", "serial position curve"),
    ("recall_stat", "stat_kind pfr", "pfr", "probability of first recall"),
    *(("recall_stat", f"stat_kind {name}", name, what) for name, what in (
        ("category_crp", "within-category CRP per subject, with chance"),
        ("category_clustering", "LBC and ARC per subject"),
        ("distance_crp", "CRP by distance bin"),
        ("distance_rank", "distance rank per subject"),
        ("distance_rank_shifted", "distance rank by shift"),
        ("distance_rank_window", "distance rank by window lag"),
        ("input_crp", "CRP from each serial position to each other"),
        ("pli_list_lag", "prior-list intrusions by list lag"),
        ("irt", "inter-response time by output position"),
        ("lag_crl", "inter-response time by lag"),
        ("stop_probability", "stop probability by output position"),
        ("rep_crp", "lag-CRP from each presentation of a repeated item"),
        ("rep_neighbor_crp", "repetition-neighbour CRP against its shuffled control"),
        ("spacing_recall", "recall probability by spacing: once, massed, 1-2, 3-5, 6-8"),
        ("first_presentation_bias", "first-minus-second presentation bias per subject, with the control's"),
        ("analysis_set", "each analysis of a recall-analyses set that has a figure (category CRP included), "
                         "one panel each"),
    )),
    ("profile_fit", "heads: dims layer, head", "share_cmr_like_by_depth", "share of CMR-like heads by depth"),
    ("recall_fit", "a recovery study: true_value", "parameter_recovery", "true against recovered parameters"),
    ("recall_fit", "fits by subject or pooled", "subject_parameters", "free parameters across subjects, flags marked"),
    ("attention_pattern", "", "attention_pattern", "one head's attention over the repeated prompt"),
    ("repetition_heads", "", "first_presentation_heads",
     "repetition CRP of the strongest +1 heads, every head's first-presentation bias by layer"),
    ("composition", "", "composition_matrix", "composition scores of every head pair"),
    ("path_ablation", "", "causal_composition", "drop of the induction score per path"),
    ("ablation", "", "ablation_result", "ICL-score change of the top head set against random sets"),
    ("llm_recall_ablation", "", "recall_ablation_effects", "recall change per ablated head set, 95% CI"),
    ("predictive_check", "", "predictive_check", "data against fitted CMR: lag-CRP, SPC, PFR"),
    ("model_comparison", "", "model_comparison", "each subject's difference to the best model, sums and Akaike weights"),
    ("recall_cv", "", "recall_cv", "held-out log-likelihood per event per subject, folds' range"),
    ("profile_null", "", "profile_null", "CMR distance against the null threshold per unit, shares beyond chance"),
    ("cmr_states", "", "cmr_states", "one list's study and cue context and recall probabilities"),
    ("circuit_trace", "", "circuit_trace", "the circuit's context and recall probabilities at each cue"),
)

#: the dataset kinds without a standard figure and what they hold, as the refusal says (empty: every kind of
#: cmr is drawn; a kind registered by another package through ``cmr.dataset_kinds`` is refused, and a kind
#: kept as a table would be listed here); every kind of :func:`cmr.schema.known_kinds` is here or in
#: :data:`STANDARD_FIGURES` (a test walks them)
NO_STANDARD_FIGURE: dict[str, str] = {
    "dissociation": "per experiment: set ranks (target x measure x mode), the head regression's partial R^2 with "
                    "its bootstrap interval (measure x mode) and the random-set estimates (measure x mode x "
                    "predictor); icl-cmr dissociate prints them",
    "memory_battery": "a language model's recalls per condition of the battery (serial position, list length, "
                      "list strength, DRM, semantic lists), with each list's study items, answer and counts; "
                      "icl-cmr recall-battery prints each effect's statistic and verdict",
}


#: the module of each figure function of the table
_MODULES = {
    **{name: recall for name in ("lag_crp", "spc", "pfr", "recall_curves")},
    **{fn: organisation for kind, _, fn, _ in STANDARD_FIGURES if kind == "recall_stat" and fn not in ("spc", "pfr")},
    **{name: repetition for name in ("rep_crp", "spacing_recall", "first_presentation_bias")},
    "rep_neighbor_crp": repetition,
    "head_profiles": heads, "share_cmr_like_by_depth": heads, "attention_pattern": heads,
    "first_presentation_heads": first_presentation,
    "parameter_recovery": fits, "subject_parameters": fits, "grid_profiles": grids,
    "recall_ablation_effects": llm_recall, "composition_matrix": composition, "causal_composition": composition,
    "ablation_result": ablation, "predictive_check": predictive,
    "model_comparison": comparison, "recall_cv": comparison, "profile_null": nulls,
    "cmr_states": states, "circuit_trace": states,
}


#: figure functions named otherwise than their stat_kind
_FUNCTIONS = {"rep_neighbor_crp": "neighbor_crp"}


def _is_heads(ds) -> bool:
    return "layer" in ds.dims and "head" in ds.dims


def figure_function(result: xr.Dataset) -> str:
    """The name of the figure function (of :mod:`icl_cmr.analyses.plots`) that draws ``result``.

    Raises
    ------
    SchemaError
        ``result`` is not a dataset of a kind with a standard figure; the message names those kinds.
    """
    if not isinstance(result, xr.Dataset):
        raise SchemaError(f"a standard figure draws an icl-cmr dataset; got {type(result).__name__}")
    kind = result.attrs.get(KIND_ATTR)
    if kind == "lag_profile":
        if result.attrs.get("profile_kind") == "lag_crp":
            return "lag_crp"
        if _is_heads(result) and "induction_score" in result:
            return "head_profiles"
        if result.attrs.get("unit_kind") == "cmr_parameters":
            return "grid_profiles"
    elif kind == "recall_stat":
        stat_kind = result.attrs.get("stat_kind")
        if any(k == kind and fn == stat_kind for k, _, fn, _ in STANDARD_FIGURES):
            return stat_kind
    elif kind == "profile_fit":
        if _is_heads(result):
            return "share_cmr_like_by_depth"
    elif kind == "recall_fit":
        if "true_value" in result and "correlation" in result:
            return "parameter_recovery"
        return "subject_parameters"
    else:
        for k, which, function, _ in STANDARD_FIGURES:
            if k == kind and not which:
                return function
    held = f" ({NO_STANDARD_FIGURE[kind]}: cmr.to_dataframe gives its table)" if kind in NO_STANDARD_FIGURE else ""
    raise SchemaError(f"no standard figure for a dataset of kind {kind!r}{_detail(result)}{held}; figures exist for: "
                      + "; ".join(f"{k} ({which})" if which else k for k, which in _kinds()))


def _kinds():
    seen = []
    for kind, which, _, _ in STANDARD_FIGURES:
        if kind == "recall_stat":
            which = "stat_kind " + ", ".join(fn for k, _, fn, _ in STANDARD_FIGURES if k == "recall_stat")
        if (kind, which) not in seen:
            seen.append((kind, which))
    return seen


def _detail(result) -> str:
    """What within the kind decided: ``profile_kind 'cmr_tf_prob'``, ``stat_kind 'pnr'``, ..."""
    for name in ("profile_kind", "stat_kind"):
        if name in result.attrs:
            return f" with {name} {result.attrs[name]!r}"
    if "subject" in result.dims:
        return " per subject"
    return ""


def standard_figure(result: xr.Dataset, *, units=None, title: str | None = None, time_unit: str | None = None,
                    chance=None):
    """The standard figure of a result, drawn by the figure function its kind names (:data:`STANDARD_FIGURES`).

    Parameters
    ----------
    result : xarray.Dataset
        A dataset of one of the kinds of :data:`STANDARD_FIGURES`.
    units : None, int, str or sequence, optional
        Which units: heads as in :func:`head_profiles` (a number, ``"L18.H6,L17.H3"`` or pairs), for
        datasets by subject the subjects to draw (labels, or a comma-separated string of them).
    title : str, optional
        Figure title.
    time_unit : str, optional
        The unit of inter-response times (``irt``, ``lag_crl``), e.g. ``"s"``.
    chance : float or events dataset, optional
        The chance level of a within-category CRP (:func:`category_crp`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    name = figure_function(result)
    options = {}
    if units is not None:
        if name in ("head_profiles",):
            options["units"] = units
        elif "subject" in result.coords or (name == "recall_curves" and "subject" in result):
            result = _subjects(result, units)
        else:
            raise ParameterError(f"units picks heads or subjects; the {result.attrs.get(KIND_ATTR)} dataset drawn by "
                                 f"{name} has neither (dims {', '.join(map(str, result.dims))})")
    if time_unit is not None:
        if name not in ("irt", "lag_crl", "analysis_set"):
            raise ParameterError(f"time_unit applies to inter-response times (irt, lag_crl); this dataset is drawn "
                                 f"by {name}")
        options["time_unit"] = time_unit
    if chance is not None:
        if name not in ("category_crp", "analysis_set"):
            raise ParameterError(f"chance applies to the within-category CRP (category_crp); this dataset is drawn "
                                 f"by {name}")
        options["chance"] = chance
    if name == "predictive_check":
        return predictive.predictive_check(result, title=title)
    fig = getattr(_MODULES[name], _FUNCTIONS.get(name, name))(result, **options)
    if title is not None:
        fig.suptitle(plain_text(title), fontsize=8)  # a user's title is text, never mathtext
    return fig


def _subjects(result: xr.Dataset, units) -> xr.Dataset:
    """``result`` with only the chosen subjects (matched by their labels, as written)."""
    wanted = [part.strip() for part in units.split(",")] if isinstance(units, str) else [str(u) for u in units]
    wanted = [w for w in wanted if w]
    labels = [str(s) for s in result["subject"].values]
    missing = [w for w in wanted if w not in labels]
    if missing or not wanted:
        distinct = list(dict.fromkeys(labels))
        shown = ", ".join(distinct[:10]) + (", ..." if len(distinct) > 10 else "")
        raise ParameterError(f"units: subjects {', '.join(missing) or '(none)'} are not in the dataset; "
                             f"its subjects: {shown}")
    if "subject" in result.dims:
        return result.isel(subject=[labels.index(w) for w in dict.fromkeys(wanted)])
    return result.isel({result["subject"].dims[0]: [label in wanted for label in labels]})  # by trial


def analysis_set(result: xr.Dataset, *, chance=None, time_unit: str | None = None):
    """The analyses of a set made by :func:`cmr.run_analyses` (``icl-cmr recall-analyses``), one panel
    each: every analysis of the set with a standard figure of its own, in the set's order, three
    panels a row. Analyses without one (``lag_rank``, ``pnr``, ``intrusion_rates``,
    ``distance_rank_window_asym``: a number or a table) are named under the figure.

    Parameters
    ----------
    result : xarray.Dataset
        ``recall_stat`` dataset of ``stat_kind="analysis_set"``.
    chance : None, False, float or events dataset, optional
        Chance level of the within-category CRP panel (as :func:`category_crp`).
    time_unit : str, optional
        Unit of the inter-response-time panels.
    """
    parts, left_out = [], []
    for name in json.loads(result.attrs.get("analyses", "[]")):
        part = analysis_of(result, name)
        try:
            parts.append((name, part, figure_function(part)))
        except SchemaError:
            left_out.append(name)
    if not parts:
        raise SchemaError(f"the analysis set holds no analysis with a figure; it holds {', '.join(left_out)}")
    n_panels = sum(_PANELS.get(function, 1) for _, _, function in parts)
    ncols = min(3, n_panels)
    fig, axes = new_figure(ncols=ncols, nrows=-(-n_panels // ncols), squeeze=False)
    axes, used = axes.ravel(), 0
    for name, part, function in parts:
        options = {"chance": chance} if function == "category_crp" and chance is not None else \
            {"time_unit": time_unit} if function in ("irt", "lag_crl") and time_unit is not None else {}
        width = _PANELS.get(function, 1)
        panels = axes[used] if width == 1 else list(axes[used:used + width])
        getattr(_MODULES[function], _FUNCTIONS.get(function, function))(part, ax=panels, **options)
        axes[used].set_title(name, fontsize=8, fontweight="bold", loc="left", pad=30)  # above the legend
        used += width
    for ax in axes[used:]:
        ax.set_visible(False)
    if left_out:
        with house_style():
            fig.text(0.01, 0.0, f"not drawn (no figure): {', '.join(left_out)}", fontsize=6, va="bottom")
    return fig


#: figure functions that draw more than one panel, and how many
_PANELS = {"category_clustering": 2}
_MODULES["analysis_set"] = sys.modules[__name__]  # drawn here: it draws each analysis with the figures above
