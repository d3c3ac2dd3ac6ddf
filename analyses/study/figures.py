"""The figures of ``icl-cmr run``, drawn by :mod:`icl_cmr.analyses.plots` from the run's outputs."""
from __future__ import annotations

from cmr.io import load_dataset

from .. import plots
from .layout import (
    ABLATION_FILE,
    ATTENTION_FILE,
    CAUSAL_COMPOSITION_FILE,
    FIGURES_DIR,
    HEADS_FILE,
    OBJECTIVES,
    head_fit_file,
    human_files,
    human_fit_files,
    slug,
)
from ...adapters.head_ranking import top_heads

__all__ = ["make_all"]


def make_all(ctx) -> list[str]:
    """Draw every figure the run's outputs allow (PNG + PDF); return their paths relative to the run dir."""
    made = []

    def save(fig, name):
        plots.save_figure(fig, ctx.path(FIGURES_DIR) / name, pdf=True)
        made.append(f"{FIGURES_DIR}/{name}")

    human = {slug(s): load_dataset(ctx.path(f), kind="lag_profile") for s, f in human_files(ctx.settings).items()}
    save(plots.lag_crp(human), "human_lag_crp.png")
    if not ctx.path(HEADS_FILE).is_file():
        return made
    heads = load_dataset(ctx.path(HEADS_FILE), kind="lag_profile")
    fits = {o: load_dataset(ctx.path(head_fit_file(o)), kind="profile_fit") for o in OBJECTIVES}
    top = top_heads(fits["lsq"], fraction=float(ctx.settings["ablation_fraction"]))
    save(plots.head_profiles(heads, fits=fits["lsq"]), "top_heads_fits.png")
    if ctx.path(ATTENTION_FILE).is_file():
        save(plots.attention_pattern(load_dataset(ctx.path(ATTENTION_FILE), kind="attention_pattern")),
             "attention_top_head.png")
    save(plots.distance_vs_induction(heads, fits), "distance_vs_induction.png")
    save(plots.share_cmr_like_by_depth(fits), "cmr_like_by_depth.png")
    human_fits = {slug(s): load_dataset(ctx.path(f), kind="profile_fit")
                  for (s, o), f in human_fit_files(ctx.settings).items() if o == "lsq"}
    save(plots.parameters_heads_vs_humans(fits["lsq"], human_fits, len(top)), "parameters_heads_vs_humans.png")
    save(plots.soft_crp_vs_humans(human, heads, units=top[:4]), "human_vs_head_crp.png")
    if ctx.path(CAUSAL_COMPOSITION_FILE).is_file():
        causal = load_dataset(ctx.path(CAUSAL_COMPOSITION_FILE), kind="path_ablation")
        save(plots.composition_against_cmr(causal, fits["lsq"]), "composition_vs_cmr.png")
    if ctx.path(ABLATION_FILE).is_file():
        save(plots.ablation_result(load_dataset(ctx.path(ABLATION_FILE), kind="ablation")), "ablation.png")
    return made
