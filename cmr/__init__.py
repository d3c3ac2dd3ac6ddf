"""cmr: the context maintenance and retrieval model (CMR) and free-recall analyses, in numba.

Standalone: imports numpy, numba, scipy, xarray and netCDF4 only (never torch,
transformer_lens or matplotlib). Import the module you need; nothing heavy happens at
package import.

Data model (docs/schema.md)
    :mod:`cmr.events`       psifr tables and recall matrices <-> events datasets
    :mod:`cmr.schema`       dataset kinds, validators, provenance attrs
    :mod:`cmr.io`           atomic netCDF save/load with schema checks
    :mod:`cmr.errors`       the typed exception hierarchy

Free-recall analyses (exact against psifr)
    :mod:`cmr.lag_crp`      lag-CRP with counts, per subject / list / pooled, any lag window
    :mod:`cmr.recall_stats` serial position curve, PFR/PNR, compound lag-CRP, lag rank

CMR (docs/equations.md, docs/parameters.md)
    :mod:`cmr.parameters`   textbook CMR parameters (cymr's names), bounds, validation
    :mod:`cmr.likelihood`   log-likelihood of recall sequences (exact against cymr)
    :mod:`cmr.simulate`     seeded free-recall simulation -> psifr table
    :mod:`cmr.fit_recall`   per-subject maximum likelihood (differential evolution + polish)
    :mod:`cmr.paper_variant` the simplified CMR of Ji-An et al. (2024), Monte Carlo
    :mod:`cmr.profiles`     CMR lag-profile grids: Monte Carlo and teacher-forced
    :mod:`cmr.profile_fit`  one fit for any lag profile (heads or humans): paper / lsq + Gaussian
"""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("icl-cmr")
except _metadata.PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

__all__ = [
    "errors", "schema", "io", "events", "lag_crp", "recall_stats", "parameters", "likelihood",
    "simulate", "fit_recall", "paper_variant", "profiles", "profile_fit",
]
