"""Helpers shared by the plotting modules: input checks, group means and lag-profile lines."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from cmr.checks import integer, is_integer
from cmr.errors import ParameterError, SchemaError
from cmr.schema import KIND_ATTR, validate

from ...adapters.head_ranking import top_heads
from ..causal.ablation import parse_heads
from .style import new_figure, plain_text, series_style

__all__ = [
    "checked",
    "labelled",
    "heads_2d",
    "mean_sem",
    "draw_profile",
    "choose_heads",
    "head_label",
    "target_axes",
    "legend_above",
]


def checked(ds, kind: str, made_by: str) -> xr.Dataset:
    """``ds`` validated as a dataset of ``kind``; the error names the function that makes one."""
    if not isinstance(ds, xr.Dataset):
        raise SchemaError(f"expected a {kind!r} dataset (from {made_by}); got {type(ds).__name__}")
    got = ds.attrs.get(KIND_ATTR)
    if got != kind:
        raise SchemaError(f"expected a {kind!r} dataset (from {made_by}); got a dataset of kind {got!r}")
    return validate(ds, kind)


def labelled(data, kind: str, made_by: str, default_label: str = "") -> dict:
    """One dataset or a mapping label -> dataset, as a checked ``{label: dataset}``."""
    if isinstance(data, Mapping) and not isinstance(data, xr.Dataset):  # a Dataset is a Mapping too
        if not data:
            raise ParameterError(f"expected at least one {kind!r} dataset; got an empty mapping")
        # a caller's labels are shown as written, never parsed as mathtext
        return {plain_text(label): checked(ds, kind, made_by) for label, ds in data.items()}
    return {default_label: checked(data, kind, made_by)}


def heads_2d(da: xr.DataArray) -> xr.DataArray:
    """Drop the ``model`` and ``checkpoint`` dims of one model at one checkpoint."""
    extra = [d for d in ("model", "checkpoint") if d in da.dims]
    larger = {d: da.sizes[d] for d in extra if da.sizes[d] != 1}
    if larger:
        raise SchemaError(
            f"head datasets of one model at one checkpoint are drawn; got sizes {larger}: select one first, "
            "e.g. ds.sel(model=..., checkpoint=...)"
        )
    if "layer" not in da.dims or "head" not in da.dims:
        raise SchemaError(f"head datasets need dims 'layer' and 'head'; {da.name!r} has {tuple(da.dims)}")
    return da.squeeze(extra, drop=True)


def mean_sem(values: xr.DataArray, dim: str) -> tuple[xr.DataArray, xr.DataArray, int]:
    """Mean over ``dim`` (NaN skipped), its standard error (NaN below two values) and the units."""
    n = values.notnull().sum(dim)
    mean = values.mean(dim, skipna=True)
    sem = values.std(dim, ddof=1, skipna=True) / np.sqrt(n.where(n > 1))
    return mean, sem, int(values.sizes[dim])


def draw_profile(ax, x, y, sem=None, *, index: int = 0, label=None, split_at_zero: bool = False, **kw):
    """One series as markers and lines (+- ``sem`` as error bars), in the ``index``-th style.

    ``split_at_zero`` draws negative and positive lags as two lines with a gap at lag 0, as
    psifr's ``plot_lag_crp`` does (a recall lag-CRP is undefined there).
    """
    x = np.asarray(x)
    y = np.asarray(y, dtype=float)
    sem = None if sem is None else np.asarray(sem, dtype=float)
    style = {**series_style(index), **kw}
    parts = [x < 0, x > 0] if split_at_zero else [np.ones(x.shape, bool)]
    for k, part in enumerate(p for p in parts if p.any()):
        ax.errorbar(x[part], y[part], yerr=None if sem is None else sem[part], label=label if k == 0 else None,
                    elinewidth=0.8, **style)


def choose_heads(ds: xr.Dataset, variable: str, units, default: int, largest: bool = True) -> list[tuple[int, int]]:
    """Heads to draw: the ``units`` (int n) best by ``variable`` (largest or smallest), or the given ones.

    ``units`` is None (the ``default`` best), an int, a sequence of (layer, head) pairs or a
    string such as ``"L18.H6,L17.H3"``.
    """
    if variable not in ds:
        raise SchemaError(f"head dataset has no variable {variable!r}; variables: {', '.join(map(str, ds.data_vars))}")
    score = heads_2d(ds[variable])
    if units is None:
        units = default
    if isinstance(units, str):
        units = parse_heads(units)
    if is_integer(units):
        n = min(integer(units, "units as a number of heads"), int(np.isfinite(score.values).sum()))
        return top_heads(ds, variable=variable, n_heads=max(n, 1), largest=largest)
    try:
        heads = [(int(layer), int(head)) for layer, head in units]
    except (TypeError, ValueError):
        raise ParameterError(
            f"units must be None, a number of heads, (layer, head) pairs or a string like 'L18.H6,L17.H3'; got {units!r}"
        ) from None
    layers, head_ids = set(score["layer"].values.tolist()), set(score["head"].values.tolist())
    missing = [head_label(l, h) for l, h in heads if l not in layers or h not in head_ids]
    if missing or not heads:
        raise ParameterError(f"heads {', '.join(missing) or '(none)'} are not in the dataset "
                             f"(layers {min(layers)}..{max(layers)}, heads {min(head_ids)}..{max(head_ids)})")
    return heads


def head_label(layer, head) -> str:
    return f"L{int(layer)}.H{int(head)}"


def target_axes(ax, **figure_kw):
    """``(figure, ax)``: the given Axes and its figure, or a new one-panel house-style figure."""
    from matplotlib.axes import Axes

    if ax is None:
        return new_figure(**figure_kw)
    if not isinstance(ax, Axes):
        raise ParameterError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}")
    return ax.figure, ax


def legend_above(ax, **kw):
    """The Axes' legend above its top edge, where it cannot cover data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), borderaxespad=0.0, alignment="left", **kw)
