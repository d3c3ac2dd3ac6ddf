"""Which composition heads use: weight-based composition scores and the causal Q/K test."""
from __future__ import annotations

import json

import numpy as np

from cmr.errors import ParameterError

from ._common import checked, heads_2d, labelled, legend_above
from .style import MARKERS, PALETTE, house_style, new_figure

__all__ = ["composition_matrix", "causal_composition", "composition_against_cmr"]

#: colour of each composition class in :func:`composition_against_cmr`
CLASS_COLOURS = {"K": PALETTE[0], "Q": PALETTE[1], "mixed": PALETTE[3], "neither": PALETTE[6], "weak": "0.75"}


def composition_matrix(scores):
    """Composition scores above the random baseline, every earlier head against every later head.

    Parameters
    ----------
    scores : xarray.Dataset
        Kind ``composition`` (:func:`icl_cmr.adapters.lm.composition.composition_scores`).

    Returns
    -------
    matplotlib.figure.Figure
        One panel per composition (Q, K, V): ``excess`` (score minus the random mean) with the
        later head (layer-major) down and the earlier head across; grey where undefined.
    """
    scores = checked(scores, "composition", "icl_cmr.adapters.lm.composition.composition_scores")
    kinds = [str(k) for k in scores["composition"].values]
    n_layers, n_heads = scores.sizes["layer"], scores.sizes["head"]
    excess = scores["excess"].transpose("composition", "layer", "head", "source_layer", "source_head").values
    top = float(np.nanmax(excess)) if np.isfinite(excess).any() else 1.0
    from matplotlib import colormaps

    magma = colormaps["magma"].with_extremes(bad="0.9")  # undefined scores in grey
    fig, axes = new_figure(ncols=len(kinds), width=2.6, height=2.6, squeeze=False)
    with house_style():
        for ax, kind, values in zip(axes[0], kinds, excess):
            image = ax.imshow(values.reshape(n_layers * n_heads, -1), cmap=magma, vmin=0.0, vmax=top,
                              interpolation="nearest")
            ticks = np.arange(0, n_layers, max(1, n_layers // 5)) * n_heads
            ax.set_xticks(ticks, [str(t // n_heads) for t in ticks])
            ax.set_yticks(ticks, [str(t // n_heads) for t in ticks])
            ax.set_title(f"{kind}-composition")
            ax.set_xlabel("Earlier head (layer)")
            ax.set_ylabel("Later head (layer)")
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="Score above random")
    return fig


def causal_composition(causal):
    """Relative drop of each tested head's induction score, query path against key path.

    Parameters
    ----------
    causal : xarray.Dataset
        Kind ``path_ablation`` (:func:`icl_cmr.adapters.lm.causal_composition.path_ablation`).

    Returns
    -------
    matplotlib.figure.Figure
        Paired bars per head (removing what every earlier head moved from other positions from
        its query input, from its key input), labelled with the head's class; outlined bars:
        the same with the earlier heads' whole output; dashed line at the significance threshold.
    """
    from matplotlib.patches import Patch

    causal = checked(causal, "path_ablation", "icl_cmr.adapters.lm.causal_composition.path_ablation")
    labels = [f"L{int(layer)}.H{int(head)}\n{cls}" for layer, head, cls in
              zip(causal["layer"].values, causal["head"].values, causal["composition_class"].values)]
    x = np.arange(len(labels))
    fig, ax = new_figure(width=max(2.6, 0.7 * len(labels) + 1.0), height=2.4)
    with house_style():
        for i, path in enumerate(causal["path"].values):
            ax.bar(x + (i - 0.5) * 0.38, causal["drop_moved"].sel(path=path).values, width=0.36, color=PALETTE[i],
                   label=f"{path} input")
            ax.bar(x + (i - 0.5) * 0.38, causal["drop_all"].sel(path=path).values, width=0.36, fill=False,
                   edgecolor=PALETTE[i], linewidth=0.8)
        ax.axhline(0.0, color="k", lw=0.6)
        threshold = json.loads(causal.attrs["provenance"]).get("significant_drop")
        if threshold is not None:
            ax.axhline(threshold, color="0.5", lw=0.8, ls="--")
        ax.set_xticks(x, labels)
        ax.set_ylabel("Drop of induction score")
        handles, _ = ax.get_legend_handles_labels()
        handles.append(Patch(fill=False, edgecolor="0.3", linewidth=0.8, label="whole output"))
        legend_above(ax, handles=handles, ncols=len(handles))
    return fig


def composition_against_cmr(causal, fits):
    """Composition class of each tested head against its CMR distance, for one or several models.

    Parameters
    ----------
    causal : xarray.Dataset or mapping label -> Dataset
        Kind ``path_ablation`` (:func:`icl_cmr.adapters.lm.causal_composition.path_ablation`).
    fits : xarray.Dataset or mapping label -> Dataset
        Kind ``profile_fit`` of the same model(s) (same labels), one checkpoint each (select one
        first, e.g. ``fits.isel(checkpoint=-1)``): the ``distance`` of every head.

    Returns
    -------
    matplotlib.figure.Figure
        One point per tested head: x = CMR distance, y = induction score; colour = class (K, Q,
        mixed, neither, weak), marker = model; labelled with the head. The distance axis is
        log-scaled when every distance is positive.
    """
    causal = labelled(causal, "path_ablation", "icl_cmr.adapters.lm.causal_composition.path_ablation")
    fits = labelled(fits, "profile_fit", "cmr.fit_profiles")
    if set(causal) != set(fits):
        raise ParameterError(f"causal and fits must have the same labels; got {sorted(causal)} and {sorted(fits)}")
    fig, ax = new_figure(width=3.6, height=2.8)
    seen, xs, placed = set(), [], []
    with house_style():
        for index, (label, ds) in enumerate(causal.items()):
            distance = heads_2d(fits[label]["distance"])
            for t in ds["target"].values:
                row = ds.sel(target=t)
                layer, head, cls = int(row["layer"]), int(row["head"]), str(row["composition_class"].values)
                x = float(distance.sel(layer=layer, head=head))
                y = float(row["base_induction"])
                xs.append(x)
                ax.scatter([x], [y], s=28, marker=MARKERS[index % len(MARKERS)], color=CLASS_COLOURS.get(cls, "k"),
                           edgecolor="k", linewidth=0.4, zorder=3)
                near = sum(abs(y - y0) < 0.03 and 0.8 < x / x0 < 1.25 for x0, y0 in placed if x0 > 0 and x > 0)
                placed.append((x, y))
                ax.annotate(f"{label + ' ' if label else ''}L{layer}.H{head}", (x, y), xytext=(3, 2 - 7 * near),
                            textcoords="offset points", fontsize=5.5)  # labels of near points stacked, not overlaid
                seen.add(cls)
        for cls, colour in CLASS_COLOURS.items():
            if cls in seen:
                ax.scatter([], [], s=28, color=colour, edgecolor="k", linewidth=0.4, label=f"{cls}-composed"
                           if cls in ("K", "Q") else cls)
        if len(causal) > 1:
            for index, label in enumerate(causal):
                ax.scatter([], [], s=28, marker=MARKERS[index % len(MARKERS)], color="w", edgecolor="k",
                           linewidth=0.6, label=label)
        if all(x > 0 for x in xs):  # distances of different models span decades
            ax.set_xscale("log")
        ax.set_xlabel("CMR distance (smaller: more CMR-like)")
        ax.set_ylabel("Induction score")
        # right of the axes: inside, the class legend covered tested heads at high induction scores
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=6)
    return fig
