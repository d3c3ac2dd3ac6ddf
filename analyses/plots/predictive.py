"""Posterior predictive check figure: data against model lag-CRP, serial position curve and PFR."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import xarray as xr

__all__ = ["plot_predictive_check"]

_COLORS = ("#c0392b", "#1f4e79", "#2e8b57", "#8e44ad", "#d35400")
_PANELS = (("crp", "lag", "lag", "conditional response probability"),
           ("spc", "serial_position", "serial position", "recall probability"),
           ("pfr", "serial_position", "serial position", "probability of first recall"))


def plot_predictive_check(check: xr.Dataset | Mapping[str, xr.Dataset], *, title: str | None = None):
    """Group lag-CRP, SPC and PFR of the data (points, +-1 SEM across subjects) and the model(s) (lines).

    Parameters
    ----------
    check : xarray.Dataset or mapping of model name -> Dataset
        ``predictive_check`` dataset(s) of :func:`cmr.posterior_predictive` on the same data;
        a mapping overlays several models.
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Three panels; the lag-CRP is drawn in two segments (negative and positive lags).
    """
    from matplotlib.figure import Figure

    from cmr.schema import validate

    checks = dict(check) if isinstance(check, Mapping) else {"model": check}
    for ds in checks.values():
        validate(ds, "predictive_check")
    first = next(iter(checks.values()))
    fig = Figure(figsize=(10.5, 3.0), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, (name, dim, xlabel, ylabel) in zip(axes, _PANELS):
        x = first[dim].values
        segments = [x < 0, x > 0] if dim == "lag" else [np.ones(x.size, bool)]
        mean = first[f"{name}_group"].sel(source="data").values
        sem = first[f"{name}_group_sem"].sel(source="data").values
        for i, mask in enumerate(segments):
            ax.errorbar(x[mask], mean[mask], yerr=sem[mask], fmt="o", color="black", ms=3.5, capsize=0,
                        label="data" if i == 0 else None)
        for k, (label, ds) in enumerate(checks.items()):
            model = ds[f"{name}_group"].sel(source="model").values
            for i, mask in enumerate(segments):
                ax.plot(x[mask], model[mask], "-", color=_COLORS[k % len(_COLORS)], lw=1.6,
                        label=label if i == 0 else None)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].legend(frameon=False, fontsize=8)
    n_subjects = first.sizes["subject"]
    fig.suptitle(title or f"posterior predictive check ({n_subjects} subjects)", fontsize=10)
    return fig
