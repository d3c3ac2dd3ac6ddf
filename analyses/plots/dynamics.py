"""Training dynamics of the toy transformer: the induction circuit, CMR fits and losses by step."""
from __future__ import annotations

import numpy as np
import pandas as pd

from cmr.constants import CMR_LIKE_DISTANCE
from cmr.deprecation import keyword_only
from cmr.errors import SchemaError

from .style import LINESTYLES, MARKERS, PALETTE, REFERENCE_GREY, house_style, new_figure

__all__ = ["training_dynamics"]

_COLUMNS = ("checkpoint", "layer", "max_induction_score", "best_distance")
_LOSSES = ("step", "eval_loss_text", "eval_loss_repeat_first", "eval_loss_repeat_second")


def _check(table, training_log) -> None:
    if not isinstance(table, pd.DataFrame):
        raise SchemaError(f"training_dynamics needs the layer_summary DataFrame; got {type(table).__name__}")
    missing = [c for c in _COLUMNS if c not in table.columns]
    if missing:
        raise SchemaError(f"layer-summary table needs columns {', '.join(_COLUMNS)} "
                          f"(icl_cmr.analyses.heads.dynamics.layer_summary); missing: {', '.join(missing)}")
    if training_log is not None:
        points = training_log.get("checkpoints") if isinstance(training_log, dict) else None
        if not isinstance(points, list) or not all(isinstance(p, dict) and set(_LOSSES) <= set(p) for p in points):
            raise SchemaError(f"training_log must be the dict of training_log.json: 'checkpoints', a list of "
                              f"records with {', '.join(_LOSSES)}")


@keyword_only
def training_dynamics(table, *, training_log=None):
    """Head scores, CMR distance, fitted parameters and losses against training step.

    Panels: (a) per layer, the largest induction score (solid) and previous-token score
    (dashed, when the table has it): the two halves of the induction circuit; (b) the layer's
    best CMR distance (dotted line: :data:`cmr.CMR_LIKE_DISTANCE`); (c) with ``beta_enc`` and
    ``beta_rec`` in the table, those of the layer's most CMR-like head, drawn only where it is
    CMR-like (elsewhere the fitted values mean little); (d) with ``training_log``, held-out
    losses on text and on repeated tokens at their first and second occurrence.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`icl_cmr.analyses.heads.dynamics.layer_summary` output: ``checkpoint`` (the step),
        ``layer``, ``max_induction_score``, ``best_distance``; optional
        ``max_previous_token_score``, ``beta_enc``, ``beta_rec``.
    training_log : dict, optional
        ``training_log.json`` of the run (``checkpoints``: records with ``step`` and the losses).

    Returns
    -------
    matplotlib.figure.Figure
    """
    _check(table, training_log)
    has_beta = {"beta_enc", "beta_rec"} <= set(table.columns)
    panels = 2 + has_beta + (training_log is not None)
    fig, axes = new_figure(ncols=panels, width=2.6, height=2.3)
    axes = np.atleast_1d(axes)
    with house_style():
        for index, (layer, rows) in enumerate(table.groupby("layer")):
            rows = rows.sort_values("checkpoint")
            color = PALETTE[index % len(PALETTE)]
            step = rows["checkpoint"].to_numpy()
            solid = {"color": color, "marker": MARKERS[index % len(MARKERS)], "ms": 2.5}
            faint = {**solid, "linestyle": "--", "alpha": 0.7, "markerfacecolor": "white"}
            axes[0].plot(step, rows["max_induction_score"], label=f"L{layer} induction", **solid)
            if "max_previous_token_score" in rows:
                axes[0].plot(step, rows["max_previous_token_score"], label=f"L{layer} previous token", **faint)
            axes[1].plot(step, rows["best_distance"], label=f"layer {layer}", **solid)
            if has_beta:
                like = rows["best_distance"].to_numpy() < CMR_LIKE_DISTANCE
                if like.any():
                    axes[2].plot(step, rows["beta_enc"].where(like), label=f"L{layer} $\\beta_{{enc}}$", **solid)
                    axes[2].plot(step, rows["beta_rec"].where(like), label=f"L{layer} $\\beta_{{rec}}$", **faint)
        axes[0].set_ylabel("Largest head score in layer")
        axes[0].set_ylim(0, 1)
        axes[1].set_ylabel("Best CMR distance in layer")
        axes[1].axhline(CMR_LIKE_DISTANCE, color=REFERENCE_GREY, lw=0.8, ls=":")
        if has_beta:
            axes[2].set_ylabel("Fitted value (most CMR-like head)")
            axes[2].set_ylim(-0.02, 1.02)
        if training_log is not None:
            ax = axes[-1]
            points = training_log["checkpoints"]
            step = [p["step"] for p in points]
            for k, (key, label) in enumerate([("eval_loss_text", "text"), ("eval_loss_repeat_first", "repeated: first"),
                                              ("eval_loss_repeat_second", "repeated: copy")]):
                ax.plot(step, [p[key] for p in points], ms=2.5, label=label,
                        color=("0.45", PALETTE[1], PALETTE[0])[k], marker=MARKERS[k], linestyle=LINESTYLES[k])
            ax.set_ylabel("Held-out loss (nats)")
        titles = ["induction circuit", "CMR fit"] + ["CMR parameters"] * has_beta + ["losses"] * (training_log is not None)
        for label, title, ax in zip("abcd", titles, axes):
            ax.set_xlabel("Training step")
            ax.set_title(f"({label}) {title}", loc="left")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="best", fontsize=6)
    return fig
