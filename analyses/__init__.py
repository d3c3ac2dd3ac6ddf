"""analyses: the studies built on cmr and adapters (head scans, fits, ablation, training
dynamics, figures, reports) and the ``icl-cmr`` command line. Plotting lives only here;
nothing imports from this package."""
from cmr.deprecation import alias_moved_modules

# modules that moved into causal/, study/, reproduce/, heads/ and memory/: importable under the old
# names for one release, with a warning
alias_moved_modules({
    "icl_cmr.analyses.ablation": ("icl_cmr.analyses.causal.ablation",),
    "icl_cmr.analyses.ablation_measures": ("icl_cmr.analyses.causal.measures",),
    "icl_cmr.analyses.ablation_power": ("icl_cmr.analyses.causal.power",),
    "icl_cmr.analyses.ablation_stats": ("icl_cmr.analyses.causal.statistics",),
    "icl_cmr.analyses.pipeline": ("icl_cmr.analyses.study.pipeline",),
    "icl_cmr.analyses.run_layout": ("icl_cmr.analyses.study.layout",),
    "icl_cmr.analyses.report": ("icl_cmr.analyses.study.report",),
    "icl_cmr.analyses.study_figures": ("icl_cmr.analyses.study.figures",),
    "icl_cmr.analyses.published_fits": ("icl_cmr.analyses.reproduce.published_fits",),
    "icl_cmr.analyses.human_comparison": ("icl_cmr.analyses.reproduce.human_comparison",),
    "icl_cmr.analyses.null_shares": ("icl_cmr.analyses.reproduce.null_shares",),
    "icl_cmr.analyses.recovery": ("icl_cmr.analyses.reproduce.recovery",),
    "icl_cmr.analyses.semantic_recovery": ("icl_cmr.analyses.reproduce.semantic_recovery",),
    "icl_cmr.analyses.model_comparison": ("icl_cmr.analyses.reproduce.model_comparison",),
    "icl_cmr.analyses.top_heads": ("icl_cmr.analyses.heads.top_heads",),
    "icl_cmr.analyses.first_presentation": ("icl_cmr.analyses.heads.first_presentation",),
    "icl_cmr.analyses.dynamics": ("icl_cmr.analyses.heads.dynamics",),
    "icl_cmr.analyses.llm_recall": ("icl_cmr.analyses.memory.llm_recall", "icl_cmr.analyses.causal.recall"),
    "icl_cmr.analyses.memory_battery": ("icl_cmr.analyses.memory.battery",),
    "icl_cmr.analyses.memory_effects": ("icl_cmr.analyses.memory.effects",),
})
