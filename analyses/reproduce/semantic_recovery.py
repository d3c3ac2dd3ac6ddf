"""Parameter recovery of semantic CMR: simulate Morton2013 subjects from known weights, fit them back.

Run: ``icl-cmr reproduce semantic-recovery [--sets 12] [--jobs 2] [-o OUT.nc]``.
Each simulated subject replays the 48 study lists of one psifr:Morton2013 subject (real items,
so semantic similarities matter) with parameters drawn from typical ranges; the same free
parameters are fitted back. Prints one JSON line with the correlations of true and recovered
values and writes the recall_fit dataset (with ``true_value`` and ``correlation``).
"""
from __future__ import annotations

from pathlib import Path

import xarray as xr

import cmr
from cmr.io import save_dataset
from ...adapters.item_pools import load_item_patterns
from ...adapters.recall_data import load_recall_data

FREE = ("B_enc", "B_rec", "T", "Scf", "Sff")
FIXED = dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)
RANGES = dict(B_enc=(0.4, 0.9), B_rec=(0.4, 0.95), T=(0.05, 0.3), Scf=(0.0, 0.3), Sff=(0.0, 2.0))


def recover_semantic(*, sets: int = 12, rng=0, n_jobs: int = 2, output: str | Path | None = None) -> xr.Dataset:
    """Parameter recovery of semantic CMR on the study lists of psifr:Morton2013.

    Simulated subject i replays the study lists of the data set's subject ``i mod S`` with the
    free parameters :data:`FREE` drawn inside :data:`RANGES` (the others fixed at :data:`FIXED`);
    the same parameters are fitted back.

    Parameters
    ----------
    sets : int, default 12
        Simulated subjects (parameter sets); a correlation needs at least two.
    rng : int or numpy.random.Generator, default 0
        Seed of the true values, simulations and fits.
    n_jobs : int, default 2
        Subjects fitted in parallel threads.
    output : path, optional
        Also write the dataset here (netCDF, atomically).

    Returns
    -------
    xarray.Dataset
        The ``recall_fit`` dataset with ``true_value`` and ``correlation`` (:func:`cmr.parameter_recovery`).
    """
    events = load_recall_data("psifr:Morton2013")
    patterns = load_item_patterns("psifr:Morton2013", categories=False)
    fits = cmr.parameter_recovery(sets, cmr.FitSpec(FREE, FIXED, patterns=patterns), ranges=RANGES,
                                  events=events, rng=rng, n_jobs=n_jobs, progress=False)
    if output is not None:
        save_dataset(fits, output)
    return fits


def correlations(fits: xr.Dataset) -> dict[str, float]:
    """Correlation of true and recovered values of each parameter of :data:`FREE`, to 3 decimals."""
    return {name: round(float(fits["correlation"].sel(parameter=name)), 3) for name in FREE}
