"""CMR2 (Lohnas, Polyn & Kahana 2015): CMR over whole sessions, with prior-list intrusions.

* :mod:`cmr.cmr2.parameters`  textbook CMR's 14 parameters plus ``B_distract`` and ``C_thresh``
* :mod:`cmr.cmr2.likelihood`  log-likelihood of multi-list sessions (Luce choice, editing rule)
* :mod:`cmr.cmr2.simulate`    seeded simulation of new sessions, or of the data's own, as a psifr table
* :mod:`cmr.cmr2.fit`         maximum-likelihood fits per subject or pooled (textbook CMR's search)

Kernels in ``_kernels.py``, events to sessions in ``_sessions.py``. See docs/cmr2.md.

The family's verbs, as in :mod:`cmr.textbook`: ``default_parameters()``
(:func:`default_cmr2_parameters`), ``log_likelihood(events, params)``,
``simulate(events, params)`` (:func:`simulate_experiment`: the data's sessions replayed),
``fit(events, spec)`` (:func:`fit_cmr2`) and ``Spec`` (:class:`CMR2FitSpec`). ``fit`` and
``simulate`` are these functions; their modules are imported by their full names.
"""
from .fit import CMR2_STANDARD_FREE as CMR2_STANDARD_FREE
from .fit import CMR2FitSpec as CMR2FitSpec
from .fit import fit_cmr2 as fit_cmr2
from .likelihood import log_likelihood as log_likelihood
from .parameters import CMR2_PARAMETER_NAMES as CMR2_PARAMETER_NAMES
from .parameters import default_cmr2_parameters as default_cmr2_parameters
from .parameters import validate_cmr2_parameters as validate_cmr2_parameters
from .simulate import simulate_experiment as simulate_experiment
from .simulate import simulate_sessions as simulate_sessions

# the family's verbs (after the imports above: ``fit`` and ``simulate`` are the functions, not the modules)
Spec = CMR2FitSpec
default_parameters = default_cmr2_parameters
fit = fit_cmr2
simulate = simulate_experiment

__all__ = ["Spec", "default_parameters", "fit", "simulate", "CMR2_PARAMETER_NAMES", "default_cmr2_parameters", "validate_cmr2_parameters", "log_likelihood",
           "simulate_sessions", "simulate_experiment", "CMR2FitSpec", "CMR2_STANDARD_FREE", "fit_cmr2"]
