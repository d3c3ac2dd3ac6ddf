"""Human free-recall data in: bundled data sets by name, CSV files and DataFrames.

Bundled data sets are read at run time from the installed packages that ship them (never
copied into this repository):

===========================  ===========================================  =====================
name                         contents                                     package (licence)
===========================  ===========================================  =====================
``psifr:Morton2013``         40 subjects x 48 lists x 24 items            psifr (GPL-3.0)
``psifr:peers_notask``       126 subjects x 28 lists x 16 items (PEERS)   psifr (GPL-3.0)
``cymr:Morton2013_mixed``    29 subjects x 30 lists x 24 items            cymr (GPL-3.0)
``cymr:sample1``             2 subjects x 1 list x 3 items (toy)          cymr (GPL-3.0)
``icl-cmr:repetition``       6 subjects x 12 lists x 24 positions,        this package
                             items studied twice (simulated CMR)          (docs/repetition.md)
===========================  ===========================================  =====================

Lists with repeated study items in jaxcmr's HDF5 layout (``.h5``) or an ``.npz`` with
``pres_itemnos`` are read by :mod:`icl_cmr.adapters.repetition_data`.
"""
from __future__ import annotations

import lzma
import os
import zipfile
import zlib
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from cmr.errors import DataSourceError, FileFormatError, OptionalDependencyError, RecallDataError
from cmr.csv_safety import restore_formulas
from cmr.deprecation import keyword_only
from cmr.events import from_recall_matrix, from_table
from cmr.files import check_input_file, read_arrays

from .repetition_data import load_repetition_data

__all__ = ["BUNDLED", "BUNDLED_DISTANCES", "load_recall_data", "read_recall_table", "load_item_distances",
           "load_recall_matrix"]

# name -> (package, file inside the package)
BUNDLED = {
    "psifr:Morton2013": ("psifr", "data/Morton2013.csv"),
    "psifr:peers_notask": ("psifr", "data/peers_notask.csv"),
    "cymr:Morton2013_mixed": ("cymr", "data/Morton2013_mixed.csv"),
    "cymr:sample1": ("cymr", "data/sample1.csv"),
    "icl-cmr:repetition": ("icl_cmr.data", "repetition_simulated.csv"),
}


def _labels_as_written(column):
    """Subject or list labels read as text: integers when every one is a plain integer, else the text (``01`` stays ``01``)."""
    plain = column.str.fullmatch(r"-?(0|[1-9][0-9]{0,17})").eq(True)
    return column.astype("int64") if len(column) and bool(plain.all()) else column


def _read_csv(path, label: str, labels=("subject", "list")):
    try:
        # utf-8-sig: some shipped files (cymr's sample1.csv) start with a byte-order mark
        table = pd.read_csv(path, encoding="utf-8-sig", dtype={name: str for name in labels})
        table = restore_formulas(table)  # the apostrophes write_table puts before '=', '+', '-', '@'
        for name in labels:
            if name in table:
                table[name] = _labels_as_written(table[name])
        return table
    except FileNotFoundError as exc:
        raise DataSourceError(f"no such recall-data file: {label!r}") from exc
    except (PermissionError, IsADirectoryError) as exc:
        raise DataSourceError(f"cannot read recall-data file {label!r}: {exc}") from exc
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise FileFormatError(
            f"{label!r} is not a readable CSV recall table (expected a psifr long table with columns "
            f"subject, list, trial_type, position, item): {type(exc).__name__}: {exc}"
        ) from exc
    except (EOFError, OSError, zlib.error, zipfile.BadZipFile, lzma.LZMAError) as exc:
        # a compressed table (.gz, .bz2, .xz, .zip) cut short or damaged
        raise FileFormatError(
            f"{label!r} is damaged or truncated; expected a complete CSV recall table "
            f"({type(exc).__name__}: {exc})"
        ) from exc


@contextmanager
def _bundled_file(source: str, table: dict, what: str):
    """The path of a bundled file inside the installed package that ships it."""
    package, inner = table[source]
    try:
        root = resources.files(package)
    except ModuleNotFoundError as exc:
        raise OptionalDependencyError(
            f"bundled {what} {source!r} is read from the {package!r} package, which is not "
            f"installed; install it with `pip install {package}`"
        ) from exc
    with resources.as_file(root.joinpath(inner)) as path:
        yield path


def read_recall_table(source, *, columns=None):
    """The psifr long table (pandas DataFrame) of a bundled name or a CSV path.

    ``columns`` (psifr's name -> the file's, as :func:`cmr.from_table`) only says which columns
    hold the subject and list labels, read as written like ``subject`` and ``list``; the
    columns keep the file's names.
    """
    labels = tuple(dict(columns).get(name, name) if hasattr(columns, "items") else name for name in ("subject", "list"))
    labels = tuple(dict.fromkeys(labels))  # subject=list: one column read once; from_table then says what clashes
    if isinstance(source, str) and source in BUNDLED:
        with _bundled_file(source, BUNDLED, "data set") as path:
            return _read_csv(path, source)
    if isinstance(source, str) and ":" in source and not os.path.exists(source) and not Path(source).suffix:
        raise DataSourceError(
            f"unknown bundled recall data set {source!r}; known: {', '.join(BUNDLED)} (or give a CSV path)"
        )
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise DataSourceError(
                f"no such recall-data file: {str(path)!r}; give a CSV path or one of: {', '.join(BUNDLED)}"
            )
        if path.is_dir():
            raise DataSourceError(f"expected a CSV file; got a directory: {str(path)!r}")
        check_input_file(path, "recall-data file", kind="text")  # a pipe, a device or a file over the cap
        return _read_csv(path, str(path), labels)
    raise DataSourceError(
        f"recall data source must be a bundled name, a CSV path or a pandas DataFrame; got {type(source).__name__}"
    )


def load_recall_data(source, *, list_keys=None, normalize_items=False, max_intrusion_share=None, list_length=None,
                     columns=None, trial_types=None):
    """Events dataset (kind ``"events"``) from a bundled name, a CSV path or a DataFrame.

    Parameters
    ----------
    source : str, os.PathLike or pandas.DataFrame
        A bundled name (see :data:`BUNDLED`), a psifr-format CSV file (raw or merged), or a
        psifr-format DataFrame (not modified).
    list_keys, normalize_items, max_intrusion_share, columns, trial_types
        As :func:`cmr.from_table`: columns that with subject and list identify a list (e.g.
        ``["session"]`` when list numbers start again per session); match recalls ignoring
        case and surrounding spaces; the share of intrusions above which a table is refused;
        a lab's column names (psifr's name -> the table's, e.g. ``{"item": "word"}``) and
        trial-type values (e.g. ``{"study": "encoding", "recall": "retrieval"}``).
    list_length : int, optional
        For a recall matrix file (``.npy``/``.npz``, see :func:`load_recall_matrix`).

    Returns
    -------
    xarray.Dataset
        See :func:`cmr.events.from_table`; the source is recorded in ``attrs["provenance"]``.

    Raises
    ------
    DataSourceError
        Unknown bundled name, missing or unreadable file.
    FileFormatError
        A file that is not a readable CSV table.
    OptionalDependencyError
        A bundled data set whose package is not installed.
    cmr.errors.RecallDataError
        A table that is not a valid psifr long table.
    """
    options = {"list_keys": list_keys, "normalize_items": normalize_items}
    if columns is not None or trial_types is not None:
        options.update(columns=columns, trial_types=trial_types)
    if max_intrusion_share is not None:
        options["max_intrusion_share"] = max_intrusion_share
    if isinstance(source, pd.DataFrame):
        return from_table(source, source="DataFrame", **options)
    if isinstance(source, (str, os.PathLike)) and Path(source).suffix.lower() in (".h5", ".hdf5"):
        return load_repetition_data(source)  # jaxcmr's layout (pres_itemnos, recalls)
    if isinstance(source, (str, os.PathLike)) and Path(source).suffix in (".npy", ".npz"):
        return load_recall_matrix(source, list_length=list_length)
    table = read_recall_table(source, columns=columns)
    if isinstance(source, str) and source in BUNDLED:
        label = source
    else:
        label = str(Path(source).resolve())
    return from_table(table, source=label, **options)


# name -> (package, file inside the package): psifr's item distance matrices (.npz: items, distances)
BUNDLED_DISTANCES = {
    "psifr:Morton2013": ("psifr", "distances/Morton2013.npz"),
}


def load_item_distances(source):
    """Item-by-item distances as a DataArray whose ``item`` coordinate names the rows.

    Parameters
    ----------
    source : str or os.PathLike
        A bundled name (``"psifr:Morton2013"``: 768 x 768 semantic distances of the Morton &
        Polyn 2016 item pool, from psifr) or an ``.npz`` file with arrays ``items`` (n,) and
        ``distances`` (n, n), psifr's format.

    Returns
    -------
    xarray.DataArray
        dims ``(item, other_item)``, float64; pass it to :func:`cmr.distance_crp` and the
        other distance analyses with ``index_key=None`` (items are matched by name).
    """
    def _read(path, label):
        try:
            arrays = read_arrays(path, "distance file", names=("items", "distances"))
        except FileFormatError as exc:
            raise FileFormatError(
                f"{label!r} is not a distance file (expected an .npz with arrays 'items' and 'distances'): {exc}"
            ) from None
        items, matrix = arrays["items"], arrays["distances"]
        if matrix.ndim != 2 or matrix.shape != (items.size, items.size):
            raise FileFormatError(
                f"{label!r}: distances must be items x items ({items.size} x {items.size}); got {matrix.shape}")
        return xr.DataArray(matrix.astype(np.float64), dims=("item", "other_item"),
                            coords={"item": items.astype(str), "other_item": items.astype(str)},
                            attrs={"source": label})

    if isinstance(source, str) and source in BUNDLED_DISTANCES:
        with _bundled_file(source, BUNDLED_DISTANCES, "distances") as path:
            return _read(path, source)
    if isinstance(source, str) and ":" in source and not os.path.exists(source):
        raise DataSourceError(f"unknown bundled distances {source!r}; known: {', '.join(BUNDLED_DISTANCES)} "
                              "(or give an .npz path)")
    if isinstance(source, (str, os.PathLike)):
        return _read(source, str(source))
    raise DataSourceError(f"distances must be a bundled name or an .npz path; got {type(source).__name__}")


@keyword_only
def load_recall_matrix(path, *, list_length=None):
    """Events dataset from a recall matrix file (EMBAM / jaxcmr convention).

    Parameters
    ----------
    path : str or os.PathLike
        ``.npy``: one integer array (trials x outputs) of 1-based serial positions, ``-1``
        intrusions, ``0`` padding after the last recall. ``.npz``: array ``recalls`` as that,
        and optionally ``list_length`` (one per trial or one for all) and ``subject``; with
        ``pres_itemnos`` (jaxcmr's item number per presentation), lists with repeated items
        (:func:`icl_cmr.adapters.repetition_data.load_repetition_data`).
    list_length : int, optional
        Items per list; needed unless the ``.npz`` holds it.

    Raises
    ------
    cmr.errors.RecallDataError
        A malformed matrix; when positions look 0-based (a 0 before a later recall, or no
        position as large as the list), the message says so.
    """
    label = str(path)
    arrays = read_arrays(path, "recall-matrix file")
    if "" in arrays:  # a .npy file: the matrix alone
        arrays = {"recalls": arrays.pop("")}
    if "recalls" not in arrays:
        raise FileFormatError(f"{label!r}: a .npz recall matrix needs an array 'recalls'; got {sorted(arrays)}")
    if "pres_itemnos" in arrays:  # jaxcmr's item number per presentation: lists with repeated items
        return load_repetition_data(path)
    recalls = arrays["recalls"]
    lengths = arrays.get("list_length", list_length)
    if lengths is None:
        raise RecallDataError(f"{label!r}: give the list length (list_length=..., command line --list-length), "
                              "or store an array 'list_length' in the .npz")
    matrix = np.asarray(recalls)
    if matrix.ndim == 2 and matrix.size and matrix.dtype.kind in "iu":
        zero_first = ((np.cumsum(matrix == 0, axis=1) > 0) & (matrix > 0)).any()
        if zero_first:
            raise RecallDataError(
                f"{label!r}: a 0 comes before a later recall; 0 is padding after the last recall, so the "
                "positions look 0-based: add 1 to every serial position (keep -1 for intrusions and 0 for padding)"
            )
    try:
        return from_recall_matrix(matrix, lengths, subject=arrays.get("subject"), source=label)
    except RecallDataError as exc:
        raise RecallDataError(f"{label!r}: {exc}") from exc

