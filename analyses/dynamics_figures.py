"""Figure of the toy run's training dynamics: induction score and best CMR distance per layer."""
from __future__ import annotations

__all__ = ["plot_toy_dynamics"]


def plot_toy_dynamics(table, path=None, training_log=None):
    """Induction score and best CMR distance against training step, one line per layer.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`analyses.dynamics.layer_summary` output (``checkpoint`` = step, ``layer``,
        ``max_induction_score``, ``best_distance``).
    path : path, optional
        Where to save the figure (PNG).
    training_log : dict, optional
        ``training_log.json`` of the run; adds the held-out second-copy loss panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = 3 if training_log is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4), constrained_layout=True)
    for layer, rows in table.groupby("layer"):
        rows = rows.sort_values("checkpoint")
        step = np.maximum(rows["checkpoint"].to_numpy(), 1)  # step 0 drawn at 1 on the log axis
        axes[0].plot(step, rows["max_induction_score"], "o-", label=f"layer {layer}")
        axes[1].plot(step, rows["best_distance"], "o-", label=f"layer {layer}")
    axes[0].set_ylabel("max induction score")
    axes[1].set_ylabel("best CMR distance")
    axes[1].axhline(0.5, color="grey", lw=0.8, ls="--")
    if training_log is not None:
        points = training_log["checkpoints"]
        step = np.maximum([p["step"] for p in points], 1)
        axes[2].plot(step, [p["eval_loss_repeat_second"] for p in points], "o-", label="second copy")
        axes[2].plot(step, [p["eval_loss_repeat_first"] for p in points], "o-", label="first copy")
        axes[2].plot(step, [p["eval_loss_text"] for p in points], "o-", label="text")
        axes[2].set_ylabel("held-out loss (nats)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("training step (0 shown at 1)")
        ax.legend(fontsize=8)
    if path is not None:
        fig.savefig(path, dpi=120, format="png")
    return fig
