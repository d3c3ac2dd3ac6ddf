"""Figures of icl-cmr: functions that take datasets and return a matplotlib Figure.

Every function takes the datasets the toolkit makes (never file paths), checks their kind
(:class:`cmr.errors.SchemaError` otherwise), draws in the house style and returns a
:class:`matplotlib.figure.Figure` made without pyplot (nothing to close, no GUI backend, the
caller's rc parameters untouched). Save with :func:`save_figure`. Examples: docs/figures.md.

Style (:mod:`.style`)
    :func:`new_figure`, :func:`save_figure`, :func:`house_style`, :data:`PALETTE`
Free recall (:mod:`.recall`)
    :func:`lag_crp`, :func:`spc`, :func:`pfr`, :func:`recall_curves`
Organisation, intrusions and timing (:mod:`.organisation`)
    :func:`category_crp`, :func:`category_clustering`, :func:`distance_crp`, :func:`distance_rank`,
    :func:`distance_rank_shifted`, :func:`distance_rank_window`, :func:`input_crp`,
    :func:`pli_list_lag`, :func:`irt`, :func:`lag_crl`, :func:`stop_probability`, :func:`category_chance`
Repeated study items (:mod:`.repetition`)
    :func:`rep_crp`, :func:`neighbor_crp`, :func:`spacing_recall`, :func:`first_presentation_bias`
Heads on repeated words (:mod:`.first_presentation`)
    :func:`first_presentation_heads`
Attention heads (:mod:`.heads`)
    :func:`head_profiles`, :func:`attention_pattern`, :func:`distance_vs_induction`,
    :func:`share_cmr_like_by_depth`, :func:`soft_crp_vs_humans`
Fitted parameters (:mod:`.fits`)
    :func:`parameters_heads_vs_humans`, :func:`parameter_recovery`, :func:`subject_parameters`
CMR grids (:mod:`.grids`)
    :func:`grid_profiles`
Causal test (:mod:`.ablation`)
    :func:`ablation_result`
Composition (:mod:`.composition`)
    :func:`composition_matrix`, :func:`causal_composition`, :func:`composition_against_cmr`
Training dynamics (:mod:`.dynamics`)
    :func:`training_dynamics`
Comparing models (:mod:`.comparison`)
    :func:`model_comparison`, :func:`recall_cv`
Nulls of "CMR-like" (:mod:`.nulls`)
    :func:`profile_null`
CMR's states step by step (:mod:`.states`)
    :func:`cmr_states`, :func:`circuit_trace`
Posterior predictive check (:mod:`.predictive`)
    :func:`predictive_check`
The language model as a recall subject (:mod:`.llm_recall`)
    :func:`recall_vs_humans`, :func:`recall_ablation_effects`
The standard figure of any result (:mod:`.standard`, ``icl-cmr plot``)
    :func:`standard_figure`
"""
from .ablation import ablation_result
from .comparison import model_comparison, recall_cv
from .composition import causal_composition, composition_against_cmr, composition_matrix
from .dynamics import training_dynamics
from .first_presentation import first_presentation_heads
from .predictive import predictive_check
from .fits import parameter_recovery, parameters_heads_vs_humans, subject_parameters
from .grids import grid_profiles
from .llm_recall import recall_ablation_effects, recall_vs_humans
from .nulls import profile_null
from .heads import attention_pattern, distance_vs_induction, head_profiles, share_cmr_like_by_depth, soft_crp_vs_humans
from .organisation import (category_chance, category_clustering, category_crp, distance_crp, distance_rank, distance_rank_shifted,
                           distance_rank_window, input_crp, irt, lag_crl, pli_list_lag, stop_probability)
from .recall import lag_crp, pfr, recall_curves, spc
from .repetition import first_presentation_bias, neighbor_crp, rep_crp, spacing_recall
from .standard import standard_figure
from .states import circuit_trace, cmr_states
from .style import PALETTE, house_style, literal_unparsable_text, new_figure, plain_text, save_figure

__all__ = [
    # style
    "PALETTE",
    "house_style",
    "plain_text",
    "literal_unparsable_text",
    "new_figure",
    "save_figure",
    # free recall
    "lag_crp",
    "spc",
    "pfr",
    "recall_curves",
    # organisation, intrusions and timing
    "category_crp",
    "category_clustering",
    "distance_crp",
    "distance_rank",
    "distance_rank_shifted",
    "distance_rank_window",
    "input_crp",
    "pli_list_lag",
    "irt",
    "lag_crl",
    "stop_probability",
    "category_chance",
    # repeated study items
    "rep_crp",
    "neighbor_crp",
    "spacing_recall",
    "first_presentation_bias",
    # heads on repeated words
    "first_presentation_heads",
    # attention heads
    "head_profiles",
    "attention_pattern",
    "distance_vs_induction",
    "share_cmr_like_by_depth",
    "soft_crp_vs_humans",
    # fitted parameters
    "parameters_heads_vs_humans",
    "parameter_recovery",
    "subject_parameters",
    # CMR grids
    "grid_profiles",
    # causal test and training dynamics
    "ablation_result",
    # composition
    "composition_matrix",
    "causal_composition",
    "composition_against_cmr",
    "training_dynamics",
    # fitted CMR against the data
    "predictive_check",
    # the language model as a recall subject
    "recall_vs_humans",
    "recall_ablation_effects",
    # comparing models, nulls of CMR-like, CMR's states
    "model_comparison",
    "recall_cv",
    "profile_null",
    "cmr_states",
    "circuit_trace",
    # the standard figure of any result
    "standard_figure",
]
