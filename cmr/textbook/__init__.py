"""Textbook localist CMR (Polyn, Norman & Kahana 2009; Morton & Polyn 2016), exact against cymr.

* :mod:`cmr.textbook.parameters`  parameters in cymr's names, bounds, defaults
* :mod:`cmr.textbook.likelihood`  log-likelihood of recall sequences
* :mod:`cmr.textbook.simulate`    seeded free-recall simulation
* :mod:`cmr.textbook.fit`         per-subject maximum likelihood and parameter recovery

Teacher-forced lag profiles of textbook CMR are in :mod:`cmr.grids`. See docs/equations.md.
"""
from .fit import STANDARD_FREE as STANDARD_FREE
from .fit import fit_recall as fit_recall
from .fit import parameter_recovery as parameter_recovery
from .likelihood import log_likelihood as log_likelihood
from .parameters import PARAMETER_NAMES as PARAMETER_NAMES
from .parameters import PARAMETER_SPECS as PARAMETER_SPECS
from .parameters import default_parameters as default_parameters
from .parameters import fit_bounds as fit_bounds
from .parameters import validate_parameters as validate_parameters
from .simulate import simulate_free_recall as simulate_free_recall
from .simulate import simulate_recalls as simulate_recalls

__all__ = [
    "STANDARD_FREE",
    "PARAMETER_NAMES",
    "PARAMETER_SPECS",
    "default_parameters",
    "validate_parameters",
    "fit_bounds",
    "log_likelihood",
    "simulate_recalls",
    "simulate_free_recall",
    "fit_recall",
    "parameter_recovery",
]
