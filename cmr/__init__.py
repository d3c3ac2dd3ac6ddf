"""cmr: the context maintenance and retrieval model (CMR) and free-recall analyses, in numba.

Every public function is here by its concept name, psifr-style::

    import cmr
    events = cmr.from_table(table)          # or any analysis straight on the DataFrame
    crp = cmr.lag_crp(events)               # counts, profile (psifr's prob) and SEM per subject
    fits = cmr.fit_recall(events, cmr.FitSpec(["B_enc", "B_rec", "T"]))

Standalone: imports numpy, numba, scipy, pandas, xarray and netCDF4 only (never torch,
transformer_lens or matplotlib). Where things live (for reading the source):

* data model: :mod:`cmr.events` (psifr tables, recall matrices), :mod:`cmr.schema`,
  :mod:`cmr.io`, :mod:`cmr.tables`, :mod:`cmr.errors`, :mod:`cmr.constants`; the checks of
  function arguments every layer shares (integers, probabilities, lag windows, seeds):
  :mod:`cmr.checks`;
* lists with repeated study items and their analyses (after jaxcmr): :mod:`cmr.repetition`,
  :mod:`cmr.designs`;
* free-recall analyses, exact against psifr: :mod:`cmr.crp`, :mod:`cmr.recall_stats`,
  :mod:`cmr.category`, :mod:`cmr.distance`, :mod:`cmr.intrusions` (psifr's masks in
  :mod:`cmr.masks`); beyond psifr, :mod:`cmr.timing`; several at once,
  :mod:`cmr.analysis_set`; lab exports read by :mod:`cmr.lab_tables`;
* textbook CMR (localist, semantic, category), exact against cymr: :mod:`cmr.textbook`;
* the simplified CMR of Ji-An et al. (2024): :mod:`cmr.paper`;
* lag-profile grids of either variant: :mod:`cmr.grids`;
* one fit for any lag profile (heads or humans): :mod:`cmr.profile_fit`; AIC and BIC of any
  fit: :mod:`cmr.criteria`;
* CMR built as a two-layer attention circuit: :mod:`cmr.circuit`;
* adjusted p-values of a family of tests (Holm, Benjamini-Hochberg): :mod:`cmr.multiple_comparisons`;
* property testing of any CMR model or port: :mod:`cmr.testing` (imported on its own, not
  by ``import cmr``; its strategies need hypothesis).
"""
from importlib import metadata as _metadata

from . import _numba_cache

_numba_cache.ensure_cache_location()  # before any kernel is defined: a read-only install still imports

from . import checks as checks  # noqa: E402
from . import errors as errors  # noqa: E402
from . import files as files  # noqa: E402
from .constants import CMR_LIKE_DISTANCE as CMR_LIKE_DISTANCE
from .constants import STRICT_FORWARD_EFFECT as STRICT_FORWARD_EFFECT
from .constants import STRICT_MASS_RATIO as STRICT_MASS_RATIO
from .constants import PAPER_LAGS as PAPER_LAGS
from .constants import RECALL_LAGS as RECALL_LAGS
from .crp import lag_counts as lag_counts
from .crp import lag_crp as lag_crp
from .analysis_set import analyses_table as analyses_table
from .analysis_set import run_analyses as run_analyses
from .category import category_clustering as category_clustering
from .category import category_crp as category_crp
from .crp import input_crp as input_crp
from .distance import distance_crp as distance_crp
from .distance import distance_rank as distance_rank
from .distance import distance_rank_shifted as distance_rank_shifted
from .distance import distance_rank_window as distance_rank_window
from .distance import distance_rank_window_asym as distance_rank_window_asym
from .crp import lag_crp_compound as lag_crp_compound
from .events import from_recall_matrix as from_recall_matrix
from .intrusions import intrusion_rates as intrusion_rates
from .intrusions import pli_list_lag as pli_list_lag
from .events import from_table as from_table
from .ordering import study_order as study_order
from .events import to_recall_matrix as to_recall_matrix
from .events import to_table as to_table
from .grids import cut_lag_window as cut_lag_window
from .grids import paper_lag_distribution as paper_lag_distribution
from .grids import paper_grid_axes as paper_grid_axes
from .grids import paper_mc_grid as paper_mc_grid
from .grids import paper_teacher_forced_grid as paper_teacher_forced_grid
from .grids import textbook_teacher_forced_grid as textbook_teacher_forced_grid
from .checks import lag_window as lag_window
from .circuit import CIRCUIT_VARIANTS as CIRCUIT_VARIANTS
from .criteria import aic_bic as aic_bic
from .criteria import least_squares_logl as least_squares_logl
from .circuit import attention_circuit as attention_circuit
from .io import load_dataset as load_dataset
from .io import save_dataset as save_dataset
from .io import write_result as write_result
from .paper import simulate_paper_free_recall as simulate_paper_free_recall
from .paper import simulate_paper_recalls as simulate_paper_recalls
from .profile_fit import ProfileWarning as ProfileWarning
from .profile_fit import fit_profiles as fit_profiles
from .profile_fit import fitting_lags as fitting_lags
from .null_models import cmr_like_null as cmr_like_null
from .multiple_comparisons import benjamini_hochberg as benjamini_hochberg
from .multiple_comparisons import holm as holm
from .beta_scales import context_decay as context_decay
from .beta_scales import textbook_beta as textbook_beta
from .beta_scales import paper_beta as paper_beta
from .beta_scales import recall_drift as recall_drift
from .beta_scales import textbook_beta_rec as textbook_beta_rec
from .null_models import profile_roughness as profile_roughness
from .null_models import structureless_profiles as structureless_profiles
from .cmr_like import forward_effect as forward_effect
from .cmr_like import mirrored_profiles as mirrored_profiles
from .cmr_like import uniform_attention_prob as uniform_attention_prob
from .recall_stats import lag_rank as lag_rank
from .recall_stats import pfr as pfr
from .recall_stats import pnr as pnr
from .recall_stats import spc as spc
from .repetition import first_presentation_bias as first_presentation_bias
from .repetition import from_presentations as from_presentations
from .repetition import neighbor_crp as neighbor_crp
from .repetition import presentation_items as presentation_items
from .repetition import rep_crp as rep_crp
from .repetition import shuffled_control as shuffled_control
from .repetition import spacing_recall as spacing_recall
from .designs import repetition_design as repetition_design
from .schema import validate as validate
from .tables import to_dataframe as to_dataframe
from .tables import unit_table as unit_table
from .timing import irt as irt
from .timing import lag_crl as lag_crl
from .timing import stop_probability as stop_probability
from .cmr2 import CMR2_PARAMETER_NAMES as CMR2_PARAMETER_NAMES
from .cmr2 import default_cmr2_parameters as default_cmr2_parameters
from .cmr2 import log_likelihood as cmr2_log_likelihood
from .cmr2 import simulate_sessions as simulate_cmr2
from .cmr2 import simulate_experiment as simulate_cmr2_experiment
from .cmr2 import CMR2FitSpec as CMR2FitSpec
from .cmr2 import fit_cmr2 as fit_cmr2
from .textbook import MODEL_PARAMETER_NAMES as MODEL_PARAMETER_NAMES
from .textbook import PARAMETER_NAMES as PARAMETER_NAMES
from .textbook import SEMANTIC_PARAMETER_NAMES as SEMANTIC_PARAMETER_NAMES
from .textbook import STANDARD_FREE as STANDARD_FREE
from .textbook import FitSpec as FitSpec
from .textbook import ItemPatterns as ItemPatterns
from .textbook import category_features as category_features
from .textbook import compare_models as compare_models
from .model_comparison import COMPARISON_MODELS as COMPARISON_MODELS
from .model_comparison import NESTED_MODELS as NESTED_MODELS
from .model_comparison import compare_recall_models as compare_recall_models
from .model_comparison import comparison_spec as comparison_spec
from .model_comparison import fit_models as fit_models
from .textbook import cross_validate as cross_validate
from .textbook import default_parameters as default_parameters
from .textbook import fit_recall as fit_recall
from .hierarchical import fit_population as fit_population
from .hierarchical import population_recovery as population_recovery
from .textbook import item_patterns as item_patterns
from .textbook import log_likelihood as log_likelihood
from .textbook import parameter_recovery as parameter_recovery
from .textbook import posterior_predictive as posterior_predictive
from .textbook import read_parameters as read_parameters
from .textbook import record_states as record_states
from .network import NetworkConfig as NetworkConfig
from .network import NetworkFitSpec as NetworkFitSpec
from .network import fit_network as fit_network
from .network import read_network as read_network
from .network import network_log_likelihood as network_log_likelihood
from .network import simulate_network as simulate_network
from .network import record_network as record_network
from .network import save_patterns as save_patterns
from .network import load_patterns as load_patterns
from .textbook import similarity_from_distances as similarity_from_distances
from .textbook import simulate_experiment as simulate_experiment
from .textbook import simulate_free_recall as simulate_free_recall
from .textbook import simulate_recalls as simulate_recalls
from .textbook import validate_parameters as validate_parameters

# deprecated names, kept for one release (not in __all__; each warns and names its replacement)
from .beta_scales import variant_beta as variant_beta
from .grids import paper_crp as paper_crp
from .profile_fit import information_criteria as information_criteria

try:
    __version__ = _metadata.version("icl-cmr")
except _metadata.PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

__all__ = [
    # data model
    "from_table",
    "to_table",
    "from_recall_matrix",
    "to_recall_matrix",
    "study_order",
    "validate",
    "lag_window",
    "save_dataset",
    "load_dataset",
    "write_result",
    "unit_table",
    "to_dataframe",
    "errors",
    "checks",
    "files",
    # free-recall analyses
    "lag_crp",
    "lag_counts",
    "lag_crp_compound",
    "input_crp",
    "category_crp",
    "category_clustering",
    "distance_crp",
    "distance_rank",
    "distance_rank_shifted",
    "distance_rank_window",
    "distance_rank_window_asym",
    "pli_list_lag",
    "intrusion_rates",
    "irt",
    "lag_crl",
    "stop_probability",
    "run_analyses",
    "analyses_table",
    "lag_rank",
    "spc",
    "pnr",
    "pfr",
    # lists with repeated study items
    "presentation_items",
    "from_presentations",
    "rep_crp",
    "neighbor_crp",
    "shuffled_control",
    "spacing_recall",
    "first_presentation_bias",
    "repetition_design",
    # textbook CMR
    "PARAMETER_NAMES",
    "SEMANTIC_PARAMETER_NAMES",
    "MODEL_PARAMETER_NAMES",
    "STANDARD_FREE",
    "default_parameters",
    "validate_parameters",
    "read_parameters",
    "item_patterns",
    "ItemPatterns",
    "similarity_from_distances",
    "category_features",
    "log_likelihood",
    "simulate_recalls",
    "simulate_free_recall",
    "simulate_experiment",
    "record_states",
    "FitSpec",
    "fit_recall",
    "parameter_recovery",
    "cross_validate",
    "compare_models",
    "COMPARISON_MODELS",
    "NESTED_MODELS",
    "comparison_spec",
    "fit_models",
    "compare_recall_models",
    "posterior_predictive",
    # the paper's variant and lag-profile grids
    "simulate_paper_recalls",
    "simulate_paper_free_recall",
    "paper_grid_axes",
    "paper_mc_grid",
    "paper_teacher_forced_grid",
    "textbook_teacher_forced_grid",
    "paper_lag_distribution",
    "cut_lag_window",
    # CMR as an attention circuit
    "attention_circuit",
    "CIRCUIT_VARIANTS",
    # fitting lag profiles
    "fit_profiles",
    "fitting_lags",
    "ProfileWarning",
    # AIC and BIC of any fit (likelihood or least squares)
    "aic_bic",
    "least_squares_logl",
    # adjusted p-values of a family of tests
    "holm",
    "benjamini_hochberg",
    # nulls for "CMR-like"
    "cmr_like_null",
    "profile_roughness",
    "structureless_profiles",
    # the strict definition of CMR-like (docs/null-models.md)
    "uniform_attention_prob",
    "forward_effect",
    "mirrored_profiles",
    # one beta scale for both models (decay-matched)
    "textbook_beta",
    "paper_beta",
    "fit_population",
    "population_recovery",
    # general CMR networks, cymr's features (docs/cmr-features.md)
    "NetworkConfig",
    "NetworkFitSpec",
    "fit_network",
    "read_network",
    "network_log_likelihood",
    "simulate_network",
    "record_network",
    "save_patterns",
    "load_patterns",
    # CMR2: sessions of lists, prior-list intrusions (docs/cmr2.md)
    "CMR2_PARAMETER_NAMES",
    "default_cmr2_parameters",
    "cmr2_log_likelihood",
    "simulate_cmr2",
    "simulate_cmr2_experiment",
    "CMR2FitSpec",
    "fit_cmr2",
    "textbook_beta_rec",
    "recall_drift",
    "context_decay",
    # constants
    "CMR_LIKE_DISTANCE",
    "STRICT_MASS_RATIO",
    "STRICT_FORWARD_EFFECT",
    "PAPER_LAGS",
    "RECALL_LAGS",
]
