"""Language models: every call into torch, transformers and TransformerLens lives in this folder.

- :mod:`~icl_cmr.adapters.lm.loading` - models offline (the embedded SmolLM2, local Hugging Face
  directories, TransformerLens names, tiny test models), devices, dtypes, threads, peak memory;
  model names, cache locations and offline mode in ``_model_files`` (no torch).
- :mod:`~icl_cmr.adapters.lm.extraction` - prompts, hooked attention passes, lag profiles and
  head scores of every head, OV copying scores.
- :mod:`~icl_cmr.adapters.lm.interventions` - head ablation (zero, mean) for the causal test,
  and the plain copy of a model that ablation and generation run on.
- :mod:`~icl_cmr.adapters.lm.composition`, :mod:`~icl_cmr.adapters.lm.causal_composition` -
  Q-, K- and V-composition scores from the weights and the causal path-ablation test.
- :mod:`~icl_cmr.adapters.lm.toy_model` - the small models trained offline (training dynamics,
  composition circuits).
- :mod:`~icl_cmr.adapters.lm.recall_task` - the model as a free-recall subject.

torch and the model libraries are imported inside functions, so importing any of these modules
is cheap. The numpy-only parts (lag statistics of attention, prompts, recall text) stay one
folder up.
"""
