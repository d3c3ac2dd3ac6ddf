"""The causal test: ICL-score change with the top CMR-like heads ablated, against random head sets."""
from __future__ import annotations

from cmr.schema import require_variables

from ._common import checked
from .style import PALETTE, house_style, new_figure

__all__ = ["ablation_result"]


def ablation_result(ablation):
    """Mean ICL-score change of the top head set against the random sets, one panel per mode.

    Parameters
    ----------
    ablation : xarray.Dataset
        Kind ``ablation`` from :func:`icl_cmr.analyses.causal.ablation.run_ablation` (``icl-cmr ablate``).

    Returns
    -------
    matplotlib.figure.Figure
        Per ablation mode: the histogram of the random sets' mean effects, the top set's mean
        effect (vertical line) and zero (no change); titled with the rank p-value (the primary
        test, exact permutation p) and the top set's z among the random sets.
        Effect = ablated ICL score - intact ICL score in nats (> 0: ablation hurts ICL).
    """
    ablation = checked(ablation, "ablation", "icl_cmr.analyses.causal.ablation.run_ablation")
    require_variables(ablation, ["mean_effect", "empirical_pvalue"], "ablation")
    modes = [str(m) for m in ablation["mode"].values]
    families = ablation["family"].values if "family" in ablation.coords else ["random"] * ablation.sizes["head_set"]
    random_sets = [str(s) for s, f in zip(ablation["head_set"].values, families) if str(s) != "top" and f == "random"]
    fig, axes = new_figure(len(modes), width=2.8, height=2.2, squeeze=False)
    with house_style():
        for ax, mode in zip(axes[0], modes):
            effect = ablation["mean_effect"].sel(mode=mode)
            if random_sets:
                ax.hist(effect.sel(head_set=random_sets).values, bins=min(12, max(3, len(random_sets) // 2)),
                        color="0.75", edgecolor="white", linewidth=0.5, label=f"random sets ({len(random_sets)})")
            ax.axvline(float(effect.sel(head_set="top")), color=PALETTE[1], lw=1.8, label="top CMR-like set")
            ax.axvline(0.0, color="k", lw=0.6, ls=":", label="no change")
            p = float(ablation["empirical_pvalue"].sel(mode=mode))
            title = f"{mode} ablation, rank p = {p:.3f}"
            if "z" in ablation and "top_vs_random" in ablation["comparison"].values:  # files without z keep the p alone
                title += f", z = {float(ablation['z'].sel(mode=mode, comparison='top_vs_random')):+.2f}"
            ax.set_title(title)
            ax.set_xlabel("Change in ICL score (nats; > 0 hurts ICL)")
            ax.set_ylabel("Head sets")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels) if len(modes) > 1 else 2)
    return fig
