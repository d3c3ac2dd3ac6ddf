"""Adapters: turn outside things into cmr's data model (events and lag-profile datasets).

- :mod:`icl_cmr.adapters.recall_data` - human free-recall data: bundled data sets read from the
  installed psifr / cymr packages (``psifr:Morton2013``, ``psifr:peers_notask``,
  ``cymr:Morton2013_mixed``), psifr-format CSV files and DataFrames -> events datasets.
- The language-model side (attention heads via TransformerLens, prompts, text corpora) and the
  published tables of Ji-An et al. (2024) live in their own modules here; only one module
  touches torch/TransformerLens.

Nothing is imported at package import time; import the submodule you need.
"""
