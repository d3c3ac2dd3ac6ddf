"""CMR's states step by step: context and recall probabilities of a recorded list or of the attention circuit."""
from __future__ import annotations

import numpy as np

from cmr.checks import index

from ._common import checked
from .style import PALETTE, house_style, new_figure

__all__ = ["cmr_states", "circuit_trace"]


def _heatmap(fig, ax, values, rows, columns, *, xlabel: str, ylabel: str, label: str, cmap: str = "viridis"):
    """``values`` (rows x columns) as an image with every row and column labelled, and its colour bar."""
    image = ax.imshow(np.asarray(values, dtype=float), aspect="auto", interpolation="nearest", cmap=cmap,
                      origin="upper")
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels([str(c) for c in columns], rotation=90 if len(columns) > 6 else 0)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([str(r) for r in rows])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(True)
    fig.colorbar(image, ax=ax, shrink=0.9, label=label)
    return image


def _short_unit(unit) -> str:
    return str(unit).replace("item_", "")


def cmr_states(states, *, trial: int = 0):
    """One list's recorded states: context after each studied item, the cue of each event, and recall probabilities.

    Three heat maps: ``study_context`` (study position x context unit), ``cue_context`` (event x
    unit) and ``probability`` (event x study position, the stop probability in the last column),
    with the item recalled at each event marked by a dot. Events after the stop are left out.

    Parameters
    ----------
    states : xarray.Dataset
        ``cmr_states`` dataset from :func:`cmr.record_states`.
    trial : int
        Which list (index along ``trial``); the first by default.

    Returns
    -------
    matplotlib.figure.Figure
    """
    states = checked(states, "cmr_states", "cmr.record_states")
    one = states.isel(trial=index(trial, "trial", states.sizes["trial"]))
    scored = np.flatnonzero(np.isfinite(np.asarray(one["stop_probability"].values, dtype=float)))
    one = one.isel(event=scored)
    units = [_short_unit(u) for u in one["unit"].values]
    positions = one["study_position"].values
    events = one["event"].values
    fig, axes = new_figure(ncols=3, nrows=1, width=2.3, height=2.3)
    with house_style():
        _heatmap(fig, axes[0], one["study_context"].transpose("study_position", "unit").values, positions, units,
                 xlabel="Context unit (item)", ylabel="After studying position", label="Context")
        _heatmap(fig, axes[1], one["cue_context"].transpose("event", "unit").values, events, units,
                 xlabel="Context unit (item)", ylabel="Recall event", label="Context")
        probability = np.column_stack([one["probability"].transpose("event", "study_position").values,
                                       one["stop_probability"].values])
        _heatmap(fig, axes[2], probability, events, [*positions, "stop"], xlabel="Study position",
                 ylabel="Recall event", label="P(recall)", cmap="magma")
        recalled = np.asarray(one["event_position"].values)
        column = np.where(recalled > 0, np.searchsorted(positions, recalled), len(positions))
        axes[2].scatter(column, np.arange(len(events)), s=8, marker="o", facecolors="none", edgecolors=PALETTE[2],
                        linewidths=0.8, label="recalled")
        who = [f"{name} {one[name].item()}" for name in ("subject", "list") if name in one.coords]
        fig.suptitle(", ".join(who) or f"trial {int(one['trial'])}", fontsize=8)
    return fig


def circuit_trace(trace):
    """The attention circuit's context after each cue and its recall probabilities over the studied items.

    Two heat maps: ``context`` (cue step x context unit) and ``probability`` (cue step x study
    position), the cue's own position marked by a cross (none at the start token).

    Parameters
    ----------
    trace : xarray.Dataset
        ``circuit_trace`` dataset from :func:`cmr.attention_circuit`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    trace = checked(trace, "circuit_trace", "cmr.attention_circuit")
    steps = trace["step"].values
    positions = trace["study_position"].values
    cue = np.asarray(trace["cue_position"].values)
    rows = [f"{s} (cue {c})" if c > 0 else f"{s} (start)" for s, c in zip(steps, cue)]
    fig, axes = new_figure(ncols=2, nrows=1, width=2.4, height=2.3)
    with house_style():
        _heatmap(fig, axes[0], trace["context"].transpose("step", "unit").values, rows,
                 [_short_unit(u) for u in trace["unit"].values], xlabel="Context unit (item)", ylabel="Cue step",
                 label="Context")
        _heatmap(fig, axes[1], trace["probability"].transpose("step", "study_position").values, rows, positions,
                 xlabel="Study position", ylabel="Cue step", label="P(recall)", cmap="magma")
        cued = cue > 0
        axes[1].scatter(np.searchsorted(positions, cue[cued]), np.flatnonzero(cued), s=14, marker="x",
                        color=PALETTE[2], linewidths=0.8)
        fig.suptitle(f"CMR as an attention circuit ({trace.attrs.get('variant', 'textbook')})", fontsize=8)
    return fig
