"""Figure of the toy run's training dynamics: the induction circuit, CMR fits and losses."""
from __future__ import annotations

__all__ = ["plot_toy_dynamics"]


def plot_toy_dynamics(table, path=None, training_log=None):
    """Head scores, CMR distance and fitted parameters against training step, per layer.

    Panels: (a) the layer's largest induction score (solid) and previous-token score (dashed,
    when the table has it): the two halves of the induction circuit; (b) the layer's best CMR
    distance (dashed line: 0.5, the CMR-like threshold); (c) beta_enc (solid) and beta_rec
    (dashed) of the layer's most CMR-like head, when the grid has them, drawn only where that
    head is CMR-like (distance < 0.5: elsewhere the fitted values mean little); (d) with
    ``training_log``, held-out losses on text and on repeated tokens at their first and second
    occurrence. Linear step axis: checkpoints are evenly spaced after the first few.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`icl_cmr.analyses.dynamics.layer_summary` output (``checkpoint`` = step, ``layer``,
        ``max_induction_score``, ``best_distance``; optional ``max_previous_token_score``,
        ``beta_enc``, ``beta_rec``).
    path : path, optional
        Where to save the figure (PNG).
    training_log : dict, optional
        ``training_log.json`` of the run.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from icl_cmr.analyses.dynamics import CMR_LIKE_DISTANCE

    has_beta = {"beta_enc", "beta_rec"} <= set(table.columns)
    panels = 2 + has_beta + (training_log is not None)
    fig, axes = plt.subplots(1, panels, figsize=(3.9 * panels, 3.4), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (layer, rows) in enumerate(table.groupby("layer")):
        rows = rows.sort_values("checkpoint")
        color = colors[index % len(colors)]
        step = rows["checkpoint"].to_numpy()
        axes[0].plot(step, rows["max_induction_score"], "o-", ms=3, color=color, label=f"L{layer} induction")
        if "max_previous_token_score" in rows:
            axes[0].plot(step, rows["max_previous_token_score"], "s--", ms=3, color=color, alpha=0.7,
                         label=f"L{layer} previous token")
        axes[1].plot(step, rows["best_distance"], "o-", ms=3, color=color, label=f"layer {layer}")
        if has_beta:
            like = rows["best_distance"].to_numpy() < CMR_LIKE_DISTANCE
            if like.any():
                axes[2].plot(step, rows["beta_enc"].where(like), "o-", ms=3, color=color,
                             label=f"L{layer} $\\beta_{{enc}}$")
                axes[2].plot(step, rows["beta_rec"].where(like), "s--", ms=3, color=color, alpha=0.7,
                             label=f"L{layer} $\\beta_{{rec}}$")
    axes[0].set_ylabel("max head score in the layer")
    axes[0].set_ylim(0, 1)
    axes[1].set_ylabel("best CMR distance in the layer")
    axes[1].axhline(CMR_LIKE_DISTANCE, color="grey", lw=0.8, ls="--")
    if has_beta:
        axes[2].set_ylabel("fitted parameter (most CMR-like head)")
        axes[2].set_ylim(-0.02, 1.02)
    if training_log is not None:
        ax = axes[-1]
        points = training_log["checkpoints"]
        step = [p["step"] for p in points]
        ax.plot(step, [p["eval_loss_text"] for p in points], "o-", ms=3, color="0.5", label="text")
        ax.plot(step, [p["eval_loss_repeat_first"] for p in points], "o-", ms=3, label="repeated: first")
        ax.plot(step, [p["eval_loss_repeat_second"] for p in points], "o-", ms=3, label="repeated: copy")
        ax.set_ylabel("held-out loss (nats)")
    for label, ax in zip("abcd", axes):
        ax.set_xlabel("training step")
        ax.legend(fontsize=7)
        ax.set_title(f"({label})", loc="left", fontsize=9)
    if path is not None:
        fig.savefig(path, dpi=120, format="png")
    return fig
