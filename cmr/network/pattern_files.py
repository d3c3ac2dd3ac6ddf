"""Item patterns in cymr's HDF5 layout (``cymr.cmr.save_patterns`` / ``load_patterns``).

A file holds ``items`` (text), ``features`` (text: the feature names), ``vector/<feature>``
(items x units) and ``similarity/<feature>`` (items x items, the dot products of the vectors).
Files written here are read by cymr and the other way round.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import FileFormatError, OutputError, ParameterError
from ..files import check_hdf5_file, check_input_file

__all__ = ["save_patterns", "load_patterns"]


def save_patterns(path, items, **features) -> Path:
    """Write item patterns: ``save_patterns("patterns.h5", items, loc=np.eye(6), cat=cat)``.

    Each feature is an (items x units) array; its similarity matrix (the dot products) is written
    with it. Returns the path.
    """
    import h5py

    items = np.asarray(items)
    if items.ndim != 1 or items.size == 0:
        raise ParameterError(f"items must be a non-empty 1-d sequence of labels; got shape {items.shape}")
    if not features:
        raise ParameterError("save_patterns needs at least one feature, e.g. loc=np.eye(n_items); got none")
    vectors = {}
    for name, mat in features.items():
        try:
            arr = np.asarray(mat, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError(f"feature {name} must be a numeric (items x units) array; got "
                                 f"{type(mat).__name__}") from None
        if arr.ndim != 2 or arr.shape[0] != items.size:
            raise ParameterError(f"feature {name} must have shape ({items.size}, units); got {arr.shape}")
        vectors[name] = arr
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"pattern file {str(path)!r} is a directory; expected a file name such as "
                          f"{str(path / 'patterns.h5')!r}")
    if not path.parent.is_dir():
        raise OutputError(f"cannot write pattern file {str(path)!r}: directory {str(path.parent)!r} does not exist")
    text = h5py.special_dtype(vlen=str)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(handle)
    try:
        with h5py.File(partial, "w") as f:
            f.create_dataset("items", data=np.array([str(i) for i in items], dtype=object), dtype=text)
            f.create_dataset("features", data=np.array(list(vectors), dtype=object), dtype=text)
            for name, arr in vectors.items():
                f.create_dataset("vector/" + name, data=arr)
                f.create_dataset("similarity/" + name, data=np.dot(arr, arr.T))
        os.replace(partial, path)  # a reader never sees half a file
    except OSError as exc:
        raise OutputError(f"cannot write pattern file {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return path


def load_patterns(path, *, features=None) -> dict:
    """Patterns of a file written by :func:`save_patterns` (or cymr's).

    Returns ``{"items": array of str, "vector": {feature: array}, "similarity": {feature: array}}``
    for all features, or those named in ``features``. The file is checked first
    (:func:`cmr.files.check_input_file`, :func:`cmr.files.check_hdf5_file`): a special file, data
    stored outside the file (external storage, external or dangling links) or declared sizes
    beyond memory are refused before any data is read.
    """
    import h5py

    path = check_input_file(path, "pattern file", kind="hdf5")
    check_hdf5_file(path, "pattern file")
    try:
        handle = h5py.File(path, "r")
    except OSError:
        raise FileFormatError(f"pattern file {str(path)!r} is not an HDF5 file") from None
    with handle as f:
        try:
            return _read_patterns(f, path, features)
        except (OSError, TypeError, ValueError, KeyError, AttributeError) as exc:
            if isinstance(exc, (FileFormatError, ParameterError)):
                raise
            raise FileFormatError(f"pattern file {str(path)!r} is not a readable pattern file (expected text datasets "
                                  f"items and features, numeric vector/<name> and similarity/<name>): "
                                  f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def _read_patterns(f, path: Path, features) -> dict:
    for key in ("items", "features"):
        if key not in f:
            raise FileFormatError(f"pattern file {str(path)!r} needs datasets items, features, vector/<name>, "
                                  f"similarity/<name>; missing: {key}")
    stored = [str(name) for name in f["features"].asstr()]
    wanted = stored if features is None else [str(name) for name in features]
    missing = [name for name in wanted if name not in stored]
    if missing:
        raise ParameterError(f"features {', '.join(missing)} are not in {str(path)!r}; it has "
                             f"{', '.join(stored)}")
    patterns = {"items": np.array([item for item in f["items"].asstr()]), "vector": {}, "similarity": {}}
    for name in wanted:
        for kind in ("vector", "similarity"):
            if f"{kind}/{name}" not in f:
                raise FileFormatError(f"pattern file {str(path)!r} lists feature {name} but has no "
                                      f"{kind}/{name} dataset")
            patterns[kind][name] = f[f"{kind}/{name}"][()]
    return patterns
