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
"""
from .config import NetworkConfig as NetworkConfig
from .config import read_network as read_network
from .fit import NetworkFitSpec as NetworkFitSpec
from .fit import fit_network as fit_network
from .model import network_log_likelihood as network_log_likelihood
from .model import record_network as record_network
from .model import simulate_network as simulate_network
from .pattern_files import load_patterns as load_patterns
from .pattern_files import save_patterns as save_patterns

__all__ = ["NetworkConfig", "read_network", "NetworkFitSpec", "fit_network", "network_log_likelihood", "simulate_network", "record_network", "save_patterns",
           "load_patterns"]
