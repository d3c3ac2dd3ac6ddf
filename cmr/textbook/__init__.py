"""Textbook CMR (Polyn, Norman & Kahana 2009; Morton & Polyn 2016), exact against cymr.

* :mod:`cmr.textbook.parameters`      parameters in cymr's names, bounds, defaults
* :mod:`cmr.textbook.patterns`        item pools, similarities and features (semantic CMR)
* :mod:`cmr.textbook.parameter_sets`  one set, one per subject, or a fit
* :mod:`cmr.textbook.likelihood`      log-likelihood of recall sequences
* :mod:`cmr.textbook.simulate`        seeded free-recall simulation, replay of the data's lists
* :mod:`cmr.textbook.record`          context states and supports, step by step
* :mod:`cmr.textbook.tied`            tied (dependent) parameters, parsed safely
* :mod:`cmr.textbook.spec`            what a fit estimates (FitSpec), shared by the fitters
* :mod:`cmr.textbook.fit`             maximum likelihood per subject or pooled, restarts, recovery
* :mod:`cmr.textbook.crossval`        leave-lists-out cross-validated likelihood
* :mod:`cmr.textbook.compare`         model comparison across variants
* :mod:`cmr.textbook.predictive`      posterior predictive checks

Teacher-forced lag profiles of textbook CMR are in :mod:`cmr.grids`. See docs/equations.md
and docs/semantic-cmr.md.

The family's verbs, the same in :mod:`cmr.cmr2` and :mod:`cmr.network` (docs/model-zoo.md,
"Model families"): ``default_parameters()``, ``log_likelihood(events, params)``,
``simulate(events, params)`` (:func:`simulate_experiment`: the data's lists replayed),
``fit(events, spec)`` (:func:`fit_recall`) and ``Spec`` (:class:`FitSpec`). The names ``fit``
and ``simulate`` are these functions; their modules are imported by their full names
(``from cmr.textbook.fit import unit_seeds``).
"""
from .compare import compare_models as compare_models
from .crossval import cross_validate as cross_validate
from .fit import fit_recall as fit_recall
from .fit import parameter_recovery as parameter_recovery
from .likelihood import log_likelihood as log_likelihood
from .parameters import MODEL_PARAMETER_NAMES as MODEL_PARAMETER_NAMES
from .parameters import PARAMETER_NAMES as PARAMETER_NAMES
from .parameters import PARAMETER_SPECS as PARAMETER_SPECS
from .parameters import SEMANTIC_PARAMETER_NAMES as SEMANTIC_PARAMETER_NAMES
from .parameters import default_parameters as default_parameters
from .parameters import fit_bounds as fit_bounds
from .parameters import read_parameters as read_parameters
from .parameters import validate_parameters as validate_parameters
from .patterns import ItemPatterns as ItemPatterns
from .patterns import category_features as category_features
from .patterns import item_patterns as item_patterns
from .patterns import similarity_from_distances as similarity_from_distances
from .predictive import posterior_predictive as posterior_predictive
from .record import record_states as record_states
from .simulate import simulate_experiment as simulate_experiment
from .simulate import simulate_free_recall as simulate_free_recall
from .simulate import simulate_recalls as simulate_recalls
from .spec import STANDARD_FREE as STANDARD_FREE
from .spec import FitSpec as FitSpec

# the family's verbs (after the imports above: ``fit`` and ``simulate`` are the functions, not the modules)
Spec = FitSpec
fit = fit_recall
simulate = simulate_experiment

__all__ = [
    "Spec",
    "fit",
    "simulate",
    "STANDARD_FREE",
    "PARAMETER_NAMES",
    "SEMANTIC_PARAMETER_NAMES",
    "MODEL_PARAMETER_NAMES",
    "PARAMETER_SPECS",
    "default_parameters",
    "validate_parameters",
    "read_parameters",
    "fit_bounds",
    "ItemPatterns",
    "item_patterns",
    "similarity_from_distances",
    "category_features",
    "log_likelihood",
    "simulate_recalls",
    "simulate_free_recall",
    "simulate_experiment",
    "FitSpec",
    "fit_recall",
    "parameter_recovery",
    "cross_validate",
    "compare_models",
    "posterior_predictive",
    "record_states",
]
