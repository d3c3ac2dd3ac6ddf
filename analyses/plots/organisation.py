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
import xarray as xr

from cmr.errors import SchemaError

from ._common import draw_profile, labelled, legend_above, mean_sem, target_axes
from .style import PALETTE

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
    from .style import house_style

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


def irt(stat, *, ax=None):
    """Mean inter-response time by output position (``cmr.irt``), in the time column's units."""
    return _curve(stat, "irt", "irt", "output_position", "Output position", "Inter-response time", ax)


def lag_crl(stat, *, ax=None):
    """Conditional response latency by lag (``cmr.lag_crl``)."""
    return _curve(stat, "lag_crl", "crl", "lag", "Lag (serial positions)", "Inter-response time", ax,
                  split_at_zero=True)


def stop_probability(stat, *, ax=None):
    """Probability that recall ends after each output position (``cmr.stop_probability``)."""
    return _curve(stat, "stop_probability", "prob", "output_position", "Output position", "Stop probability", ax)


def _points(stat, stat_kind, variables, ylabels, ax, *, chance=None):
    from .style import house_style

    data = _data(stat, stat_kind)
    fig, axes = target_axes(ax, ncols=len(variables), width=2.0) if ax is None else \
        target_axes(ax)
    axes = np.atleast_1d(axes)
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
            if chance is not None:
                panel.axhline(chance, color="0.6", linewidth=0.8, linestyle=":", zorder=0)
            panel.set_xticks(range(len(data)), [label or "data" for label in data])
            panel.set_xlim(-0.6, len(data) - 0.4)
            panel.set_ylabel(ylabel)
    return fig


def category_crp(stat, *, ax=None):
    """Within-category transition probability per subject, with the mean +- SEM (``cmr.category_crp``)."""
    return _points(stat, "category_crp", ["prob"], ["Within-category CRP"], ax)


def category_clustering(stat, *, ax=None):
    """LBC and ARC per subject, two panels (``cmr.category_clustering``)."""
    return _points(stat, "category_clustering", ["lbc", "arc"], ["List-based clustering", "ARC"], ax)


def distance_rank(stat, *, ax=None):
    """Distance rank per subject, with the mean +- SEM and chance 0.5 (``cmr.distance_rank``)."""
    return _points(stat, "distance_rank", ["rank"], ["Distance rank"], ax, chance=0.5)


def input_crp(stat, *, ax=None):
    """Conditional response probability from each serial position to each other, pooled (``cmr.input_crp``)."""
    from .style import house_style

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
