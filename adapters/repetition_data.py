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
* a psifr long table (CSV) whose study rows repeat an item where it was studied again.

:func:`load_repetition_data` also reads ``"icl-cmr:repetition"``: the small simulated set shipped in
``data/repetition_simulated.csv`` (docs/repetition.md says how it was made).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from cmr.errors import DataSourceError, FileFormatError, OptionalDependencyError

__all__ = ["load_repetition_data", "read_jaxcmr_hdf5", "SIMULATED"]

#: the embedded simulated set, by name (also a bundled name of load_recall_data)
SIMULATED = "icl-cmr:repetition"
_HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf")


def load_repetition_data(source, *, max_intrusion_share=None):
    """Events dataset (kind ``"events"``, with ``presentation_item``) of a data set with repeats.

    Parameters
    ----------
    source : str or os.PathLike
        ``"icl-cmr:repetition"`` (the embedded set), a jaxcmr HDF5 file (``.h5``/``.hdf5``), an ``.npz``
        with ``pres_itemnos`` and ``recalls``, or a psifr long table (``.csv``).
    max_intrusion_share : float, optional
        As :func:`cmr.from_table`, for CSV tables.

    Raises
    ------
    DataSourceError
        A missing file or an unknown name.
    FileFormatError
        A file without the arrays named above, or an HDF5 file that keeps data outside itself.
    OptionalDependencyError
        An HDF5 file without h5py installed.
    """
    from cmr.repetition import from_presentations

    if isinstance(source, str) and source == SIMULATED:
        from icl_cmr.adapters.recall_data import load_recall_data

        return load_recall_data(SIMULATED)
    if not isinstance(source, (str, os.PathLike)):
        raise DataSourceError(f"expected {SIMULATED!r} or a file path; got {type(source).__name__}")
    path = Path(source)
    if not path.is_file():
        raise DataSourceError(f"no such file: {str(path)!r} (expected {SIMULATED!r}, a jaxcmr .h5, an .npz or a .csv)")
    suffix = path.suffix.lower()
    if suffix in _HDF5_SUFFIXES or suffix == ".npz":
        arrays = read_jaxcmr_hdf5(path) if suffix != ".npz" else _read_npz(path)
        return _events(arrays, str(path.resolve()), from_presentations)
    from icl_cmr.adapters.recall_data import load_recall_data

    options = {} if max_intrusion_share is None else {"max_intrusion_share": max_intrusion_share}
    return load_recall_data(path, **options)


def read_jaxcmr_hdf5(path) -> dict:
    """The arrays of jaxcmr's HDF5 layout (group ``data``, each array transposed back), checked
    first by the guard :func:`cmr.load_dataset` uses: data stored outside the file are refused."""
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py is a dependency
        raise OptionalDependencyError(f"reading {str(path)!r} needs h5py: pip install h5py") from exc
    from cmr import io

    guard = getattr(io, "check_hdf5_file", None) or io._check_storage  # load_dataset's check of where data live
    guard(Path(path))
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
    try:
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, EOFError) as exc:
        raise FileFormatError(f"{str(path)!r} is not a readable .npz file ({exc})") from exc


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
    import pandas as pd

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
