"""General CMR networks, exact against cymr's ``CMR``: context sublayers with their own parameters,
weight expressions over item patterns, dependent and dynamic parameters, distraction units and
retention intervals, recall from the whole pool, recorded states, and cymr's pattern files.

* :mod:`cmr.network.config`         NetworkConfig: sublayers, weights, sublayer/dependent/dynamic
  parameters; read_network reads cymr's configuration files
* :mod:`cmr.network.model`          log-likelihood, simulation and recorded states
* :mod:`cmr.network.fit`            what a fit estimates (NetworkFitSpec), maximum-likelihood fits per
  subject or pooled
* :mod:`cmr.network.pattern_files`  save_patterns / load_patterns (cymr's HDF5 layout)

The textbook and semantic models of :mod:`cmr.textbook` are special cases with faster kernels.
See docs/cmr-features.md.

The family's verbs, as in :mod:`cmr.textbook`: ``default_parameters()`` (the parameters every
network needs and the localist weight parameters, at textbook CMR's defaults),
``log_likelihood(data, params, config=, patterns=)`` (:func:`network_log_likelihood`),
``simulate(data, params, config=, patterns=)`` (:func:`simulate_network`), ``fit(data, spec)``
(:func:`fit_network`) and ``Spec`` (:class:`NetworkFitSpec`). ``fit`` is the function; its
module is imported by its full name.
"""
from .config import NetworkConfig as NetworkConfig
from .config import default_parameters as default_parameters
from .config import read_network as read_network
from .fit import NetworkFitSpec as NetworkFitSpec
from .fit import fit_network as fit_network
from .model import network_log_likelihood as network_log_likelihood
from .model import record_network as record_network
from .model import simulate_network as simulate_network
from .pattern_files import load_patterns as load_patterns
from .pattern_files import save_patterns as save_patterns

# the family's verbs (after the imports above: ``fit`` is the function, not the module)
Spec = NetworkFitSpec
fit = fit_network
log_likelihood = network_log_likelihood
simulate = simulate_network

__all__ = ["Spec", "default_parameters", "fit", "log_likelihood", "simulate", "NetworkConfig", "read_network", "NetworkFitSpec", "fit_network", "network_log_likelihood", "simulate_network", "record_network", "save_patterns",
           "load_patterns"]
