"""Posterior predictive check: the data's lag-CRP, serial position curve and PFR against fitted CMR."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from cmr.errors import ParameterError

from ._common import checked, draw_profile, legend_above
from .style import PALETTE, house_style, new_figure, plain_text

__all__ = ["predictive_check"]

_PANELS = (("crp", "lag", "Lag (serial positions)", "Conditional response probability"),
           ("spc", "serial_position", "Serial position", "Recall probability"),
           ("pfr", "serial_position", "Serial position", "Probability of first recall"))


def predictive_check(check: xr.Dataset | Mapping[str, xr.Dataset], *, title: str | None = None):
    """Group lag-CRP, SPC and PFR of the data (black, +-1 SEM across subjects) and of the model(s) (lines).

    Parameters
    ----------
    check : xarray.Dataset or mapping of model name -> Dataset
        ``predictive_check`` dataset(s) of :func:`cmr.posterior_predictive` on the same data;
        a mapping overlays several models (the data are drawn from the first).
    title : str, optional
        Figure title (default: the number of subjects).

    Returns
    -------
    matplotlib.figure.Figure
        Three panels; the lag-CRP is drawn in two segments (negative and positive lags).
    """
    made_by = "cmr.posterior_predictive"
    if isinstance(check, Mapping) and not isinstance(check, xr.Dataset):
        if not check:
            raise ParameterError("expected at least one 'predictive_check' dataset; got an empty mapping")
        checks = {str(label): checked(ds, "predictive_check", made_by) for label, ds in check.items()}
    else:
        checks = {"model": checked(check, "predictive_check", made_by)}
    from matplotlib.ticker import MaxNLocator

    first = next(iter(checks.values()))
    fig, axes = new_figure(ncols=3, width=2.4, height=2.2)
    with house_style():
        for ax, (name, dim, xlabel, ylabel) in zip(axes, _PANELS):
            x = first[dim].values
            split = dim == "lag"
            data = first[f"{name}_group"].sel(source="data").values
            sem = first[f"{name}_group_sem"].sel(source="data").values
            draw_profile(ax, x, data, sem, label="data", split_at_zero=split,
                         color="black", linestyle="none")
            for k, (label, ds) in enumerate(checks.items()):
                model = ds[f"{name}_group"].sel(source="model").values
                draw_profile(ax, x, model, index=k, label=label, split_at_zero=split,
                             color=PALETTE[k % len(PALETTE)], marker="none")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            if split:
                ax.set_xticks(x[np.abs(x) % 2 == 1] if x.size > 6 else x)
            else:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        legend_above(axes[2], ncols=len(checks) + 1)  # above the panel: below it the curves would cover it
        n_subjects = first.sizes["subject"]
        fig.suptitle(plain_text(title) if title else f"Posterior predictive check ({n_subjects} subjects)", fontsize=8)
    return fig
