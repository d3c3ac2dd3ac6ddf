"""Figures of psifr's analyses and beyond: semantic, category, intrusion and timing statistics.

Each function takes the dataset of the :mod:`cmr` analysis of the same name (by subject, by
trial or pooled; a mapping label -> dataset overlays several) and returns a Figure:

* curves over one dimension, group mean +- SEM across subjects (:func:`distance_crp`,
  :func:`distance_rank_shifted`, :func:`distance_rank_window`, :func:`pli_list_lag`,
  :func:`irt`, :func:`lag_crl`, :func:`stop_probability`);
* one number per subject, drawn as points with the group mean +- SEM
  (:func:`category_crp`, :func:`category_clustering`, :func:`distance_rank`);
* :func:`input_crp` as a previous x current image of the pooled probabilities.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from cmr.errors import ParameterError, SchemaError
from cmr.events import as_events

from ._common import draw_profile, labelled, legend_above, mean_sem, target_axes
from .style import PALETTE, REFERENCE_GREY, house_style

__all__ = [
    "distance_crp",
    "distance_rank_shifted",
    "distance_rank_window",
    "pli_list_lag",
    "irt",
    "lag_crl",
    "stop_probability",
    "category_crp",
    "category_clustering",
    "distance_rank",
    "input_crp",
    "category_chance",
]


def _data(stat, stat_kind):
    data = labelled(stat, "recall_stat", f"cmr.{stat_kind}")
    for label, ds in data.items():
        if ds.attrs.get("stat_kind") != stat_kind:
            raise SchemaError(f"expected stat_kind {stat_kind!r} (from cmr.{stat_kind}); "
                              f"{label or 'the dataset'} has {ds.attrs.get('stat_kind')!r}")
    return data


def _by_subject(ds: xr.Dataset, variable: str) -> xr.DataArray | None:
    """Values per subject (trials averaged per subject); None when pooled."""
    kind = ds.attrs.get("unit_kind")
    if kind == "pooled":
        return None
    if kind == "trial":
        return ds[variable].groupby("subject").mean("trial")
    return ds[variable]


def _curve(stat, stat_kind, variable, core, xlabel, ylabel, ax, *, chance=None, split_at_zero=False):
    data = _data(stat, stat_kind)
    fig, ax = target_axes(ax)
    with house_style():
        for index, (label, ds) in enumerate(data.items()):
            values = _by_subject(ds, variable)
            if values is None:
                mean, sem, text = ds[variable], None, "pooled"
            else:
                mean, sem, n = mean_sem(values.transpose("subject", core), "subject")
                text = f"n = {n}" if label else f"n = {n} subjects"
            draw_profile(ax, ds[core].values, mean.values, None if sem is None else sem.values, index=index,
                         split_at_zero=split_at_zero, label=f"{label} ({text})" if label else text)
        if chance is not None:
            ax.axhline(chance, color="0.6", linewidth=0.8, linestyle=":", zorder=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        legend_above(ax, title="mean \u00b1 SEM across subjects")
    return fig


def distance_crp(stat, *, ax=None):
    """Conditional response probability by distance bin (``cmr.distance_crp``), at the bin centres."""
    return _curve(stat, "distance_crp", "prob", "center", "Distance (bin centre)", "Conditional response probability",
                  ax)


def distance_rank_shifted(stat, *, ax=None):
    """Distance rank relative to the items recalled 1..k steps back (``cmr.distance_rank_shifted``); 0.5 = chance."""
    return _curve(stat, "distance_rank_shifted", "rank", "shift", "Recalls back (shift)", "Distance rank", ax,
                  chance=0.5)


def distance_rank_window(stat, *, ax=None):
    """Distance rank relative to the studied neighbours of the previous item (``cmr.distance_rank_window``)."""
    return _curve(stat, "distance_rank_window", "rank", "lag", "Study lag of the window item", "Distance rank", ax,
                  chance=0.5)


def pli_list_lag(stat, *, ax=None):
    """Share of intrusions coming from the list k lists back (``cmr.pli_list_lag``)."""
    return _curve(stat, "pli_list_lag", "prob", "list_lag", "List lag", "Share of intrusions", ax)


#: how a time unit may be written in ``time_unit`` or a variable's ``units`` attr, and how the axis names it
TIME_UNITS = {"s": "s", "sec": "s", "second": "s", "seconds": "s", "ms": "ms", "millisecond": "ms",
              "milliseconds": "ms", "min": "min", "minute": "min", "minutes": "min"}


def _time_label(stat, stat_kind: str, variable: str, time_unit) -> str:
    """``Inter-response time (s)``: the unit given, else the data's ``units`` attr when it names a time unit.

    ``cmr.irt`` and ``cmr.lag_crl`` keep the times in the units of the recall-time column (they
    store the column's name in ``units``); when that is no time unit the axis names the column.
    """
    if time_unit is not None:
        if not isinstance(time_unit, str) or not time_unit.strip():
            raise ParameterError(f"time_unit must be a unit such as 's' or 'ms'; got {time_unit!r}")
        return f"Inter-response time ({TIME_UNITS.get(time_unit.strip().lower(), time_unit.strip())})"
    data = _data(stat, stat_kind)
    units = {str(ds[variable].attrs.get("units", "")).strip() for ds in data.values()}
    if len(units) == 1:
        (unit,) = units
        if unit.lower() in TIME_UNITS:
            return f"Inter-response time ({TIME_UNITS[unit.lower()]})"
        if unit:
            return f"Inter-response time (units of '{unit}')"
    return "Inter-response time (units of the recall times)"


def irt(stat, *, ax=None, time_unit: str | None = None):
    """Mean inter-response time by output position (``cmr.irt``).

    The axis names the unit: ``time_unit`` (``"s"``, ``"ms"``) when given, else the ``units``
    attr of ``irt`` when it is a time unit, else the recall-time column the times came from.
    """
    ylabel = _time_label(stat, "irt", "irt", time_unit)
    return _curve(stat, "irt", "irt", "output_position", "Output position", ylabel, ax)


def lag_crl(stat, *, ax=None, time_unit: str | None = None):
    """Conditional response latency by lag (``cmr.lag_crl``); the unit on the axis as in :func:`irt`."""
    ylabel = _time_label(stat, "lag_crl", "crl", time_unit)
    return _curve(stat, "lag_crl", "crl", "lag", "Lag (serial positions)", ylabel, ax, split_at_zero=True)


def stop_probability(stat, *, ax=None):
    """Probability that recall ends after each output position (``cmr.stop_probability``)."""
    return _curve(stat, "stop_probability", "prob", "output_position", "Output position", "Stop probability", ax)


def _points(stat, stat_kind, variables, ylabels, ax, *, chance=None, chance_label=None):
    data = _data(stat, stat_kind)
    if ax is None:
        fig, axes = target_axes(None, ncols=len(variables), width=2.0)
    else:  # one Axes, or one per panel (a figure of several analyses)
        given = list(ax) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
        fig = target_axes(given[0])[0]
        axes = [target_axes(a)[1] for a in given]
    axes = np.atleast_1d(np.asarray(axes, dtype=object))
    if axes.size != len(variables):
        raise SchemaError(f"{stat_kind} draws {len(variables)} panels; pass ax=None to get them")
    rng = np.random.default_rng(0)  # fixed jitter, so a figure is reproducible
    with house_style():
        for panel, variable, ylabel in zip(axes, variables, ylabels):
            for index, (label, ds) in enumerate(data.items()):
                values = _by_subject(ds, variable)
                if values is None:
                    panel.plot([index], [float(ds[variable])], "o", color=PALETTE[index % len(PALETTE)])
                    continue
                finite = values.values[np.isfinite(values.values)]
                panel.plot(index + rng.uniform(-0.15, 0.15, finite.size), finite, ".", alpha=0.5,
                           color=PALETTE[index % len(PALETTE)])
                mean, sem, _ = mean_sem(values, "subject")
                panel.errorbar([index], [float(mean)], yerr=[float(sem)], fmt="o", color="black", capsize=3)
            if chance_label is not None:
                panel.axhline(chance, color=REFERENCE_GREY, linewidth=0.8, linestyle="--", zorder=0,
                              label=chance_label)
                legend_above(panel)
            elif chance is not None:
                panel.axhline(chance, color="0.6", linewidth=0.8, linestyle=":", zorder=0)
            panel.set_xticks(range(len(data)), [label or "data" for label in data])
            panel.set_xlim(-0.6, len(data) - 0.4)
            panel.set_ylabel(ylabel)
    return fig


def category_crp(stat, *, ax=None, chance=None, category_key: str = "category"):
    """Within-category transition probability per subject, with the mean +- SEM (``cmr.category_crp``).

    Parameters
    ----------
    stat : xarray.Dataset or mapping of str to xarray.Dataset
        ``recall_stat`` dataset(s) of ``stat_kind="category_crp"``.
    ax : matplotlib.axes.Axes, optional
    chance : None, False, float or events dataset, optional
        Chance level, drawn as a dashed line labelled "chance". ``None`` (default): the level
        the statistic stores (``chance`` of :func:`cmr.category_crp`, the share of same-category
        items among those available at each counted transition), averaged over subjects as the
        CRP is; several data sets with different levels get a short line each over their points.
        A probability, or the events the statistic was computed from (whose level is then
        :func:`category_chance`), replaces it; ``False`` draws none.
    category_key : str
        With events as ``chance``: the column of each studied item's category.
    """
    level, stored = None, []
    if chance is None:
        stored = _stored_chance(_data(stat, "category_crp"))
        if len(set(stored)) == 1:
            level, stored = stored[0], []
    elif chance is not False:
        level = _chance_level(chance, category_key)
    fig = _points(stat, "category_crp", ["prob"], ["Within-category CRP"], ax, chance=level,
                  chance_label=None if level is None else f"chance ({level:.2f})")
    if stored:  # several data sets, each with its own level
        panel = fig.axes[0] if ax is None else ax
        with house_style():
            for index, value in enumerate(stored):
                panel.plot([index - 0.35, index + 0.35], [value, value], color=REFERENCE_GREY, linewidth=0.8,
                           linestyle="--", zorder=0, label="chance (each data set)" if index == 0 else None)
            legend_above(panel)
    return fig


def _stored_chance(data: dict) -> list[float]:
    """Each data set's stored chance level, averaged over subjects as its CRP is; [] when one has none."""
    levels = []
    for ds in data.values():
        if "chance" not in ds:
            return []
        values = _by_subject(ds, "chance")
        level = float(ds["chance"]) if values is None else float(values.mean(skipna=True))
        if not np.isfinite(level):
            return []
        levels.append(level)
    return levels


def _chance_level(chance, category_key: str) -> float:
    if isinstance(chance, xr.Dataset):
        return category_chance(chance, category_key=category_key)
    if isinstance(chance, bool) or not isinstance(chance, (int, float, np.number)) or not 0.0 <= float(chance) <= 1.0:
        raise ParameterError(f"chance must be a probability in [0, 1] or an events dataset; got {chance!r}")
    return float(chance)


def category_chance(events, *, category_key: str = "category") -> float:
    """Chance level of the within-category CRP: the share of same-category items among the other studied items.

    For each studied item whose category has another item in its list, the share
    ``(n_c - 1) / (L - 1)`` of the other ``L - 1`` items that share its category ``c``,
    averaged over those items of every list. This is the chance of a within-category
    transition from that item when every other item is still available; items recalled
    earlier leave the pool, so it approximates the chance at each transition that
    ``cmr.category_crp`` counts (conditional, as there, on a same-category item being available);
    the exact level of those transitions is the ``chance`` that ``cmr.category_crp`` stores.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        The events ``cmr.category_crp`` was computed from.
    category_key : str
        Column of each studied item's category (``study_<category_key>`` in the events).

    Returns
    -------
    float
    """
    events = as_events(events)
    name = f"study_{category_key}"
    if name not in events:
        raise ParameterError(f"the events have no study column {category_key!r} (variable {name!r}) of item "
                             "categories; give category_key")
    categories = events[name].transpose("trial", "study_position").values
    lengths = events["list_length"].values.astype(np.int64)
    # the studied items of each list (positions below its length) that have a category: not
    # missing and not empty text
    studied = (np.arange(categories.shape[1]) < lengths[:, None]) & ~pd.isna(categories)
    if categories.dtype.kind in "OU":
        studied &= categories != ""
    trial, _ = np.nonzero(studied)  # row by row, in study order, as the shares are averaged
    # one code per category (equal values share one), then each item's count within its list
    codes = pd.factorize(categories[studied])[0].astype(np.int64)
    _, pair, n_same = np.unique(trial * (codes.max(initial=0) + 1) + codes, return_inverse=True, return_counts=True)
    same = n_same[pair.reshape(-1)].astype(float) - 1.0
    others = studied.sum(axis=1)[trial] - 1
    shares = same[same > 0] / others[same > 0]
    if not shares.size:
        raise ParameterError(f"no studied item in the events shares its category {category_key!r} with another "
                             "item of its list: the within-category CRP has no chance level")
    return float(np.mean(shares))


def category_clustering(stat, *, ax=None):
    """LBC and ARC per subject, two panels (``cmr.category_clustering``); ``ax``: None or two Axes."""
    return _points(stat, "category_clustering", ["lbc", "arc"], ["List-based clustering", "ARC"], ax)


def distance_rank(stat, *, ax=None):
    """Distance rank per subject, with the mean +- SEM and chance 0.5 (``cmr.distance_rank``)."""
    return _points(stat, "distance_rank", ["rank"], ["Distance rank"], ax, chance=0.5)


def input_crp(stat, *, ax=None):
    """Conditional response probability from each serial position to each other, pooled (``cmr.input_crp``)."""
    data = _data(stat, "input_crp")
    if len(data) != 1:
        raise SchemaError("input_crp draws one dataset; got a mapping of several")
    (ds,) = data.values()
    actual, possible = ds["actual"], ds["possible"]
    for dim in ("subject", "trial"):
        if dim in actual.dims:
            actual, possible = actual.sum(dim), possible.sum(dim)
    prob = (actual / possible.where(possible > 0)).transpose("previous", "current")
    fig, ax = target_axes(ax)
    with house_style():
        image = ax.imshow(prob.values, origin="lower", cmap="viridis", aspect="equal",
                          extent=(0.5, prob.sizes["current"] + 0.5, 0.5, prob.sizes["previous"] + 0.5))
        fig.colorbar(image, ax=ax, label="Conditional response probability")
        ax.set_xlabel("Serial position of the next recall")
        ax.set_ylabel("Serial position of the previous recall")
    return fig
