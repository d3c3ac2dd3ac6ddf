"""Figure of a ``repetition_heads`` dataset (:mod:`icl_cmr.adapters.repetition_heads`, docs/repetition.md).

:func:`first_presentation_heads`: left, the repetition lag-CRP from the first and the second
presentation of the heads with the largest +1 transition; right, every head's first-presentation
bias by layer, heads with a Holm-significant preference filled.
"""
from __future__ import annotations

import numpy as np

from cmr.checks import integer

from ._common import checked, legend_above
from .style import PALETTE, REFERENCE_GREY, house_style, new_figure
from ..heads.first_presentation import head_preferences

__all__ = ["first_presentation_heads"]


def first_presentation_heads(heads, *, n_heads: int = 3, alpha: float = 0.05):
    """Repetition CRP of the strongest +1 heads and every head's first-presentation bias by layer.

    Parameters
    ----------
    heads : xarray.Dataset
        Kind ``repetition_heads`` (one model and checkpoint are drawn: the first).
    n_heads : int
        Heads drawn on the left: the largest mean rep-CRP at +1 over the first two presentations.
    alpha : float
        Holm level of the filled markers (the dataset's ``preference`` when present is not re-read).

    Returns
    -------
    matplotlib.figure.Figure
    """
    heads = checked(heads, "repetition_heads", "icl_cmr.adapters.lm.repetition.extract_repetition_heads")
    n_heads = integer(n_heads, "n_heads", minimum=1)
    ds = head_preferences(heads, alpha=alpha).isel(model=0, checkpoint=0)
    crp = ds["repcrp"]
    strength = crp.sel(presentation=[1, 2], lag=1).mean("presentation").values
    order = np.argsort(-np.nan_to_num(strength, nan=-np.inf), axis=None)[:min(n_heads, strength.size)]
    fig, (left, right) = new_figure(ncols=2, width=3.0, height=2.4)
    lags = crp["lag"].values
    with house_style():
        for n, flat in enumerate(order):
            layer, head = np.unravel_index(flat, strength.shape)
            color = PALETTE[n % len(PALETTE)]
            for presentation, style in ((1, "-"), (2, "--")):
                values = crp.isel(layer=layer, head=head).sel(presentation=presentation).values
                label = f"L{int(ds['layer'][layer])}.H{int(ds['head'][head])}" if presentation == 1 else None
                left.plot(lags[lags != 0], values[lags != 0], style, marker="o", markersize=2.5, color=color,
                          label=label)
        left.set_xlabel("Lag from the presentation")
        left.set_ylabel("Repetition CRP (- first, -- second)")
        legend_above(left)
        bias = ds["first_bias"].values
        preference = ds["preference"].values
        layer_of = np.broadcast_to(ds["layer"].values[:, None], bias.shape)
        for kind, color, filled in (("neither", REFERENCE_GREY, False), ("later", PALETTE[1], True),
                                    ("first", PALETTE[0], True)):
            pick = preference == kind
            right.scatter(layer_of[pick], bias[pick], s=9, color=color if filled else "none",
                          edgecolors=color, linewidths=0.6, label=f"{kind} ({int(pick.sum())})")
        right.axhline(0, color=REFERENCE_GREY, linewidth=0.8, linestyle="--", zorder=0)
        right.set_xlabel("Layer")
        right.set_ylabel("First-presentation bias (CRP +1)")
        legend_above(right)
    return fig
