"""netCDF save/load with atomic writes and schema checks.

Writes go to a temporary file in the target directory, are flushed to disk, then renamed
over the target (``os.replace`` is atomic on POSIX), so an interrupted run never leaves a
half-written file under the final name.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import xarray as xr

from .errors import DataSourceError, FileFormatError, SchemaError
from .schema import KIND_ATTR, validate

__all__ = ["save_dataset", "load_dataset", "atomic_write"]


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


def save_dataset(ds: xr.Dataset, path, *, check: bool = True) -> Path:
    """Validate ``ds`` against its schema and write it to ``path`` atomically as netCDF4.

    Returns the path written. The input dataset is not modified.
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"save_dataset expects an xarray.Dataset; got {type(ds).__name__}")
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
