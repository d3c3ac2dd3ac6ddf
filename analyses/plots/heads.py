"""Attention heads as free-recall data: lag profiles with their fits, attention patterns, shares.

Head datasets are those of :func:`icl_cmr.adapters.lm.extraction.extract_heads` (kind
``lag_profile``, dims ``(model, checkpoint, layer, head, lag)``) and their fits by
:func:`cmr.fit_profiles` (kind ``profile_fit``), for one model at one checkpoint (select one with
``.sel(model=..., checkpoint=...)`` first). Heads are named ``L<layer>.H<head>``, 0-based.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from cmr.checks import integer
from cmr.constants import CMR_LIKE_DISTANCE
from cmr.deprecation import keyword_only
from cmr.errors import ParameterError, ProfileError, SchemaError
from cmr import lag_window

from ._common import checked, choose_heads, draw_profile, head_label, heads_2d, labelled, legend_above, target_axes
from .style import PALETTE, REFERENCE_GREY, house_style, new_figure
from ...adapters.head_profiles import select_profile
from .recall import lag_crp

__all__ = [
    "head_profiles",
    "attention_pattern",
    "distance_vs_induction",
    "share_cmr_like_by_depth",
    "soft_crp_vs_humans",
]

_HEADS_FROM = "icl_cmr.adapters.lm.extraction.extract_heads"
_FITS_FROM = "cmr.fit_profiles"
#: y-axis label and SEM variable of the heads dataset, by the profile kind that was fitted
_PROFILE_AXIS = {
    "attention_score": ("Pre-softmax attention score (logit)", "sem"),
    "attention_prob": ("Attention probability", "prob_sem"),
    "soft_lag_crp": ("Soft lag-CRP", None),
}
_LAG_LABEL = "Lag (serial positions)"


def _objectives(fits) -> dict:
    """``{objective: fits}`` from one profile_fit dataset or a mapping of them."""
    if isinstance(fits, Mapping) and not isinstance(fits, xr.Dataset):
        return labelled(fits, "profile_fit", _FITS_FROM)
    ds = checked(fits, "profile_fit", _FITS_FROM)
    return {str(ds.attrs["objective"]): ds}


@keyword_only
def head_profiles(heads, *, fits=None, units=None, ncols: int | None = None):
    """Lag profiles of chosen heads (mean +- SEM) with their CMR fit and fair Gaussian fit.

    Parameters
    ----------
    heads : xarray.Dataset
        Head ``lag_profile`` dataset (from ``extract_heads``): SEMs and induction scores.
    fits : xarray.Dataset, optional
        ``profile_fit`` of these heads (``cmr.fit_profiles``): the fitted window, ``fitted``,
        ``gaussian_fitted`` (when the baseline was fitted), distances. Without it, the heads'
        own profiles at every lag, without fits.
    units : None, int, sequence of (layer, head) or str
        Heads drawn: None, the 6 with the largest induction score; n, the n largest; or the
        given heads (``[(18, 6), (17, 3)]`` or ``"L18.H6,L17.H3"``).
    ncols : int, optional
        Panels per row (default 3, or 2 for four heads).

    Returns
    -------
    matplotlib.figure.Figure
        One panel per head, titled with its induction score and both distances.
    """
    heads = checked(heads, "lag_profile", _HEADS_FROM)
    if fits is None:
        return _profiles_alone(heads, units, ncols)
    fits = checked(fits, "profile_fit", _FITS_FROM)
    chosen = choose_heads(heads, "induction_score", units, 6)
    if ncols is None:
        ncols = 2 if len(chosen) == 4 else 3
    ncols = integer(ncols, "ncols")
    ylabel, sem_name = _PROFILE_AXIS.get(fits.attrs.get("profile_kind"), ("Profile", None))
    if heads.attrs.get("profile_kind") == fits.attrs.get("profile_kind"):
        sem_name = "sem"  # a dataset from select_profile keeps its own SEM as 'sem'
    induction = heads_2d(heads["induction_score"])
    profile, fitted, distance = (heads_2d(fits[name]) for name in ("profile", "fitted", "distance"))
    gaussian = heads_2d(fits["gaussian_fitted"]) if "gaussian_fitted" in fits else None
    lags = fits["lag"].values
    sem = heads_2d(heads[sem_name]).sel(lag=lags) if sem_name and sem_name in heads else None
    ncols = min(int(ncols), len(chosen))
    nrows = -(-len(chosen) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=2.3, height=2.0, squeeze=False)
    with house_style():
        for ax, (layer, head) in zip(axes.flat, chosen):
            unit = {"layer": layer, "head": head}
            ax.errorbar(lags, profile.sel(unit).values, yerr=None if sem is None else sem.sel(unit).values,
                        fmt="o", color="k", ms=3, elinewidth=0.8, label="head (mean \u00b1 SEM)", zorder=3)
            ax.plot(lags, fitted.sel(unit).values, color=PALETTE[0], label="CMR fit")
            title = f"{head_label(layer, head)}, induction {float(induction.sel(unit)):.2f}\nd: CMR {float(distance.sel(unit)):.3f}"
            if gaussian is not None:
                ax.plot(lags, gaussian.sel(unit).values, color=PALETTE[1], linestyle="--", label="Gaussian fit")
                title += f", Gaussian {float(heads_2d(fits['gaussian_distance']).sel(unit)):.3f}"
            ax.set_title(title, fontsize=7)
            ax.xaxis.set_major_locator(_integer_ticks(min(len(lags), 7)))
        for k, ax in enumerate(axes.flat[: len(chosen)]):
            if k + ncols >= len(chosen):  # the lowest panel of its column
                ax.set_xlabel(_LAG_LABEL)
        fig.supylabel(ylabel, fontsize=8)
        for ax in list(axes.flat)[len(chosen):]:
            ax.set_visible(False)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
    return fig


def _profiles_alone(heads, units, ncols):
    """:func:`head_profiles` of a head scan without fits: each head's own profile (mean +- SEM) at every lag."""
    chosen = choose_heads(heads, "induction_score", units, 6)
    ncols = min(integer((2 if len(chosen) == 4 else 3) if ncols is None else ncols, "ncols"), len(chosen))
    nrows = -(-len(chosen) // ncols)
    ylabel, _ = _PROFILE_AXIS.get(heads.attrs.get("profile_kind"), ("Profile", None))
    induction, profile = heads_2d(heads["induction_score"]), heads_2d(heads["profile"])
    sem = heads_2d(heads["sem"]) if "sem" in heads else None
    lags = heads["lag"].values
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=2.3, height=2.0, squeeze=False)
    with house_style():
        for k, (ax, (layer, head)) in enumerate(zip(axes.flat, chosen)):
            unit = {"layer": layer, "head": head}
            ax.errorbar(lags, profile.sel(unit).values, yerr=None if sem is None else sem.sel(unit).values,
                        fmt="o-", color="k", ms=3, lw=0.8, elinewidth=0.8, label="head (mean \u00b1 SEM)")
            ax.set_title(f"{head_label(layer, head)}, induction {float(induction.sel(unit)):.2f}", fontsize=7)
            ax.xaxis.set_major_locator(_integer_ticks(min(len(lags), 7)))
            if k + ncols >= len(chosen):  # the lowest panel of its column
                ax.set_xlabel(_LAG_LABEL)
        fig.supylabel(ylabel, fontsize=8)
        for ax in list(axes.flat)[len(chosen):]:
            ax.set_visible(False)
    return fig


def _integer_ticks(n_lags: int):
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=n_lags, integer=True)


def attention_pattern(pattern, *, which: str = "prob", ax=None):
    """One head's attention over the repeated prompt: query x key heatmap (Ji-An et al. 2024, Fig. 3b).

    An induction head lights up the diagonal ``key = query - N + 1`` in the lower-left block:
    from each word of the second copy to the word after its first occurrence. Lines mark the
    ends of BOS, copy 1 and copy 2; keys after the query (masked) are blank.

    Parameters
    ----------
    pattern : xarray.Dataset
        Kind ``attention_pattern`` (:func:`icl_cmr.adapters.lm.extraction.attention_pattern`).
    which : {"prob", "score"}
        Post-softmax probabilities (a square-root colour scale, so weak attention stays
        visible) or pre-softmax scores (linear scale from the 1st percentile to the maximum).
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.colors import Normalize, PowerNorm

    pattern = checked(pattern, "attention_pattern", "icl_cmr.adapters.lm.extraction.attention_pattern")
    if which not in ("prob", "score"):
        raise ParameterError(f"which must be 'prob' or 'score'; got {which!r}")
    n = int(pattern.attrs["n_words"])
    seq = 2 * n + 1
    values = pattern[which].transpose("query", "key").values.astype(float)
    values = np.where(np.arange(seq)[None, :] > np.arange(seq)[:, None], np.nan, values)
    if which == "prob":
        norm, label = PowerNorm(gamma=0.5, vmin=0.0, vmax=1.0), "Attention probability"
    else:
        finite = values[np.isfinite(values)]
        norm, label = Normalize(vmin=float(np.percentile(finite, 1)), vmax=float(finite.max())), "Pre-softmax score (logit)"
    fig, ax = target_axes(ax, width=3.3, height=2.9)
    with house_style():
        image = ax.imshow(values, norm=norm, interpolation="nearest", extent=(-0.5, seq - 0.5, seq - 0.5, -0.5))
        for edge in (0.5, n + 0.5):  # block edges, only where attention is drawn (the label sits in the blank)
            ax.vlines(edge, edge, seq - 0.5, colors="white", lw=0.5, alpha=0.8)
            ax.hlines(edge, -0.5, edge, colors="white", lw=0.5, alpha=0.8)
        k = n // 2  # a point on the induction diagonal, mid-list
        # the label sits in the top-right corner, which the causal mask leaves blank at every N: it covers
        # no attention value and no other text (a label placed in data units ran into the data for small N)
        ax.annotate("induction target\n(lag +1)", xy=(k + 2, n + 1 + k), xytext=(0.97, 0.97),
                    textcoords="axes fraction", fontsize=7, ha="right", va="top",
                    arrowprops={"arrowstyle": "->", "lw": 0.7, "color": "k", "shrinkA": 2})
        ax.set_xlabel("Key position (token)")
        ax.set_ylabel("Query position (token)")
        centres = [(1 + n) / 2, n + (1 + n) / 2]
        top = ax.secondary_xaxis("top")
        top.set_xticks(centres, ["copy 1", "copy 2"])
        top.tick_params(length=0)
        right = ax.secondary_yaxis("right")
        right.set_yticks(centres, ["copy 1", "copy 2"], rotation=90, va="center")
        right.tick_params(length=0)
        ax.set_title(f"{pattern.attrs.get('model', '')} {head_label(pattern.attrs['layer'], pattern.attrs['head'])}, "
                     f"N = {n} words".strip(), fontsize=8)
        fig.colorbar(image, ax=ax, label=label, fraction=0.05, pad=0.08)
    return fig


def distance_vs_induction(heads, fits_by_objective, *, threshold: float = CMR_LIKE_DISTANCE,
                          log_induction: bool = True):
    """CMR distance of every head against its induction score, one panel per fit objective.

    Parameters
    ----------
    heads : xarray.Dataset
        Head ``lag_profile`` dataset with ``induction_score``.
    fits_by_objective : xarray.Dataset or mapping of str to xarray.Dataset
        ``profile_fit`` dataset(s) of these heads, e.g. ``{"paper": ..., "lsq": ...}``.
    threshold : float
        CMR distance drawn as a dotted line (:data:`cmr.CMR_LIKE_DISTANCE`).
    log_induction : bool
        Log-scaled induction score (default): most heads of a model score near 0, and a log
        axis shows how many of them still have a small CMR distance (the distance is blind to
        the profile's amplitude; docs/fitting.md).

    Returns
    -------
    matplotlib.figure.Figure
        Log-scaled distance; heads without a finite, positive value are left out.
    """
    heads = checked(heads, "lag_profile", _HEADS_FROM)
    if "induction_score" not in heads:
        raise SchemaError(f"head dataset needs 'induction_score' (from {_HEADS_FROM})")
    fits = _objectives(fits_by_objective)
    induction = heads_2d(heads["induction_score"])
    fig, axes = new_figure(ncols=len(fits), width=2.6, height=2.4, squeeze=False, sharey=True)
    with house_style():
        for ax, (objective, ds) in zip(axes[0], fits.items()):
            x, y = xr.align(induction, heads_2d(ds["distance"]), join="inner")
            x, y = x.values.ravel(), y.transpose(*x.dims).values.ravel()
            keep = np.isfinite(x) & np.isfinite(y) & (y > 0) & ((x > 0) | (not log_induction))
            ax.scatter(x[keep], y[keep], s=8, color=PALETTE[0], alpha=0.7, linewidths=0, label="head")
            ax.axhline(threshold, color=REFERENCE_GREY, lw=0.8, ls=":", label=f"d = {threshold:g}")
            ax.set_yscale("log")
            if log_induction:
                ax.set_xscale("log")
            else:
                ax.set_xlim(-0.02, 1.02)
            ax.set_xlabel("Induction score (attention on lag +1)")
            ax.set_title(f"objective '{objective}'")
        axes[0][0].set_ylabel("CMR distance (normalised MSE)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return fig


def _depth_bins(distance: xr.DataArray, n_bins: int) -> np.ndarray:
    """Relative depth bin of every head of a (layer, head) array."""
    layers = distance["layer"].values
    depth = (layers + 0.5) / (int(layers.max()) + 1)
    bins = np.minimum((depth * n_bins).astype(int), n_bins - 1)
    return np.broadcast_to(bins[:, None], distance.shape)


@keyword_only
def share_cmr_like_by_depth(fits_by_objective, *, threshold: float = CMR_LIKE_DISTANCE, n_bins: int = 5, ax=None):
    """Share of heads with CMR distance below ``threshold``, by relative depth in the model.

    Relative depth of layer l of L is ``(l + 0.5) / L``, cut into ``n_bins`` equal bins; the
    share counts heads with a finite distance (unfitted heads are left out).

    Parameters
    ----------
    fits_by_objective : xarray.Dataset or mapping of str to xarray.Dataset
        ``profile_fit`` dataset(s) of the heads of one model; one bar per objective and bin.
    threshold : float
        Default :data:`cmr.CMR_LIKE_DISTANCE`; read it with a null (docs/fitting.md).
    n_bins : int
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    fits = _objectives(fits_by_objective)
    n_bins = integer(n_bins, "n_bins")
    fig, ax = target_axes(ax, width=3.2, height=2.4)
    width = 0.8 / len(fits)
    hatches = ("", "////", "....", "xxxx")
    with house_style():
        for k, (objective, ds) in enumerate(fits.items()):
            distance = heads_2d(ds["distance"]).transpose("layer", "head")
            values = distance.values
            bins = _depth_bins(distance, n_bins)
            finite = np.isfinite(values)
            share = [np.mean(values[(bins == b) & finite] < threshold) if ((bins == b) & finite).any() else np.nan
                     for b in range(n_bins)]
            ax.bar(np.arange(n_bins) + (k - (len(fits) - 1) / 2) * width, share, width, color=PALETTE[k % len(PALETTE)],
                   hatch=hatches[k % len(hatches)], edgecolor="white", linewidth=0.5, label=f"objective '{objective}'")
        ax.set_xticks(range(n_bins), [f"{b / n_bins:.1f}-{(b + 1) / n_bins:.1f}" for b in range(n_bins)])
        ax.set_xlabel("Relative depth (layer / number of layers)")
        ax.set_ylabel(f"Share of heads with d < {threshold:g}")
        ax.set_ylim(0, 1)
        legend_above(ax)
    return fig


@keyword_only
def soft_crp_vs_humans(humans, heads, *, units=None, lags=5):
    """Human lag-CRPs beside the soft lag-CRP of chosen heads, on one log-scaled CRP axis.

    Parameters
    ----------
    humans : xarray.Dataset or mapping of str to xarray.Dataset
        Lag-CRP dataset(s) from :func:`cmr.lag_crp` (see :func:`lag_crp`).
    heads : xarray.Dataset
        Head ``lag_profile`` dataset with ``soft_crp`` (from ``extract_heads``), or its
        ``select_profile(heads, "soft_lag_crp")``.
    units : None, int, sequence of (layer, head) or str
        Heads drawn: None, the 4 with the largest induction score; n, the n largest; or the
        given heads.
    lags : None, int or sequence of int
        Lag window (:func:`cmr.lag_window`).

    Returns
    -------
    matplotlib.figure.Figure
        Two panels sharing the y axis (log scale: heads are far sharper than humans).
    """
    heads = checked(heads, "lag_profile", _HEADS_FROM)
    if heads.attrs.get("profile_kind") != "soft_lag_crp":
        if "soft_crp" not in heads:
            raise SchemaError(f"head dataset needs a soft lag-CRP ('soft_crp', from {_HEADS_FROM})")
        heads = select_profile(heads, which="soft_lag_crp")
    chosen = choose_heads(heads, "induction_score", units, 4)
    window = lag_window(lags) if lags is not None else heads["lag"].values
    missing = sorted(set(window.tolist()) - set(heads["lag"].values.tolist()))
    if missing:
        raise ProfileError(f"the head profiles lack lags {missing} of the requested window")
    fig, axes = new_figure(ncols=2, width=2.6, height=2.4, sharey=True)
    lag_crp(humans, lags=window, ax=axes[0])
    profile = heads_2d(heads["profile"]).sel(lag=window)
    first = len(axes[0].get_legend_handles_labels()[0])  # heads continue the styles after the humans'
    with house_style():
        for k, (layer, head) in enumerate(chosen):
            draw_profile(axes[1], window, profile.sel(layer=layer, head=head).values, index=first + k,
                         split_at_zero=True, label=head_label(layer, head))
        axes[1].xaxis.set_major_locator(_integer_ticks(11))
        legend_above(axes[0], title="Human free recall (mean \u00b1 SEM)")
        legend_above(axes[1], ncols=2, title="Attention heads (soft lag-CRP)")
        axes[1].set_xlabel(_LAG_LABEL)
        drawn = np.concatenate([line.get_ydata() for ax in axes for line in ax.get_lines()]).astype(float)
        drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
        axes[0].set_yscale("log")
        if drawn.size:  # limits from the data: the linear panel's lower limit 0 has no log
            axes[0].set_ylim(drawn.min() / 1.5, min(1.0, drawn.max()) * 1.5)
    return fig
