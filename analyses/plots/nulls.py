"""Nulls of "CMR-like": each unit's CMR distance against the distance its nulls reach by chance."""
from __future__ import annotations

import numpy as np

from ._common import checked, legend_above
from .style import PALETTE, REFERENCE_GREY, house_style, new_figure

__all__ = ["profile_null"]


def _flat(null, name: str) -> np.ndarray:
    return np.asarray(null[name].values, dtype=float).ravel()


def profile_null(null):
    """Each unit's CMR distance against its null threshold; beyond-chance units filled, asymmetries marked.

    A unit below the diagonal is closer to CMR than the ``alpha`` quantile of its nulls; filled
    markers are the units beyond chance by their p-value (``beyond_chance``: ``p_value <= alpha``,
    which also needs enough null profiles); triangles mark a forward (up) or backward (down)
    asymmetry beyond chance. The legend gives the shares; units without a fit (NaN) are counted in the title.

    Parameters
    ----------
    null : xarray.Dataset
        ``profile_null`` dataset from :func:`cmr.cmr_like_null` (``icl-cmr null``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    null = checked(null, "profile_null", "cmr.cmr_like_null")
    threshold, distance = _flat(null, "threshold"), _flat(null, "distance")
    beyond = _flat(null, "beyond_chance") > 0
    forward = _flat(null, "forward_beyond_chance") > 0 if "forward_beyond_chance" in null else np.zeros_like(beyond)
    backward = _flat(null, "backward_beyond_chance") > 0 if "backward_beyond_chance" in null else np.zeros_like(beyond)
    drawn = np.isfinite(threshold) & np.isfinite(distance)
    n = int(drawn.sum())
    fig, ax = new_figure(width=2.6, height=2.4)
    with house_style():
        finite = np.concatenate([threshold[drawn], distance[drawn]])
        top = float(finite.max()) * 1.05 if finite.size and finite.max() > 0 else 1.0
        ax.plot([0.0, top], [0.0, top], color=REFERENCE_GREY, linewidth=0.8, linestyle="--",
                label="distance = threshold", zorder=0)
        for chosen, filled, label in ((drawn & beyond, True, "beyond chance"), (drawn & ~beyond, False, "not beyond")):
            ax.scatter(threshold[chosen], distance[chosen], s=12, marker="o", linewidths=0.8,
                       facecolors=PALETTE[0] if filled else "none", edgecolors=PALETTE[0], zorder=3,
                       label=f"{label}: {int(chosen.sum())}/{n} ({chosen.sum() / max(n, 1):.0%})")
        for chosen, marker, colour, label in ((drawn & forward, "^", PALETTE[1], "forward asymmetry"),
                                              (drawn & backward, "v", PALETTE[3], "backward asymmetry")):
            if chosen.any():
                ax.scatter(threshold[chosen], distance[chosen], s=30, marker=marker, facecolors="none",
                           edgecolors=colour, linewidths=0.8, zorder=4, label=f"{label}: {int(chosen.sum())}/{n}")
        ax.set_xlim(0.0, top)
        ax.set_ylim(0.0, top)
        ax.set_xlabel(f"Null threshold ({null.attrs.get('alpha', 0.05):g} quantile)")
        ax.set_ylabel("CMR distance")
        if n < threshold.size:
            ax.set_title(f"{threshold.size - n} of {threshold.size} units without a fit", fontsize=7, loc="right")
        legend_above(ax, ncols=1)
    return fig
