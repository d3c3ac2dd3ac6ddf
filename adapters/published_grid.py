"""The study's saved CMR lag-distribution grid as a ``lag_profile`` dataset.

Ji-An, Zhou, Benna & Mattar (NeurIPS 2024) simulated their simplified CMR by Monte
Carlo on a grid of (beta_enc, beta_rec, gamma) and saved the lag distributions; the reference
export ``cmr_crp_grid.npz`` holds ``crp[beta_enc, beta_rec, gamma_ft, lag]`` (20 x 21 x 11 x 17),
``sem`` (SEM over the 20 recall start positions) and the axis values.

:func:`load_grid` is the grid a profile fit uses: a grid file, by default this published grid.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from cmr.errors import DataSourceError, FileFormatError
from cmr.files import read_arrays
from cmr.io import load_dataset
from cmr.schema import provenance_attrs, validate

from .published import file_provenance, published_file

__all__ = ["load_published_grid", "load_grid", "PARAMETER_DIMS"]

#: the grid's parameter dims, in the order of the npz axes
PARAMETER_DIMS = ("beta_enc", "beta_rec", "gamma")

_NPZ_AXES = {"beta_enc": "beta_enc", "beta_rec": "beta_rec", "gamma": "gamma_ft"}


def load_published_grid(path=None) -> xr.Dataset:
    """Load the study's CMR grid (``cmr_crp_grid.npz``) as a ``lag_profile`` dataset.

    Parameters
    ----------
    path : str or Path, optional
        The npz file with arrays ``crp`` and ``sem`` of shape
        (n_beta_enc, n_beta_rec, n_gamma, n_lag) and the axis arrays ``beta_enc``,
        ``beta_rec``, ``gamma_ft`` and ``lag``. Default: the study's published grid, installed
        with the package and checked against its checksum
        (:func:`icl_cmr.adapters.published.published_file`).

    Returns
    -------
    xarray.Dataset
        ``profile`` and ``sem`` with dims (beta_enc, beta_rec, gamma, lag) (float64), int64
        ``lag`` coord, float64 parameter coords; attrs ``profile_kind="cmr_mc_crp"``,
        ``unit_kind="cmr_parameters"`` and provenance naming the file. Each profile is the
        distribution over lags -8..+8 (sums to 1); values are exactly those of the file.
    """
    path = published_file("cmr_crp_grid.npz") if path is None else Path(path)
    if not path.exists() or path.is_dir():
        raise DataSourceError(f"published CMR grid: expected an existing .npz file; got {str(path)!r}")
    try:
        arrays = read_arrays(path, "published CMR grid")
    except FileFormatError as exc:
        raise FileFormatError(f"published CMR grid {str(path)!r} is not a readable .npz file: {exc}") from None
    needed = ["crp", "sem", "lag", *_NPZ_AXES.values()]
    missing = [name for name in needed if name not in arrays]
    if missing:
        raise FileFormatError(
            f"published CMR grid needs arrays {', '.join(needed)}; {str(path)!r} lacks {', '.join(missing)}"
        )
    coords = {dim: np.asarray(arrays[key], dtype=np.float64) for dim, key in _NPZ_AXES.items()}
    lags = np.asarray(arrays["lag"]).astype(np.int64)
    shape = tuple(len(coords[d]) for d in PARAMETER_DIMS) + (len(lags),)
    for name in ("crp", "sem"):
        if arrays[name].shape != shape:
            raise FileFormatError(
                f"published CMR grid: {name!r} must have shape {shape} (beta_enc, beta_rec, gamma, lag); "
                f"got {arrays[name].shape}"
            )
    dims = (*PARAMETER_DIMS, "lag")
    ds = xr.Dataset(
        {
            "profile": (dims, np.ascontiguousarray(arrays["crp"], dtype=np.float64)),
            "sem": (dims, np.ascontiguousarray(arrays["sem"], dtype=np.float64)),
        },
        coords={**coords, "lag": lags},
    )
    ds["profile"].attrs["long_name"] = "probability of a recall transition at this lag"
    ds["sem"].attrs["long_name"] = "SEM over the recall start positions"
    ds.attrs.update(
        provenance_attrs(
            "lag_profile",
            "icl_cmr.adapters.published_grid.load_published_grid",
            **file_provenance(path, "source"),
            origin="Ji-An, Zhou, Benna & Mattar (NeurIPS 2024), saved CMR grid (MIT)",
            variant="paper",
        )
    )
    ds.attrs["profile_kind"] = "cmr_mc_crp"
    ds.attrs["unit_kind"] = "cmr_parameters"
    return validate(ds, "lag_profile")


def load_grid(spec=None) -> tuple[xr.Dataset, str]:
    """The CMR grid to fit lag profiles against, and a name for it (for messages and reports).

    Parameters
    ----------
    spec : None, str or Path
        None: the study's published grid (:func:`load_published_grid`, the installed copy
        checked against its checksum, or ``$ICL_CMR_REFERENCE``). A ``.npz`` path: a grid in the
        study's format. Any other path: a ``lag_profile`` netCDF file (``icl-cmr grid``,
        :func:`cmr.paper_mc_grid`, ...).

    Returns
    -------
    (xarray.Dataset, str)
        The grid as a ``lag_profile`` dataset, and the file it came from (for the published grid,
        ``"the study's published grid (<file>)"``).

    Raises
    ------
    DataSourceError
        ``spec`` names a file that does not exist.
    """
    if spec is None:
        grid = load_published_grid()
        return grid, f"the study's published grid ({json.loads(grid.attrs['provenance'])['source']})"
    path = Path(spec)
    if path.suffix == ".npz":
        if not path.exists():
            raise DataSourceError(f"CMR grid: no such file: {str(path)!r}")
        return load_published_grid(path), str(path)
    return load_dataset(path, "lag_profile"), str(path)
