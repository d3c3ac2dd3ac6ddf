"""Figures of the repetition analyses (:mod:`cmr.repetition`, docs/repetition.md).

* :func:`rep_crp`: the lag-CRP centred on each presentation of a repeated item, one line per
  presentation, mean +- SEM across subjects;
* :func:`neighbor_crp`: the repetition-neighbour CRP, with its shuffled control where present;
* :func:`spacing_recall`: recall probability in the once-presented, massed, 1-2, 3-5 and 6-8 bins;
* :func:`first_presentation_bias`: each subject's first-minus-second +1 rate against the control.
"""
from __future__ import annotations

import numpy as np

from cmr.errors import SchemaError

from ._common import draw_profile, labelled, legend_above, mean_sem, target_axes
from .style import PALETTE, REFERENCE_GREY, house_style

__all__ = ["rep_crp", "neighbor_crp", "spacing_recall", "first_presentation_bias"]


def _data(stat, stat_kind):
    """The labelled datasets, each a ``recall_stat`` of ``stat_kind``."""
    data = labelled(stat, "recall_stat", "cmr.repetition")
    for label, ds in data.items():
        if ds.attrs.get("stat_kind") != stat_kind:
            raise SchemaError(f"expected stat_kind {stat_kind!r} (from cmr.repetition); "
                              f"{label or 'the dataset'} has {ds.attrs.get('stat_kind')!r}")
    return data


def _by_subject(ds, variable):
    """Values per subject (trials averaged per subject); None when pooled."""
    kind = ds.attrs.get("unit_kind")
    if kind == "pooled":
        return None
    if kind == "trial":
        return ds[variable].groupby("subject").mean("trial")
    return ds[variable]


def _series(ax, ds, variable, core, index, label, **select):
    values = _by_subject(ds, variable)
    if values is None:
        mean, sem, text = ds[variable].sel(select), None, "pooled"
    else:
        mean, sem, n = mean_sem(values.sel(select).transpose("subject", core), "subject")
        text = f"n = {n}"
    draw_profile(ax, ds[core].values, mean.values, None if sem is None else sem.values, index=index,
                 split_at_zero=core == "lag" and variable != "control_prob" and ds.attrs.get("stat_kind") == "rep_crp",
                 label=f"{label} ({text})")


def rep_crp(stat, *, ax=None):
    """Lag-CRP from each presentation of the previous recall's item (``cmr.repetition.rep_crp``)."""
    data = _data(stat, "rep_crp")
    fig, ax = target_axes(ax)
    with house_style():
        index = 0
        for label, ds in data.items():
            for presentation in ds["presentation"].values:
                name = f"{label + ': ' if label else ''}from presentation {int(presentation)}"
                _series(ax, ds, "prob", "lag", index, name, presentation=presentation)
                index += 1
        ax.set_xlabel("Lag from the presentation")
        ax.set_ylabel("Conditional response probability")
        legend_above(ax, title="mean \u00b1 SEM across subjects")
    return fig


def neighbor_crp(stat, *, ax=None):
    """Repetition-neighbour CRP and its shuffled control (``cmr.repetition.neighbor_crp``)."""
    data = _data(stat, "rep_neighbor_crp")
    fig, ax = target_axes(ax)
    with house_style():
        index = 0
        for label, ds in data.items():
            _series(ax, ds, "prob", "lag", index, label or "data")
            index += 1
            if "control_prob" in ds:
                _series(ax, ds, "control_prob", "lag", index, f"{label + ': ' if label else ''}shuffled control")
                index += 1
        ax.set_xlabel("Lag from the other presentation")
        ax.set_ylabel("Conditional response probability")
        legend_above(ax, title="mean \u00b1 SEM across subjects")
    return fig


def spacing_recall(stat, *, ax=None):
    """Recall probability by the spacing of the two presentations (``cmr.repetition.spacing_recall``)."""
    data = _data(stat, "spacing_recall")
    fig, ax = target_axes(ax)
    with house_style():
        for index, (label, ds) in enumerate(data.items()):
            values = _by_subject(ds, "prob")
            x = np.arange(ds.sizes["spacing_bin"])
            if values is None:
                mean, sem, text = ds["prob"], None, "pooled"
            else:
                mean, sem, n = mean_sem(values.transpose("subject", "spacing_bin"), "subject")
                text = f"n = {n}"
            draw_profile(ax, x, mean.values, None if sem is None else sem.values, index=index,
                         label=f"{label} ({text})" if label else text)
        ax.set_xticks(x, [str(b) for b in ds["spacing_bin"].values])
        ax.set_xlabel("Items between the presentations")
        ax.set_ylabel("Recall probability")
        legend_above(ax, title="mean \u00b1 SEM across subjects")
    return fig


def first_presentation_bias(stat, *, ax=None):
    """Each subject's first-minus-second presentation rate at the lag, and the control's
    (``cmr.repetition.first_presentation_bias``)."""
    data = _data(stat, "first_presentation_bias")
    fig, ax = target_axes(ax)
    rng = np.random.default_rng(0)  # fixed jitter, so a figure is reproducible
    with house_style():
        ticks = []
        for index, (label, ds) in enumerate(data.items()):
            for k, variable in enumerate(v for v in ("bias", "control_bias") if v in ds):
                x = 2 * index + k
                values = ds[variable].values
                finite = values[np.isfinite(values)]
                ax.plot(x + rng.uniform(-0.15, 0.15, finite.size), finite, ".", alpha=0.5,
                        color=PALETTE[(index + k) % len(PALETTE)])
                mean, sem, _ = mean_sem(ds[variable], "subject")
                ax.errorbar([x], [float(mean)], yerr=[float(sem)], fmt="o", color="black", capsize=3)
                ticks.append((x, f"{label + ': ' if label else ''}{'data' if k == 0 else 'control'}"))
            ax.set_title(f"t = {ds.attrs.get('t_stat', np.nan):.2f}, p = {ds.attrs.get('p_value', np.nan):.3f}",
                         fontsize=7)
        ax.axhline(0, color=REFERENCE_GREY, linewidth=0.8, linestyle="--", zorder=0)
        ax.set_xticks([t for t, _ in ticks], [name for _, name in ticks])
        ax.set_ylabel(f"First minus second presentation, lag {ds.attrs.get('lag', 1):+d}")
    return fig
