"""Fitted CMR parameters: heads against humans, recall fits across subjects and their parameter recovery."""
from __future__ import annotations

import numpy as np
import pandas as pd

from cmr.checks import integer, is_integer
from cmr.deprecation import keyword_only
from cmr.errors import ParameterError, SchemaError
from cmr.beta_scales import paper_beta

from ._common import checked, choose_heads, heads_2d, labelled, legend_above, target_axes
from .style import PALETTE, REFERENCE_GREY, house_style, new_figure
from ...adapters.published import published_human_fits

__all__ = ["parameters_heads_vs_humans", "parameter_recovery", "subject_parameters"]

_BETAS = ("beta_enc", "beta_rec")


def _betas(ds, label: str):
    names = [str(p) for p in ds["parameter"].values]
    missing = [p for p in _BETAS if p not in names]
    if missing:
        raise SchemaError(f"{label}: fits need parameters beta_enc and beta_rec (a grid of the study's CMR variant); "
                          f"got {', '.join(names)}")
    return ds["parameters"].sel(parameter="beta_enc"), ds["parameters"].sel(parameter="beta_rec")


@keyword_only
def parameters_heads_vs_humans(head_fits, human_fits, top_heads, *, published=None, ax=None):
    """Fitted (beta_enc, beta_rec) of chosen heads, of human subjects and of published human fits.

    Heads and subjects are fitted by the same call on the same grid (:func:`cmr.fit_profiles`),
    so their parameters share one scale. The published values are fits of textbook CMR to whole
    recall sequences; they are drawn on the paper's variant's scale, matched on context decay
    (:func:`cmr.paper_beta`, docs/fitting.md). The method still differs (likelihood of recall
    sequences against a lag profile), so read them as a reference.

    Parameters
    ----------
    head_fits : xarray.Dataset
        ``profile_fit`` of the heads of one model.
    human_fits : xarray.Dataset or mapping of str to xarray.Dataset
        ``profile_fit`` of human lag-CRPs, per subject; a mapping labels several data sets.
    top_heads : int, sequence of (layer, head) or str
        Heads drawn: n, the n with the smallest CMR distance; or the given heads.
    published : pandas.DataFrame, optional
        Columns ``beta_enc`` and ``beta_rec`` (and ``study``); default
        :func:`icl_cmr.adapters.published.published_human_fits`; an empty table draws none.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    head_fits = checked(head_fits, "profile_fit", "cmr.fit_profiles")
    humans = labelled(human_fits, "profile_fit", "cmr.fit_profiles", default_label="human")
    if published is None:
        published = published_human_fits()
    if not isinstance(published, pd.DataFrame) or not set(_BETAS) <= set(published.columns):
        raise SchemaError("published must be a DataFrame with columns beta_enc and beta_rec; got "
                          f"{type(published).__name__} with columns {list(getattr(published, 'columns', []))}")
    if top_heads is None:
        raise ParameterError("top_heads must be a number of heads, (layer, head) pairs or a string like 'L18.H6'")
    chosen = choose_heads(head_fits, "distance", top_heads, 0, largest=False)
    fig, ax = target_axes(ax, width=3.3, height=3.0)
    with house_style():
        for k, (label, ds) in enumerate(humans.items()):
            enc, rec = _betas(ds, label)
            ax.scatter(enc.values.ravel(), rec.values.ravel(), s=9, alpha=0.5, linewidths=0, marker="o",
                       color=PALETTE[(2 + k) % len(PALETTE)], label=f"{label} (n = {enc.size})".strip(), zorder=1)
        enc, rec = (heads_2d(b) for b in _betas(head_fits, "head fits"))
        ax.scatter([float(enc.sel(layer=l, head=h)) for l, h in chosen],
                   [float(rec.sel(layer=l, head=h)) for l, h in chosen],
                   s=22, marker="^", color=PALETTE[0], zorder=2,
                   label=f"{'top CMR-like ' if is_integer(top_heads) else ''}heads ({len(chosen)})")
        if len(published):
            ax.scatter(paper_beta(published["beta_enc"].to_numpy(dtype=float), phase="enc"),
                       paper_beta(published["beta_rec"].to_numpy(dtype=float), phase="rec"), s=45, marker="*",
                       color=PALETTE[1], edgecolors="k", linewidths=0.3,
                       label=f"published fits, decay-matched ({len(published)})", zorder=3)
        ax.set_xlabel(r"$\beta_{enc}$ (context drift at encoding)")
        ax.set_ylabel(r"$\beta_{rec}$ (context drift at retrieval)")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        legend_above(ax, ncols=2, columnspacing=1.0, handletextpad=0.3)
    return fig


def parameter_recovery(fits, *, ncols: int = 5):
    """True against recovered value of every free parameter of a recovery study, one panel each.

    Parameters
    ----------
    fits : xarray.Dataset
        ``recall_fit`` dataset from :func:`cmr.parameter_recovery` (with ``true_value`` and
        ``correlation``).
    ncols : int
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
        Identity line in grey; axes span the search bounds; titles give Pearson's r.
    """
    fits = checked(fits, "recall_fit", "cmr.parameter_recovery")
    if "true_value" not in fits or "correlation" not in fits:
        raise SchemaError("parameter_recovery needs the 'true_value' and 'correlation' of cmr.parameter_recovery")
    free = [str(p) for p, f in zip(fits["parameter"].values, fits["free"].values) if f]
    if not free:
        raise SchemaError("the recall_fit dataset has no free parameter")
    ncols = min(integer(ncols, "ncols"), len(free))
    nrows = -(-len(free) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=1.7, height=1.7, squeeze=False)
    with house_style():
        for ax in axes.flat[len(free):]:
            ax.set_visible(False)
        for ax, name in zip(axes.flat, free):
            low, high = float(fits["lower"].sel(parameter=name)), float(fits["upper"].sel(parameter=name))
            ax.plot([low, high], [low, high], color=REFERENCE_GREY, lw=0.8)
            ax.scatter(fits["true_value"].sel(parameter=name).values, fits["value"].sel(parameter=name).values,
                       s=8, color=PALETTE[0], linewidths=0)
            ax.set_title(f"{name}  r = {float(fits['correlation'].sel(parameter=name)):.2f}", fontsize=7)
            ax.set_xlim(low, high)
            ax.set_ylim(low, high)
        fig.supxlabel("True value", fontsize=8)
        fig.supylabel("Recovered value", fontsize=8)
    return fig


def subject_parameters(fits, *, ncols: int = 5):
    """Fitted value of every free parameter across subjects, one panel each (``cmr.fit_recall``).

    Each panel is a box of the subjects' estimates with every subject as a point over it; the
    y axis spans the search bounds, drawn as dashed lines. Estimates at a search bound
    (``at_bound``) are drawn as diamonds in the second colour, subjects with too few scored
    events for their free parameters (``few_events``) as open markers; the legend below the
    panels counts both. A pooled fit (no ``subject`` dim) is one point per panel.

    Parameters
    ----------
    fits : xarray.Dataset
        ``recall_fit`` dataset from :func:`cmr.fit_recall` (``icl-cmr fit-recall``).
    ncols : int
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D

    fits = checked(fits, "recall_fit", "cmr.fit_recall")
    free = [str(p) for p, f in zip(fits["parameter"].values, fits["free"].values) if f]
    if not free:
        raise SchemaError("the recall_fit dataset has no free parameter to draw (every 'free' is 0)")
    units = [d for d in fits["value"].dims if d != "parameter"]
    if len(units) > 1:
        raise SchemaError(f"subject_parameters draws fits by subject or pooled; 'value' has unit dims {units}")
    values = fits["value"].transpose(*units, "parameter")
    n_units = values.sizes[units[0]] if units else 1
    at_bound = (fits["at_bound"].transpose(*units, "parameter") if "at_bound" in fits
                else values.copy(data=np.zeros(values.shape, dtype=bool)))
    few = (np.atleast_1d(np.asarray(fits["few_events"].values, dtype=bool)) if "few_events" in fits
           else np.zeros(n_units, dtype=bool))
    ncols = min(integer(ncols, "ncols"), len(free))
    nrows = -(-len(free) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=1.45, height=1.8, squeeze=False)
    rng = np.random.default_rng(0)  # fixed jitter, so a figure is reproducible
    jitter = rng.uniform(-0.18, 0.18, n_units) if n_units > 1 else np.zeros(1)
    with house_style():
        for ax in axes.flat[len(free):]:
            ax.set_visible(False)
        for ax, name in zip(axes.flat, free):
            estimate = np.atleast_1d(np.asarray(values.sel(parameter=name).values, dtype=float))
            bound = np.atleast_1d(np.asarray(at_bound.sel(parameter=name).values, dtype=bool))
            finite = np.isfinite(estimate)
            if finite.sum() > 1:
                ax.boxplot(estimate[finite], positions=[0], widths=0.55, showfliers=False, patch_artist=False,
                           medianprops={"color": "black", "linewidth": 1.0},
                           boxprops={"color": REFERENCE_GREY}, whiskerprops={"color": REFERENCE_GREY},
                           capprops={"color": REFERENCE_GREY})
            for flagged, colour, marker in ((False, PALETTE[0], "o"), (True, PALETTE[1], "D")):
                for sparse in (False, True):
                    chosen = finite & (bound == flagged) & (few == sparse)
                    if chosen.any():
                        ax.scatter(jitter[chosen], estimate[chosen], s=12, marker=marker, linewidths=0.8,
                                   facecolors="none" if sparse else colour, edgecolors=colour, zorder=3)
            low, high = (float(fits[edge].sel(parameter=name)) if edge in fits else np.nan
                         for edge in ("lower", "upper"))
            if np.isfinite(low) and np.isfinite(high) and high > low:
                for edge in (low, high):
                    ax.axhline(edge, color=REFERENCE_GREY, linewidth=0.8, linestyle="--", zorder=0)
                pad = 0.04 * (high - low)
                ax.set_ylim(low - pad, high + pad)
            ax.set_xlim(-0.6, 0.6)
            ax.set_xticks([])
            ax.set_title(name, fontsize=7)
        n_bound, n_few = int(np.asarray(at_bound.sel(parameter=free).values).sum()), int(few.sum())
        handles = [Line2D([], [], linestyle="none", marker="o", color=PALETTE[0], markersize=3.5,
                          label="subject" if units else "pooled fit"),
                   Line2D([], [], linestyle="none", marker="D", color=PALETTE[1], markersize=3.5,
                          label=f"at a search bound ({n_bound})"),
                   Line2D([], [], linestyle="none", marker="o", markerfacecolor="none", color=PALETTE[0],
                          markersize=3.5, label=f"few events ({n_few})"),
                   Line2D([], [], linestyle="--", color=REFERENCE_GREY, linewidth=0.8, label="search bounds")]
        fig.legend(handles=handles, loc="outside lower center", ncols=4 if ncols > 2 else 2)
        fig.supylabel("Fitted value", fontsize=8)
    return fig
