"""Parameter recovery of textbook CMR fits: simulate from known parameters, fit, compare.

Run: ``icl-cmr reproduce recovery [--sets 24] [--jobs 2] [--free B_enc,B_rec,...] [-o OUT.nc]``.
Writes the recall_fit dataset with ``true_value`` and ``correlation``, a figure (``--figure``;
by default the output's name with ``.png``) and prints one JSON summary line.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import xarray as xr

from cmr.errors import ParameterError
from cmr.io import save_dataset
from cmr.textbook.fit import parameter_recovery
from cmr.textbook.spec import FitSpec
from .. import plots

RECOVERY_FIXED = dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)
# true values are drawn from ranges typical of fits to human free recall (Morton & Polyn
# 2016; cymr's Morton2013 example): data simulated from, e.g., X2 = 1.5 stop after 2-3
# recalls and carry almost no information about the other parameters
RECOVERY_RANGES = dict(
    Lfc=(0.1, 0.9), Lcf=(0.1, 0.9), P1=(0.5, 8.0), P2=(0.5, 4.0), B_enc=(0.3, 0.9),
    B_start=(0.1, 0.9), B_rec=(0.3, 0.95), T=(0.05, 0.3), X1=(0.001, 0.05), X2=(0.1, 0.4),
)


#: the free parameters by default: the ten of Morton & Polyn (2016)
FREE = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2")


def recover_parameters(*, sets: int = 24, lists: int = 48, list_length: int = 24, free: Sequence[str] = FREE,
                       rng=0, n_jobs: int = 2, output: str | Path | None = None,
                       figure: str | Path | None = None) -> xr.Dataset:
    """Parameter recovery of textbook CMR: simulate from known parameters, fit them back.

    True values are drawn uniformly inside :data:`RECOVERY_RANGES`; the parameters not in ``free``
    are fixed at their defaults (:data:`RECOVERY_FIXED`: Afc = Acf = 0, Dfc = Dcf = 0.85).

    Parameters
    ----------
    sets : int, default 24
        Simulated parameter sets (subjects); a correlation needs at least two.
    lists : int, default 48
        Lists per simulated subject.
    list_length : int, default 24
        Items per list.
    free : sequence of str, default :data:`FREE`
        Free parameters, each a key of :data:`RECOVERY_RANGES`.
    rng : int or numpy.random.Generator, default 0
        Seed of the true values, simulations and fits.
    n_jobs : int, default 2
        Subjects fitted in parallel threads.
    output : path, optional
        Also write the dataset here (netCDF, atomically).
    figure : path, optional
        Also draw true against recovered values here (.png).

    Returns
    -------
    xarray.Dataset
        The ``recall_fit`` dataset with ``true_value`` and ``correlation`` (:func:`cmr.parameter_recovery`).

    Raises
    ------
    ParameterError
        An unknown or repeated free parameter, no free parameter, or a figure that is not a .png file.
    """
    free = [str(name) for name in ([free] if isinstance(free, str) else free)]
    unknown = [name for name in free if name not in RECOVERY_RANGES]
    if unknown or not free or len(set(free)) < len(free):
        raise ParameterError(f"free takes one or more of {', '.join(RECOVERY_RANGES)}, each once; got {free!r}")
    if figure is not None and Path(figure).suffix.lower() != ".png":
        raise ParameterError(f"figure must be a .png file; got {str(figure)!r}")
    fits = parameter_recovery(
        sets, FitSpec(free, RECOVERY_FIXED), ranges={name: RECOVERY_RANGES[name] for name in free},
        list_length=list_length, n_lists=lists, rng=rng, n_jobs=n_jobs,
    )
    if output is not None:
        save_dataset(fits, output)
    if figure is not None:
        plots.save_figure(plots.parameter_recovery(fits), figure)
    return fits


def correlations(fits: xr.Dataset) -> dict[str, float]:
    """Correlation of true and recovered values of each free parameter of a recovery, to 4 decimals."""
    return {str(p): round(float(r), 4) for p, r, f in
            zip(fits["parameter"].values, fits["correlation"].values, fits["free"].values) if f}
