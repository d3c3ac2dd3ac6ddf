"""Reading and writing results: the one atomic writer, netCDF with schema checks, tables.

Every file or directory the toolkit writes goes through :func:`atomic_write` or
:func:`atomic_directory`: the content is written to a temporary name in the target directory,
flushed to disk, then renamed over the target (``os.replace`` is atomic on POSIX), so an
interrupted run never leaves a half-written file under the final name.

:func:`write_result` writes a result by the output's extension: ``.nc`` (netCDF, exact round
trip), ``.csv`` or ``.parquet`` (the tidy table of :func:`cmr.to_dataframe`, written by
:func:`write_table`); :func:`result_format` refuses any other extension before work starts.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .errors import DataSourceError, FileFormatError, OptionalDependencyError, SchemaError
from .schema import KIND_ATTR, validate
from .tables import LAYOUTS, to_dataframe

__all__ = [
    "save_dataset",
    "load_dataset",
    "atomic_write",
    "atomic_directory",
    "write_result",
    "write_table",
    "result_format",
    "RESULT_FORMATS",
]

#: output extensions :func:`write_result` knows, and what each writes
RESULT_FORMATS = {
    ".nc": "netCDF-4 (the whole dataset; load_dataset reads it back exactly)",
    ".csv": "comma-separated tidy table (cmr.to_dataframe)",
    ".parquet": "Parquet tidy table (cmr.to_dataframe; needs pyarrow)",
}


@contextlib.contextmanager
def atomic_write(path, suffix=".tmp"):
    """Yield a temporary path next to ``path``; on success rename it over ``path``.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:  # flush to disk before the rename makes it visible
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path, *, replace: bool = True):
    """Yield a temporary directory next to ``path``; on success rename it to ``path``.

    The files written into it are flushed to disk before the rename. With ``replace=False`` an
    existing ``path`` wins (another process finished first) and the new copy is discarded.
    On any exception the temporary directory is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        for file in tmp.rglob("*"):
            if file.is_file():
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())
        if path.exists():
            if not replace:
                return
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_dataset(ds: xr.Dataset, path, *, check: bool = True) -> Path:
    """Validate ``ds`` against its schema and write it to ``path`` atomically as netCDF4.

    Returns the path written. The input dataset is not modified.
    """
    if not isinstance(ds, xr.Dataset):
        raise SchemaError(f"save_dataset expects an xarray.Dataset; got {type(ds).__name__}")
    if check:
        validate(ds)
    path = Path(path)
    with atomic_write(path) as tmp:
        ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4")
    return path


def load_dataset(path, kind: str | None = None) -> xr.Dataset:
    """Load an icl-cmr netCDF file fully into memory and validate its schema.

    Parameters
    ----------
    path : str or Path
    kind : str, optional
        Expected dataset kind (``"events"``, ``"lag_profile"``, ...); a file of another kind
        raises :class:`SchemaError`.
    """
    path = Path(path)
    if not path.is_file():
        raise DataSourceError(f"no such file: {str(path)!r}")
    try:
        with xr.open_dataset(path, engine="netcdf4") as handle:
            ds = handle.load()
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise FileFormatError(
            f"{str(path)!r} is not a readable netCDF file ({type(exc).__name__}: {exc})"
        ) from exc
    got = ds.attrs.get(KIND_ATTR)
    if kind is not None and got != kind:
        raise SchemaError(f"{str(path)!r}: expected a {kind!r} dataset; got kind {got!r}")
    validate(ds)
    return ds


def result_format(path) -> str:
    """The extension of ``path`` if :func:`write_result` can write it; an error otherwise.

    Call it before any work starts, so a run never computes a result it cannot write.

    Raises
    ------
    FileFormatError
        The extension is not one of :data:`RESULT_FORMATS`.
    OptionalDependencyError
        ``.parquet`` without pyarrow installed.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in RESULT_FORMATS:
        known = ", ".join(RESULT_FORMATS)
        raise FileFormatError(
            f"cannot tell what to write from the output name {str(path)!r}: its extension must be one of "
            f"{known}; got {suffix or 'none'!r}"
        )
    if suffix == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise OptionalDependencyError(
            "writing Parquet needs pyarrow: pip install pyarrow (or write .csv or .nc instead)"
        )
    return suffix


def _decimal(value: float) -> str:
    """A float as a spreadsheet reads it: shortest exact digits, no exponent (3.3e-05 -> 0.000033)."""
    if abs(value) >= 1e16:  # positional notation would print every digit of a huge number
        return repr(value)
    return np.format_float_positional(value, unique=True, trim="0")


def write_table(table: pd.DataFrame, path) -> Path:
    """Write a tidy table atomically as ``.csv`` or ``.parquet`` (by the extension of ``path``).

    CSV: UTF-8, a header row, no index column, ``,`` separated; missing values are empty
    cells; floats are written in decimal notation with the shortest digits that read back
    exactly (``pandas.read_csv(..., float_precision="round_trip")`` gives the same numbers);
    text is written as it is (quoted only where it holds a comma, quote or newline).
    Parquet keeps the column types (int64, float64, text).
    """
    suffix = result_format(path)
    if suffix == ".nc":
        raise FileFormatError(f"a table is written as .csv or .parquet; got {str(path)!r}")
    path = Path(path)
    with atomic_write(path, suffix=suffix) as tmp:
        if suffix == ".csv":
            table.to_csv(tmp, index=False, float_format=_decimal, na_rep="", lineterminator="\n", encoding="utf-8")
        else:
            table.to_parquet(tmp, index=False, engine="pyarrow")
    return path


def write_result(ds: xr.Dataset, path, *, layout: str = "auto") -> Path:
    """Write a result by the extension of ``path``: ``.nc``, ``.csv`` or ``.parquet``.

    netCDF keeps the whole dataset with its provenance (:func:`save_dataset`;
    :func:`load_dataset` reads it back exactly); a table format writes
    :func:`cmr.to_dataframe` of it (``layout`` as there) through :func:`write_table`. An
    unknown extension or layout raises before anything is written. Writes are atomic.
    """
    suffix = result_format(path)
    if layout not in LAYOUTS:
        raise SchemaError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    if suffix == ".nc":
        return save_dataset(ds, path)
    return write_table(to_dataframe(ds, layout=layout), path)
