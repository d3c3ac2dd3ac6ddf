"""CMR lag-profile grids: the predicted lag profile along each parameter axis."""
from __future__ import annotations

import numpy as np

from cmr.checks import integer
from cmr.errors import SchemaError

from ._common import checked, draw_profile, legend_above
from .style import MARKERS, house_style, new_figure

__all__ = ["grid_profiles"]

#: the y axis of each profile kind a grid holds (cmr.grids)
PROFILE_LABELS = {
    "cmr_mc_crp": "Lag probability (Monte Carlo)",
    "cmr_tf_prob": "Retrieval probability (teacher-forced)",
    "cmr_tf_logsupport": "Log retrieval probability (teacher-forced)",
    "cmr_tf_support": "Retrieval support (teacher-forced)",
}


def grid_profiles(grid, *, n_values: int = 5, ncols: int = 3):
    """The grid's lag profile as each parameter varies, the others held at the middle of their axes.

    One panel per parameter axis with more than one value: the profiles at up to ``n_values``
    evenly spaced values of it (light to dark in order of the value, each with its own marker),
    every other parameter at the middle value of its axis (named in the legend's title). A
    Monte Carlo grid draws its standard error as error bars.

    Parameters
    ----------
    grid : xarray.Dataset
        ``lag_profile`` dataset with ``unit_kind="cmr_parameters"`` (:func:`cmr.paper_mc_grid`,
        :func:`cmr.paper_teacher_forced_grid`, :func:`cmr.textbook_teacher_forced_grid`,
        ``icl-cmr grid``).
    n_values : int
        Profiles per panel (at least 2).
    ncols : int
        Panels per row.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib import colormaps

    grid = checked(grid, "lag_profile", "cmr.paper_teacher_forced_grid or icl-cmr grid")
    if grid.attrs.get("unit_kind") != "cmr_parameters":
        raise SchemaError(f"grid_profiles draws a CMR grid (lag_profile with unit_kind 'cmr_parameters'); got "
                          f"unit_kind {grid.attrs.get('unit_kind')!r}")
    n_values = integer(n_values, "n_values", minimum=2)
    profile = grid["profile"]
    sem = grid["sem"] if "sem" in grid else None
    axes_names = [str(d) for d in profile.dims if d != "lag"]
    if not axes_names:
        raise SchemaError("grid_profiles needs at least one parameter dim besides 'lag'; the grid has none")
    middle = {name: profile.sizes[name] // 2 for name in axes_names}
    varied = [name for name in axes_names if profile.sizes[name] > 1] or axes_names[:1]
    ncols = min(integer(ncols, "ncols"), max(len(varied), 1))
    nrows = -(-max(len(varied), 1) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=2.5, height=2.5, squeeze=False, sharey=True)
    colours = colormaps["viridis"]
    with house_style():
        for ax in axes.flat[len(varied):]:
            ax.set_visible(False)
        for ax, name in zip(axes.flat, varied):
            size = profile.sizes[name]
            chosen = np.unique(np.round(np.linspace(0, size - 1, min(n_values, size))).astype(int))
            held = {other: middle[other] for other in axes_names if other != name}
            for k, index in enumerate(chosen):
                at = {**held, name: int(index)}
                shade = colours(0.85 - 0.7 * k / max(len(chosen) - 1, 1))
                value = float(profile[name].values[index])
                draw_profile(ax, profile["lag"].values, profile.isel(at).values,
                             None if sem is None else sem.isel(at).values, color=shade,
                             marker=MARKERS[k % len(MARKERS)], linestyle="-", label=f"{value:g}")
            fixed = ", ".join(f"{other} = {float(profile[other].values[i]):g}" for other, i in held.items())
            ax.set_xlabel("Lag (serial positions)")
            legend_above(ax, title=f"{name}\n({fixed})" if fixed else name, ncols=min(len(chosen), 5),
                         columnspacing=0.8, handletextpad=0.3)
        fig.supylabel(PROFILE_LABELS.get(grid.attrs.get("profile_kind"), str(grid.attrs.get("profile_kind"))),
                      fontsize=8)
    return fig
