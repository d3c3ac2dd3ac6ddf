"""analyses: the studies built on cmr and adapters (head scans, fits, ablation, training
dynamics, figures, reports) and the ``icl-cmr`` command line. Plotting lives only here;
nothing imports from this package."""
from cmr._deprecate import alias_moved_modules

# modules that moved into causal/: importable under the old names for one release, with a warning
alias_moved_modules({
    "icl_cmr.analyses.ablation": ("icl_cmr.analyses.causal.ablation",),
    "icl_cmr.analyses.ablation_measures": ("icl_cmr.analyses.causal.measures",),
    "icl_cmr.analyses.ablation_power": ("icl_cmr.analyses.causal.power",),
    "icl_cmr.analyses.ablation_stats": ("icl_cmr.analyses.causal.statistics",),
})
