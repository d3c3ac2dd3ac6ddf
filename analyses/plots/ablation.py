"""The causal test: ICL-score change (and the measures beside it) with the top CMR-like heads ablated,
against random head sets."""
from __future__ import annotations

import numpy as np

from cmr.deprecation import keyword_only
from cmr.errors import ParameterError
from cmr.schema import require_variables

from ._common import checked
from .style import PALETTE, house_style, new_figure

__all__ = ["ablation_result"]


#: what each measure's effect is, as an x label (> 0: ablation hurts in-context learning)
MEASURE_LABELS = {
    "icl": "Change in ICL score (nats; > 0 hurts ICL)",
    "wide_icl": "Change in wide ICL score (nats; > 0 hurts ICL)",
    "bigram": "Change in bigram-completion loss gap (nats)",
    "repeated_tokens": "Change in 2nd - 1st copy loss (nats)",
}


@keyword_only
def ablation_result(ablation, *, measures=None):
    """Mean effect of the top head set against the random sets: the ICL score and the measures beside it.

    Parameters
    ----------
    ablation : xarray.Dataset
        Kind ``ablation`` from :func:`icl_cmr.analyses.causal.ablation.run_ablation` (``icl-cmr ablate``).
    measures : sequence of str, optional
        Measures to draw (``icl`` and those of the file's ``measure`` dim,
        :data:`icl_cmr.analyses.causal.measures.MEASURES`); default every one in the file. A
        file with measures (the ``demo`` and ``cpu`` designs carry ``bigram`` and
        ``repeated_tokens``, the measures with power at their size) is drawn one column per
        measure, one row per mode; a file without, one panel per mode.

    Returns
    -------
    matplotlib.figure.Figure
        Per ablation mode and measure: the histogram of the random sets' mean effects, the top
        set's mean effect (vertical line) and zero (no change); titled with the rank p-value
        (the primary test, exact permutation p) and the top set's z among the random sets.
        Effect = ablated - intact score in nats (> 0: ablation hurts in-context learning).
    """
    ablation = checked(ablation, "ablation", "icl_cmr.analyses.causal.ablation.run_ablation")
    require_variables(ablation, ["mean_effect", "empirical_pvalue"], "ablation")
    present = [str(m) for m in ablation["measure"].values] if "measure" in ablation.dims else ["icl"]
    if measures is None:
        measures = present
    else:
        measures = [measures] if isinstance(measures, str) else [str(m) for m in measures]
        missing = [m for m in measures if m not in present]
        if missing or not measures:
            raise ParameterError(f"measures must be among those of the ablation file ({', '.join(present)}); "
                                 f"got {', '.join(missing) or 'none'}")
    modes = [str(m) for m in ablation["mode"].values]
    families = ablation["family"].values if "family" in ablation.coords else ["random"] * ablation.sizes["head_set"]
    random_sets = [str(s) for s, f in zip(ablation["head_set"].values, families) if str(s) != "top" and f == "random"]
    by_measure = "measure" in ablation.dims
    if by_measure:
        fig, axes = new_figure(ncols=len(measures), nrows=len(modes), width=2.8, height=2.2, squeeze=False)
        panels = [(axes[r][c], mode, measure) for r, mode in enumerate(modes) for c, measure in enumerate(measures)]
    else:
        fig, axes = new_figure(ncols=len(modes), width=2.8, height=2.2, squeeze=False)
        panels = [(ax, mode, "icl") for ax, mode in zip(axes[0], modes)]
    with house_style():
        for ax, mode, measure in panels:
            if by_measure:
                effect = ablation["measure_mean_effect"].sel(measure=measure, mode=mode)
                stats = {name: ablation[f"measure_{name}"].sel(measure=measure, mode=mode) for name in ("rank_pvalue", "z")
                         if f"measure_{name}" in ablation}
            else:
                effect = ablation["mean_effect"].sel(mode=mode)
                stats = {name: ablation[name].sel(mode=mode) for name in ("z",) if name in ablation}
            if random_sets:
                values = effect.sel(head_set=random_sets).values
                values = values[np.isfinite(values)]
                ax.hist(values, bins=min(12, max(3, len(random_sets) // 2)),
                        color="0.75", edgecolor="white", linewidth=0.5, label=f"random sets ({len(random_sets)})")
            ax.axvline(float(effect.sel(head_set="top")), color=PALETTE[1], lw=1.8, label="top CMR-like set")
            ax.axvline(0.0, color="k", lw=0.6, ls=":", label="no change")
            has_contrast = "top_vs_random" in ablation["comparison"].values
            if by_measure:
                p = float(stats["rank_pvalue"].sel(comparison="top_vs_random")) if has_contrast else float("nan")
                title = f"{measure}, {mode}: rank p = {p:.3f}"
            else:
                p = float(ablation["empirical_pvalue"].sel(mode=mode))
                title = f"{mode} ablation, rank p = {p:.3f}"
            if "z" in stats and has_contrast:  # files without z keep the p alone
                title += f", z = {float(stats['z'].sel(comparison='top_vs_random')):+.2f}"
            ax.set_title(title)
            ax.set_xlabel(MEASURE_LABELS.get(measure, f"Change in {measure} (nats)"))
            ax.set_ylabel("Head sets")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center",
                   ncols=len(labels) if len(modes) > 1 or len(measures) > 1 else 2)
    return fig
