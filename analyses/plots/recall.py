"""Free-recall curves: lag-CRP, serial position curve and probability of first recall.

Each function takes the dataset of the matching :mod:`cmr` analysis (``cmr.lag_crp``,
``cmr.spc``, ``cmr.pfr``) made with ``by="subject"``, ``by="trial"`` or pooled (``by=None``),
or a mapping label -> such dataset to overlay several (data sets, model and data, ...):

* per subject or per trial: the group mean across subjects with its standard error (SEM across
  subjects); trials are first pooled per subject by their counts, so ``by="trial"`` draws the
  same curve as ``by="subject"``; with ``per_subject=True`` one line per subject instead;
* pooled: the pooled curve, with the dataset's ``sem`` when it has one (a pooled lag-CRP
  carries the SEM across subjects; a pooled SPC or PFR has none).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from cmr import lag_window
from cmr.errors import ParameterError, ProfileError, SchemaError
from cmr.checks import integer
import cmr

from ._common import draw_profile, labelled, legend_above, mean_sem, target_axes
from .style import PALETTE, house_style, new_figure

__all__ = ["lag_crp", "spc", "pfr", "recall_curves"]


def _per_subject(ds: xr.Dataset, variable: str) -> xr.DataArray | None:
    """(subject, core) curves of a per-subject or per-trial dataset; None when pooled."""
    unit_kind = ds.attrs.get("unit_kind")
    if unit_kind == "pooled":
        return None
    if unit_kind == "subject":
        return ds[variable]
    if unit_kind == "trial":
        if "subject" not in ds.coords:
            raise SchemaError("a per-trial dataset needs the coordinate 'subject' on 'trial' to pool trials by subject")
        if "actual" in ds and "possible" in ds:
            actual = ds["actual"].groupby("subject").sum("trial")
            possible = ds["possible"].groupby("subject").sum("trial")
            return (actual / possible.where(possible > 0)).astype(np.float64)
        return ds[variable].groupby("subject").mean("trial")
    raise SchemaError(f"expected a dataset made by subject, by trial or pooled (attr unit_kind); got {unit_kind!r}")


def _curves(data: dict, variable: str, core: str, per_subject: bool, ax, *, split_at_zero=False, window=None):
    """Draw every dataset's curve(s); the legend says what the error bars are."""
    with_sem = False
    for index, (label, ds) in enumerate(data.items()):
        curves = _per_subject(ds, variable)
        if window is not None:
            ds, curves = ds.sel({core: window}), None if curves is None else curves.sel({core: window})
        x = ds[core].values
        if per_subject:
            if curves is None:
                raise ParameterError(
                    f"per_subject=True needs a dataset made by subject or by trial; {label or 'the dataset'} is pooled"
                )
            color = PALETTE[index % len(PALETTE)]
            n = curves.sizes["subject"]
            for k, subject in enumerate(curves["subject"].values):
                draw_profile(ax, x, curves.sel(subject=subject).values, index=index, split_at_zero=split_at_zero,
                             color=color, marker="", linestyle="-", linewidth=0.6, alpha=0.45,
                             label=(f"{label} ({n} subjects)" if label else f"{n} subjects") if k == 0 else None)
            continue
        if curves is None:
            mean = ds[variable]
            sem = ds["sem"] if "sem" in ds else None
            text = "pooled"
        else:
            mean, sem, n = mean_sem(curves.transpose("subject", core), "subject")
            text = f"n = {n}" if label else f"n = {n} subjects"
        with_sem |= sem is not None
        draw_profile(ax, x, mean.values, None if sem is None else sem.values, index=index,
                     split_at_zero=split_at_zero, label=f"{label} ({text})" if label else text)
    title = "one line per subject" if per_subject else "mean \u00b1 SEM across subjects" if with_sem else None
    legend_above(ax, title=title)


#: the lag window of a standard lag-CRP figure: -5..5, cut to the lags every dataset has (lists of
#: fewer than 6 items have fewer lags)
STANDARD_LAGS = "standard"


def _window(data: dict, lags) -> np.ndarray:
    if lags is None:
        window = np.unique(np.concatenate([ds["lag"].values for ds in data.values()]))
    elif isinstance(lags, str) and lags == STANDARD_LAGS:
        shared = set.intersection(*(set(ds["lag"].values.tolist()) for ds in data.values()))
        return np.array([lag for lag in lag_window(5).tolist() if lag in shared], dtype=np.int64)
    else:
        window = lag_window(lags)
    for label, ds in data.items():
        missing = sorted(set(window.tolist()) - set(ds["lag"].values.tolist()))
        if missing:
            name = f"lag-CRP {label!r}" if label else "the lag-CRP"
            raise ProfileError(f"{name} lacks lags {missing} of the requested window; "
                               f"it has {ds['lag'].values[0]}..{ds['lag'].values[-1]}")
    return window


def lag_crp(crp, *, lags=STANDARD_LAGS, per_subject: bool = False, ax=None):
    """Lag-CRP: conditional response probability of each lag, with a gap at lag 0 (as psifr).

    Parameters
    ----------
    crp : xarray.Dataset or mapping of str to xarray.Dataset
        ``lag_profile`` dataset(s) of ``profile_kind="lag_crp"`` from :func:`cmr.lag_crp`
        (by subject, by trial or pooled); a mapping overlays several, one style each.
    lags : None, int or sequence of int
        Lags drawn (``5``: -5..5; ``None``: every lag of the data; see :func:`cmr.lag_window`).
        The default, ``"standard"``, is -5..5 cut to the lags the data have, so lists of fewer
        than 6 items draw every lag they have; a window given explicitly must be in the data.
    per_subject : bool
        One thin line per subject instead of the group mean +- SEM.
    ax : matplotlib.axes.Axes, optional
        Draw into this Axes (default: a new one-panel figure).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    cmr.errors.SchemaError
        Not a lag-CRP dataset (another kind, or ``profile_kind`` not ``lag_crp``).
    cmr.errors.ProfileError
        A requested lag is missing from the data.
    """
    from matplotlib.ticker import MaxNLocator

    data = labelled(crp, "lag_profile", "cmr.lag_crp")
    for label, ds in data.items():
        if ds.attrs.get("profile_kind") != "lag_crp":
            raise SchemaError(f"expected a lag-CRP (profile_kind 'lag_crp', from cmr.lag_crp); "
                              f"{label or 'the dataset'} has profile_kind {ds.attrs.get('profile_kind')!r}")
    window = _window(data, lags)
    fig, ax = target_axes(ax)
    with house_style():
        _curves(data, "profile", "lag", per_subject, ax, split_at_zero=True, window=window)
        ax.set_xlabel("Lag (serial positions)")
        ax.set_ylabel("Conditional response probability")
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=11, integer=True))
    return fig


def _stat_figure(stat, stat_kind: str, made_by: str, ylabel: str, per_subject: bool, ax):
    from matplotlib.ticker import MaxNLocator

    data = labelled(stat, "recall_stat", made_by)
    for label, ds in data.items():
        if ds.attrs.get("stat_kind") != stat_kind:
            raise SchemaError(f"expected stat_kind {stat_kind!r} (from {made_by}); "
                              f"{label or 'the dataset'} has {ds.attrs.get('stat_kind')!r}")
    fig, ax = target_axes(ax)
    with house_style():
        _curves(data, "prob", "serial_position", per_subject, ax)
        ax.set_xlabel("Serial position")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def spc(stat, *, per_subject: bool = False, ax=None):
    """Serial position curve: probability of recalling each studied position.

    Parameters
    ----------
    stat : xarray.Dataset or mapping of str to xarray.Dataset
        ``recall_stat`` dataset(s) of ``stat_kind="spc"`` from :func:`cmr.spc`.
    per_subject : bool
        One thin line per subject instead of the group mean +- SEM.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _stat_figure(stat, "spc", "cmr.spc", "Recall probability", per_subject, ax)


def pfr(stat, *, per_subject: bool = False, ax=None):
    """Probability of first recall of each studied position.

    As :func:`spc`, for ``recall_stat`` dataset(s) of ``stat_kind="pfr"`` from :func:`cmr.pfr`.
    """
    return _stat_figure(stat, "pfr", "cmr.pfr", "Probability of first recall", per_subject, ax)


def recall_curves(events, *, lags=5):
    """Three panels of one data set's recalls: lag-CRP, serial position curve, probability of first recall.

    The standard figure of an events dataset (``icl-cmr plot``): :func:`lag_crp`, :func:`spc`
    and :func:`pfr` of :func:`cmr.lag_crp`, :func:`cmr.spc` and :func:`cmr.pfr` by subject,
    each the mean +- SEM across subjects.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        An events dataset (:func:`cmr.from_table`) or a psifr-format table.
    lags : int
        Lag window of the lag-CRP panel, cut to the longest list (lags beyond ``L - 1`` do not exist).

    Returns
    -------
    matplotlib.figure.Figure
    """
    events = cmr.events.as_events(events)  # a dataset of another kind: SchemaError
    longest = int(events["list_length"].max())
    window = min(integer(lags, "lags", minimum=1), max(longest - 1, 1))
    fig, axes = new_figure(ncols=3, nrows=1, width=2.4, height=2.2)
    lag_crp(cmr.lag_crp(events, lags=window), lags=window, ax=axes[0])
    spc(cmr.spc(events), ax=axes[1])
    pfr(cmr.pfr(events), ax=axes[2])
    for ax in axes[1:]:
        legend = ax.get_legend()
        if legend is not None:  # one legend says it all: the panels share their units
            legend.remove()
    return fig
