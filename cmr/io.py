"""Reading and writing results: the one atomic writer, netCDF with schema checks, tables.

Every file or directory the toolkit writes goes through :func:`atomic_write` or
:func:`atomic_directory`: the content is written to a temporary name in the target directory,
flushed to disk, then renamed over the target (``os.replace`` is atomic on POSIX), so an
interrupted run never leaves a half-written file under the final name.

:func:`write_result` writes a result by the output's extension: ``.nc`` (netCDF, exact round
trip), ``.csv`` or ``.parquet`` (the tidy table of :func:`cmr.to_dataframe`).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import xarray as xr

from .errors import DataSourceError, FileFormatError, OptionalDependencyError, SchemaError
from .schema import KIND_ATTR, validate
from .tables import to_dataframe

__all__ = [
    "save_dataset",
    "load_dataset",
    "atomic_write",
    "atomic_directory",
    "write_result",
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
    """The extension of ``path`` if :func:`write_result` knows it; FileFormatError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in RESULT_FORMATS:
        known = ", ".join(RESULT_FORMATS)
        raise FileFormatError(
            f"cannot tell what to write from the output name {str(path)!r}: its extension must be one of "
            f"{known}; got {suffix or 'none'!r}"
        )
    return suffix


def write_result(ds: xr.Dataset, path, *, layout: str = "auto") -> Path:
    """Write a result by the extension of ``path``: ``.nc``, ``.csv`` or ``.parquet``.

    netCDF keeps the whole dataset (:func:`save_dataset`); a table format writes
    :func:`cmr.to_dataframe` of it (``layout`` as there). Any other extension raises
    :class:`FileFormatError` before anything is written. Writes are atomic.
    """
    suffix = result_format(path)
    if suffix == ".nc":
        return save_dataset(ds, path)
    validate(ds)
    table = to_dataframe(ds, layout=layout)
    path = Path(path)
    if suffix == ".csv":
        with atomic_write(path, suffix=".csv") as tmp:
            table.to_csv(tmp, index=False)
        return path
    try:
        import pyarrow  # noqa: F401 - pandas' Parquet engine
    except ImportError:
        raise OptionalDependencyError(
            "writing Parquet needs pyarrow: pip install pyarrow (or write .csv or .nc instead)"
        ) from None
    with atomic_write(path, suffix=".parquet") as tmp:
        table.to_parquet(tmp, index=False)
    return path
