"""Figures of the study, in one consistent style (matplotlib; plotting lives only here).

Every function takes datasets of the icl-cmr schema, draws one figure and writes it
atomically as PNG (and PDF when ``pdf=True``). Lags are read from the ``lag`` coord, never
by position.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import xarray as xr

from cmr.io import atomic_write

PALETTE = ("#1f4e79", "#c0392b", "#2e8b57", "#8e44ad", "#d35400", "#7f8c8d", "#16a085", "#b7950b")

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 220,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.5,
    "lines.markersize": 4,
    "savefig.bbox": "tight",
}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def figure(path, ncols=1, nrows=1, width=3.3, height=2.6, pdf=False, **kwargs):
    """Yield ``(fig, axes)`` in the house style; save atomically to ``path`` on exit."""
    plt = _plt()
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)
        try:
            yield fig, axes
            fig.tight_layout()
            path = Path(path)
            with atomic_write(path, suffix=".png") as tmp:
                fig.savefig(tmp, format="png")
            if pdf:
                with atomic_write(path.with_suffix(".pdf"), suffix=".pdf") as tmp:
                    fig.savefig(tmp, format="pdf")
        finally:
            plt.close(fig)


def mean_sem(profile: xr.DataArray, unit_dims) -> tuple[xr.DataArray, xr.DataArray]:
    n = profile.notnull().sum(unit_dims)
    mean = profile.mean(unit_dims, skipna=True)
    sem = profile.std(unit_dims, ddof=1, skipna=True) / np.sqrt(n.where(n > 1))
    return mean, sem


def plot_lag_segments(ax, lags, values, sem=None, color=PALETTE[0], label=None, skip_zero=True, **kw):
    """Plot a lag profile as two segments (negative and positive lags), as psifr does."""
    lags = np.asarray(lags)
    values = np.asarray(values, dtype=float)
    segments = [lags < 0, lags > 0] if skip_zero else [np.ones_like(lags, bool)]
    for i, mask in enumerate(segments):
        ax.plot(lags[mask], values[mask], "o-", color=color, label=label if i == 0 else None, **kw)
        if sem is not None:
            s = np.asarray(sem, dtype=float)[mask]
            ax.fill_between(lags[mask], values[mask] - s, values[mask] + s, color=color, alpha=0.2, lw=0)


def human_lag_crp(profiles: dict, path, max_lag: int = 5, pdf: bool = False) -> Path:
    """Lag-CRP of each human data set: mean over subjects +- SEM, lags -max_lag..max_lag.

    ``profiles`` maps a label (e.g. "PEERS") to a per-subject lag-CRP dataset.
    """
    with figure(path, ncols=len(profiles), width=3.0, height=2.6, pdf=pdf, sharey=True) as (fig, axes):
        for ax, (label, ds) in zip(axes[0], profiles.items()):
            window = ds["profile"].sel(lag=slice(-max_lag, max_lag))
            units = [d for d in window.dims if d != "lag"]
            mean, sem = mean_sem(window, units)
            n_subjects = int(np.prod([window.sizes[d] for d in units])) if units else 1
            plot_lag_segments(ax, window["lag"].values, mean.values, sem.values)
            ax.set_title(f"{label} (n = {n_subjects})")
            ax.set_xlabel("Lag")
            ax.set_xticks(range(-max_lag, max_lag + 1))
        axes[0][0].set_ylabel("Conditional response probability")
        axes[0][0].set_ylim(bottom=0)
    return Path(path)
