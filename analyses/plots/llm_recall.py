"""The language model's own free recall next to human recall (lag-CRP, SPC, PFR), and its change under ablation."""
from __future__ import annotations

import numpy as np

from cmr.errors import ParameterError, SchemaError
from cmr.checks import integer
import cmr

from ._common import checked
from .recall import lag_crp, pfr, spc
from .style import PALETTE, REFERENCE_GREY, house_style, new_figure

__all__ = ["recall_vs_humans", "lists_as_subjects", "recall_ablation_effects", "MEASURE_LABELS"]


def lists_as_subjects(events):
    """``events`` with every list relabelled as its own subject (for a mean +- SEM across lists)."""
    if events.attrs.get("icl_cmr_kind") != "events":
        raise SchemaError(f"expected an events dataset; got kind {events.attrs.get('icl_cmr_kind')!r}")
    labels = np.array([f"{s}#{l}" for s, l in zip(events["subject"].values, events["list"].values)], dtype=object)
    return events.assign_coords(subject=("trial", labels))


def recall_vs_humans(model_events, human_events, *, labels=("model", "humans"), lags=5):
    """Three panels (lag-CRP, SPC, PFR) of a model's recall over a human data set's.

    Parameters
    ----------
    model_events, human_events : xarray.Dataset
        Events datasets (the model's from :func:`icl_cmr.analyses.memory.llm_recall.model_recall`).
        The model's curves are the mean +- SEM across its lists (each list a unit), the
        humans' across subjects.
    labels : (str, str)
        Legend labels.
    lags : int
        Lag window of the lag-CRP panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    model = lists_as_subjects(model_events)
    human = cmr.events.as_events(human_events)
    fig, axes = new_figure(ncols=3, nrows=1, width=3.0, height=2.4)
    pairs = {labels[0]: model, labels[1]: human}
    lag_crp({k: cmr.lag_crp(v, lags=lags) for k, v in pairs.items()}, lags=lags, ax=axes[0])
    spc({k: cmr.spc(v) for k, v in pairs.items()}, ax=axes[1])
    pfr({k: cmr.pfr(v) for k, v in pairs.items()}, ax=axes[2])
    return fig


#: what each measure of :data:`icl_cmr.analyses.memory.llm_recall.MEASURES` is, as a panel title
MEASURE_LABELS = {
    "crp_forward": "CRP at lag +1",
    "crp_backward": "CRP at lag -1",
    "forward_asymmetry": "CRP(+1) - CRP(-1)",
    "forward_share": "Share of forward transitions",
    "n_correct": "Correct recalls",
    "recall_early": "Recall of the first third",
    "recall_late": "Recall of the last third",
}


def recall_ablation_effects(result, *, level: float = 0.95, ncols: int = 4):
    """Change of each recall measure per ablated head set: the mean over lists with its confidence interval.

    One panel per measure; per head set (``none``, the intact model, left out) the mean of
    ``effect`` (ablated - intact, paired by list) over the lists where the measure is defined,
    with the ``level`` t-interval of that mean (none below two lists). The random and
    layer-matched baseline sets are grey; zero (no change) is a dotted line.

    Parameters
    ----------
    result : xarray.Dataset
        Kind ``llm_recall_ablation`` from :func:`icl_cmr.analyses.causal.recall.recall_ablation`.
    level : float
        Confidence level of the intervals, in (0, 1).
    ncols : int
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from scipy import stats

    result = checked(result, "llm_recall_ablation", "icl_cmr.analyses.causal.recall.recall_ablation")
    if isinstance(level, bool) or not isinstance(level, (int, float, np.number)) or not 0.0 < float(level) < 1.0:
        raise ParameterError(f"level must be a confidence level in (0, 1); got {level!r}")
    sets = [str(s) for s in result["head_set"].values if str(s) != "none"]
    if not sets:
        raise SchemaError("the llm_recall_ablation dataset has no ablated head set (only 'none')")
    measures = [str(m) for m in result["measure"].values]
    ncols = min(integer(ncols, "ncols"), len(measures))
    nrows = -(-len(measures) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=max(1.6, 0.8 + 0.22 * len(sets)), height=2.0, squeeze=False)
    x = np.arange(len(sets))
    colours = [REFERENCE_GREY if s.startswith(("random", "layer_matched")) else PALETTE[k % len(PALETTE)]
               for k, s in enumerate(sets)]
    with house_style():
        for ax in axes.flat[len(measures):]:
            ax.set_visible(False)
        for ax, measure in zip(axes.flat, measures):
            ax.axhline(0.0, color="k", linewidth=0.6, linestyle=":", zorder=0)
            drawn = 0
            for k, name in enumerate(sets):
                effect = np.asarray(result["effect"].sel(head_set=name, measure=measure).values, dtype=float)
                effect = effect[np.isfinite(effect)]
                if effect.size == 0:
                    continue
                drawn += 1
                mean = float(effect.mean())
                half = (float(stats.t.ppf(0.5 + float(level) / 2, effect.size - 1) * effect.std(ddof=1)
                              / np.sqrt(effect.size)) if effect.size > 1 else None)
                ax.errorbar([x[k]], [mean], yerr=None if half is None else [half], fmt="o", color=colours[k],
                            elinewidth=0.9, markersize=3.5)
            if not drawn:
                ax.set_ylim(-1.0, 1.0)
                ax.text(0.5, 0.5, "undefined on every list", transform=ax.transAxes, ha="center", va="center",
                        fontsize=7, color=REFERENCE_GREY)
            ax.set_title(MEASURE_LABELS.get(measure, measure), fontsize=7)
            ax.set_xticks(x, sets, rotation=60, ha="right", fontsize=7)
            ax.set_xlim(-0.6, len(sets) - 0.4)
        fig.supylabel(f"Change, ablated - intact (mean, {100 * float(level):g}% CI over lists)", fontsize=8)
    return fig
