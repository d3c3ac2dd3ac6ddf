"""Free-recall data sets with repeated study items, from the user's own copy.

Lohnas & Kahana (2014) and Kahana & Howard (2005) studied lists in which items repeat. Their data
are not shipped here: no licence is stated for them, so read your own copy, in one of three forms:

* jaxcmr's HDF5 file (``LohnasKahana2014.h5``, ``HowardKahana2005.h5``): a group ``data`` of arrays
  stored transposed (MATLAB order, read as jaxcmr's ``load_data`` reads them): ``pres_itemnos``
  (trials x positions, an item number per presentation, 0 padding), ``recalls`` (trials x outputs,
  serial positions 1-based, 0 padding, negative or out-of-list values intrusions) and ``subject``;
  other arrays with one value per trial (``listLength``, ``list_type``, ``session``, ...) are kept
  as ``trial`` variables;
* an ``.npz`` with the same arrays, not transposed;
* a psifr long table (CSV) whose study rows repeat an item where it was studied again, read by
  :func:`icl_cmr.adapters.recall_data.load_recall_data` as any table (so is the simulated set
  shipped in ``data/repetition_simulated.csv``, bundled name ``icl-cmr:repetition``).

``load_recall_data`` sends ``.h5`` files and ``.npz`` files with ``pres_itemnos`` here, so every
command reads them.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from cmr.errors import DataSourceError, FileFormatError, OptionalDependencyError
from cmr.files import check_hdf5_file, check_input_file, read_arrays
from cmr.repetition import from_presentations

__all__ = ["load_repetition_data", "read_jaxcmr_hdf5"]

_HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf")


def load_repetition_data(source):
    """Events dataset (kind ``"events"``, with ``presentation_item``) of jaxcmr's arrays.

    Parameters
    ----------
    source : str or os.PathLike
        A jaxcmr HDF5 file (``.h5``/``.hdf5``) or an ``.npz`` with ``pres_itemnos`` and ``recalls``.

    Raises
    ------
    DataSourceError
        A missing file or another kind of file.
    FileFormatError
        A file without the arrays named above, or an HDF5 file that keeps data outside itself.
    OptionalDependencyError
        An HDF5 file without h5py installed.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise DataSourceError(f"expected a file path; got {type(source).__name__}")
    path = Path(source)
    if not path.is_file():
        raise DataSourceError(f"no such file: {str(path)!r} (expected a jaxcmr .h5 or an .npz)")
    suffix = path.suffix.lower()
    if suffix not in _HDF5_SUFFIXES + (".npz",):
        raise DataSourceError(f"expected a jaxcmr .h5/.hdf5 file or an .npz; got {str(path)!r} (a psifr table: "
                              "load_recall_data)")
    arrays = read_jaxcmr_hdf5(path) if suffix != ".npz" else _read_npz(path)
    return _events(arrays, str(path.resolve()), from_presentations)


def read_jaxcmr_hdf5(path) -> dict:
    """The arrays of jaxcmr's HDF5 layout (group ``data``, each array transposed back), checked
    first by the guard :func:`cmr.load_dataset` uses: data stored outside the file are refused."""
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py is a dependency
        raise OptionalDependencyError(f"reading {str(path)!r} needs h5py: pip install h5py") from exc

    check_input_file(path, "HDF5 file", kind="hdf5")
    check_hdf5_file(path, "HDF5 file")  # load_dataset's check: no data stored outside the file
    try:
        with h5py.File(path, "r") as handle:
            group = handle.get("data")
            if not isinstance(group, h5py.Group):
                raise FileFormatError(f"{str(path)!r}: expected jaxcmr's layout, a group 'data' of arrays; got "
                                      f"{sorted(handle.keys())}")
            return {name: np.asarray(item[()]).T for name, item in group.items() if isinstance(item, h5py.Dataset)}
    except OSError as exc:
        raise FileFormatError(f"{str(path)!r} is not a readable HDF5 file ({exc})") from exc


def _read_npz(path) -> dict:
    return read_arrays(path, "array file")


def _events(arrays: dict, label: str, from_presentations):
    """Events of jaxcmr's arrays; per-trial arrays become ``trial`` variables."""
    missing = [name for name in ("pres_itemnos", "recalls") if name not in arrays]
    if missing:
        raise FileFormatError(f"{label!r}: expected arrays pres_itemnos and recalls (jaxcmr's names); missing "
                              f"{', '.join(missing)} (got {', '.join(sorted(arrays))})")
    pres = np.asarray(arrays["pres_itemnos"])
    n_trials = pres.shape[0] if pres.ndim == 2 else -1
    recalls = np.asarray(arrays["recalls"]).astype(np.int64)
    if recalls.ndim != 2 or recalls.shape[0] != n_trials:
        raise FileFormatError(f"{label!r}: recalls must be trials x outputs with pres_itemnos' {n_trials} trials; "
                              f"got shape {recalls.shape}")
    lengths = (pres != 0).sum(axis=1)
    intrusion = (recalls < 0) | (recalls > lengths[:, None])  # jaxcmr marks intrusions by values outside the list
    recalls = np.where(intrusion, -1, recalls)
    per_trial = {name: np.asarray(v).reshape(-1) for name, v in arrays.items()
                 if name not in ("pres_itemnos", "recalls") and np.asarray(v).size == n_trials}

    subject = per_trial.pop("subject", np.ones(n_trials, dtype=np.int64))
    lists = pd.Series(subject).groupby(subject, sort=False).cumcount().to_numpy() + 1  # file order within subject
    events = from_presentations(_packed(recalls), pres, subject=subject, list=lists, source=label)
    row = pd.MultiIndex.from_arrays([subject, lists]).get_indexer(
        pd.MultiIndex.from_arrays([events["subject"].values, events["list"].values]))  # each trial's row of the file
    for name, values in per_trial.items():
        if values.dtype.kind in "iufb":
            events[name] = ("trial", values[row])
    return events


def _packed(recalls: np.ndarray) -> np.ndarray:
    """Recalls with the zeros inside a row (jaxcmr keeps none; some exports do) moved after its last recall."""
    order = np.argsort(recalls == 0, axis=1, kind="stable")
    return np.take_along_axis(recalls, order, axis=1)
