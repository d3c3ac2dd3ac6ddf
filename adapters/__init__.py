"""Adapters: turn outside things into cmr's data model (events and lag-profile datasets).

- :mod:`icl_cmr.adapters.recall_data` - human free-recall data: bundled data sets read from the
  installed psifr / cymr packages (``psifr:Morton2013``, ``psifr:peers_notask``,
  ``cymr:Morton2013_mixed``), psifr-format CSV files and DataFrames -> events datasets.
- :mod:`icl_cmr.adapters.lm` - everything that calls torch, transformers or TransformerLens:
  loading models, attention extraction, interventions, composition, toy models, the recall task.
- The numpy-only side of language models (lag statistics of attention, prompts, recall text,
  text corpora) and the published tables of Ji-An et al. (2024) live in their own modules here.

Nothing heavy is imported at package import time; import the submodule you need.
"""
from cmr.deprecation import alias_moved_modules

# modules that moved into lm/: importable under the old names for one release, with a warning
alias_moved_modules({
    "icl_cmr.adapters.transformer_lens": ("icl_cmr.adapters.lm.loading", "icl_cmr.adapters.lm.extraction"),
    "icl_cmr.adapters.interventions": ("icl_cmr.adapters.lm.interventions", "icl_cmr.adapters.lm.ablation_engine"),
    "icl_cmr.adapters.composition": ("icl_cmr.adapters.lm.composition",),
    "icl_cmr.adapters.causal_composition": ("icl_cmr.adapters.lm.causal_composition",),
    "icl_cmr.adapters.toy_model": ("icl_cmr.adapters.lm.toy_model",),
    "icl_cmr.adapters.free_recall_task": ("icl_cmr.adapters.lm.recall_task",),
})
