"""The causal test: ablate the top CMR-like heads and random head sets of the same size and
compare what each does to in-context learning (docs/ablation.md).

* :mod:`.ablation`    head sets, the ICL score, :func:`~.ablation.run_ablation`, the ``ablation`` dataset
* :mod:`.measures`    measures beside the ICL score (wide windows, bigram completion, repeated tokens)
* :mod:`.statistics`  rank p-values and z among random sets, the crossed contrast, paired tests, Holm
* :mod:`.power`       power of the rank and paired tests, the design presets
* :mod:`.recall`  head sets ablated during the model's own free recall, paired over lists

Every torch call of the test lives in :mod:`icl_cmr.adapters.lm.ablation_engine`.
"""
