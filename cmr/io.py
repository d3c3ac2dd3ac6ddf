"""Reading and writing results: the one atomic writer, netCDF with schema checks, tables.

Every file or directory the toolkit writes goes through :func:`atomic_write` or
:func:`atomic_directory`: the content is written to a temporary name in the target directory,
flushed to disk, then renamed over the target (``os.replace`` is atomic on POSIX), so an
interrupted run never leaves a half-written file under the final name. A write holds a lock on
its output (two writers of one output: the second gets :class:`~cmr.errors.OutputError`), removes
what an interrupted earlier write of that output left, and honours the umask. netCDF arrays are
stored with Fletcher-32 checksums, so :func:`load_dataset` refuses a damaged file.

:func:`write_result` writes a result by the output's extension: ``.nc`` (netCDF, exact round
trip), ``.csv`` or ``.parquet`` (the tidy table of :func:`cmr.to_dataframe`, written by
:func:`write_table`); :func:`result_format` refuses any other extension before work starts.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.util
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .csv_safety import csv_quoting, neutralise_formulas
from .deprecation import keyword_only
from .errors import FileFormatError, OptionalDependencyError, OutputError, SchemaError, UnverifiedFileWarning
from .files import available_memory, check_hdf5_file, check_input_file, size_text
from .schema import KIND_ATTR, validate
from .tables import LAYOUTS, to_dataframe

__all__ = [
    "save_dataset",
    "load_dataset",
    "atomic_write",
    "atomic_directory",
    "output_lock",
    "check_output",
    "remove_partial",
    "file_digest",
    "default_mode",
    "PARTIAL",
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


#: what a temporary file or directory of an unfinished write is called: ``.NAME.partial-XXXXXXXX``
PARTIAL = ".partial-"

# locks this process holds: resolved lock path -> [file descriptor, depth] (output_lock is re-entrant)
_HELD_LOCKS: dict[str, list] = {}


def _umask() -> int:
    """The process umask, read without changing it where the platform allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, and put it back at once
    os.umask(mask)
    return mask


def default_mode(directory: bool = False) -> int:
    """The mode a new file (0666) or directory (0777) gets under the process umask."""
    return (0o777 if directory else 0o666) & ~_umask()


def _final_mode(path: Path, directory: bool) -> int:
    """The mode a new output gets: the replaced file's mode, else :func:`default_mode`."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return default_mode(directory)


def check_output(path) -> Path:
    """Refuse an output path that cannot be written, before any work starts.

    Raises
    ------
    OutputError
        ``path`` is an existing directory, its parent is a file, or the parent directory
        exists but is not writable.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"output {str(path)!r} is a directory; expected a file name such as {str(path / 'result.nc')!r}")
    _check_parent(path)
    return path


def _check_parent(path: Path) -> None:
    """The nearest existing ancestor of ``path`` must be a writable directory."""
    parent = next((p for p in (path.parent, *path.parent.parents) if p.exists()), Path("."))
    if not parent.is_dir():
        raise OutputError(f"cannot write {str(path)!r}: {str(parent)!r} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {str(path)!r}: directory {str(parent)!r} is not writable")


def _output_error(path: Path, exc: OSError) -> OutputError:
    return OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc} ({type(exc).__name__})")


def _lock_name(path: Path) -> Path:
    return path.parent / f".{path.name}.lock"


@contextlib.contextmanager
def output_lock(path, *, wait: float = 0.0):
    """Hold an exclusive lock on the output ``path`` (a file or a directory) while the block runs.

    A second process asking for the same output while the lock is held gets an
    :class:`OutputError` at once (or after waiting up to ``wait`` seconds for the holder to
    finish), so two writers never both report success. The lock is the file ``.NAME.lock``
    next to ``path``, removed on release; re-entrant within a process. Where the platform has
    no ``fcntl`` (Windows) no lock is taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = Path(path)
    _check_parent(path)
    lock = _lock_name(path.absolute())
    key = str(lock)
    if key in _HELD_LOCKS:
        _HELD_LOCKS[key][1] += 1
        try:
            yield
        finally:
            _HELD_LOCKS[key][1] -= 1
        return
    deadline = time.monotonic() + float(wait)
    if lock.is_symlink():  # a planted link would make the lock create or truncate a file elsewhere
        raise OutputError(f"cannot write {str(path)!r}: its lock {str(lock)!r} is a symbolic link; expected a "
                          "plain file or none (remove the link)")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666 & ~_umask())
            except OSError as exc:
                if lock.is_symlink():  # planted between the check above and the open
                    raise OutputError(f"cannot write {str(path)!r}: its lock {str(lock)!r} is a symbolic link; "
                                      "expected a plain file or none (remove the link)") from None
                raise exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(0.5)
                    continue
                raise OutputError(
                    f"another process is writing {str(path)!r} (lock {str(lock)!r}); wait for it to finish "
                    "or choose another output"
                ) from None
            try:  # the holder before us may have removed the lock file: then lock the new one
                if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise _output_error(path, exc) from exc
    _HELD_LOCKS[key] = [fd, 1]
    try:
        yield
    finally:
        del _HELD_LOCKS[key]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def file_digest(path) -> str:
    """SHA-256 of a file's bytes, as 64 hex digits (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def remove_partial(path) -> list[Path]:
    """Remove what interrupted writes of ``path`` left behind (``.NAME.partial-*``); return what was removed.

    Only call it while holding :func:`output_lock` on ``path`` (every writer of ``path`` holds
    it, so what is left then belongs to a process that died).
    """
    path = Path(path)
    removed = []
    if not path.parent.is_dir():
        return removed
    for leftover in path.parent.glob(f".{glob.escape(path.name)}{PARTIAL}*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        removed.append(leftover)
    return removed


@contextlib.contextmanager
@keyword_only
def atomic_write(path, *, suffix=".tmp"):
    """Yield a temporary path next to ``path``; on success rename it over ``path``.

    The write holds :func:`output_lock` on ``path`` and first removes what an interrupted
    earlier write of ``path`` left behind. The file is flushed to disk before the rename and
    gets the mode of the file it replaces, or 0666 less the umask. On any exception the
    temporary file is removed and ``path`` is left untouched.

    Raises
    ------
    OutputError
        ``path`` is a directory, its directory is not writable, or another process is
        writing it.
    """
    path = check_output(path)
    with output_lock(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_partial(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{PARTIAL}", suffix=suffix, dir=path.parent)
            os.close(fd)
        except OSError as exc:
            raise _output_error(path, exc) from exc
        try:
            yield Path(tmp)
            try:
                with open(tmp, "rb+") as fh:  # flush to disk before the rename makes it visible
                    os.fsync(fh.fileno())
                os.chmod(tmp, _final_mode(path, directory=False))
                os.replace(tmp, path)
            except OSError as exc:
                raise _output_error(path, exc) from exc
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def atomic_directory(path, *, replace: bool = True):
    """Yield a temporary directory next to ``path``; on success rename it to ``path``.

    The files written into it are flushed to disk before the rename; the directory gets 0777
    less the umask. With ``replace=False`` an existing ``path`` wins (another process finished
    first) and the new copy is discarded. Holds :func:`output_lock` on ``path`` and removes
    what interrupted earlier writes left. On any exception the temporary directory is removed
    and ``path`` is left untouched.
    """
    path = Path(path)
    with output_lock(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_partial(path)
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}{PARTIAL}", dir=path.parent))
        except OSError as exc:
            raise _output_error(path, exc) from exc
        try:
            yield tmp
            for file in tmp.rglob("*"):
                if file.is_file():
                    with open(file, "rb") as handle:
                        os.fsync(handle.fileno())
            os.chmod(tmp, _final_mode(path, directory=True))
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
        try:
            _with_checksums(ds).to_netcdf(tmp, engine="netcdf4", format="NETCDF4")
        except RuntimeError as exc:  # the netCDF library reports a full disk or a failed write as "HDF error"
            raise OutputError(f"cannot write {str(path)!r}: the netCDF library failed while writing "
                              f"({_first_line(exc)}); is the disk full?") from exc
    return path


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _with_checksums(ds: xr.Dataset) -> xr.Dataset:
    """A shallow copy whose numeric arrays are stored with HDF5 Fletcher-32 checksums.

    Reading a damaged chunk then fails instead of returning flipped numbers (HDF5 checks the
    checksum on every read); text and scalar variables cannot carry one.
    """
    out = ds.copy(deep=False)
    for var in out.variables.values():
        if var.dtype.kind in "biufc" and var.ndim > 0 and var.size > 0:
            var.encoding = {**var.encoding, "fletcher32": True, "contiguous": False}
    return out


def _without_checksums(ds: xr.Dataset) -> list[str]:
    """Numeric arrays of a loaded netCDF-4 file that :func:`_with_checksums` would have checksummed
    but that carry none (a file written by another tool)."""
    return [str(name) for name, var in ds.variables.items()
            if var.dtype.kind in "biufc" and var.ndim > 0 and var.size > 0 and not var.encoding.get("fletcher32")]


def load_dataset(path, kind: str | None = None) -> xr.Dataset:
    """Load an icl-cmr netCDF file fully into memory and validate its schema.

    Parameters
    ----------
    path : str or Path
    kind : str, optional
        Expected dataset kind (``"events"``, ``"lag_profile"``, ...); a file of another kind
        raises :class:`SchemaError`.
    """
    path = check_input_file(path, "netCDF file", kind="hdf5")
    check_hdf5_file(path, "netCDF file")
    try:
        with xr.open_dataset(path, engine="netcdf4") as handle:
            _check_declared_size(path, handle)
            ds = handle.load()
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise FileFormatError(
            f"{str(path)!r} is not a readable netCDF file: truncated, damaged (a checksum failed) or "
            f"not netCDF at all ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc
    if _is_netcdf3(path):
        import warnings

        warnings.warn(f"{str(path)!r} is a netCDF-3 file, which has no checksums: damage to its numbers cannot "
                      "be detected (icl-cmr writes netCDF-4 with checksums)", UnverifiedFileWarning, stacklevel=2)
    elif unchecked := _without_checksums(ds):
        import warnings

        shown = ", ".join(unchecked[:5]) + (f" and {len(unchecked) - 5} more" if len(unchecked) > 5 else "")
        warnings.warn(f"{str(path)!r} stores {len(unchecked)} numeric variable(s) without checksums ({shown}): "
                      "damage to their numbers cannot be detected (written by another tool? icl-cmr writes "
                      "every numeric array with a Fletcher-32 checksum)", UnverifiedFileWarning, stacklevel=2)
    got = ds.attrs.get(KIND_ATTR)
    if kind is not None and got != kind:
        raise SchemaError(f"{str(path)!r}: expected a {kind!r} dataset; got kind {got!r}")
    validate(ds)
    return ds


def _is_netcdf3(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(3) == b"CDF"  # netCDF-3 classic / 64-bit offset / CDF-5; netCDF-4 starts with HDF5's


def _check_declared_size(path: Path, handle: xr.Dataset) -> None:
    """FileFormatError when the variables a file declares would not fit in the memory available
    (a small file may declare terabytes of unwritten, fill-valued data)."""
    sizes = {name: int(np.prod(var.shape, dtype=object)) * var.dtype.itemsize for name, var in handle.variables.items()}
    total, available = sum(sizes.values()), available_memory()
    if total > available:
        largest = max(sizes, key=sizes.get)
        raise FileFormatError(
            f"{str(path)!r} declares {size_text(total)} of data (variable {largest!r}: shape "
            f"{tuple(int(n) for n in handle[largest].shape)}, {size_text(sizes[largest])}); expected a result that fits "
            f"in the {size_text(available)} of memory available"
        )


def result_format(path) -> str:
    """The extension of ``path`` if :func:`write_result` can write it; an error otherwise.

    Call it before any work starts, so a run never computes a result it cannot write.

    Raises
    ------
    OutputError
        ``path`` cannot be written (:func:`check_output`).
    FileFormatError
        The extension is not one of :data:`RESULT_FORMATS`.
    OptionalDependencyError
        ``.parquet`` without pyarrow installed.
    """
    suffix = Path(path).suffix.lower()
    check_output(path)
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
    """A float as a spreadsheet reads it: shortest exact digits, without an exponent in the usual range
    (3.3e-05 -> 0.000033); beyond it (|x| >= 1e16, 0 < |x| < 1e-9) Python's exponent form, so that
    neither every digit of a large number nor a run of zeros of a tiny one is printed (1e-190)."""
    tiny = value != 0 and abs(value) < 1e-9
    if not np.isfinite(value) or abs(value) >= 1e16 or tiny:
        return repr(float(value))  # inf, -inf, 1e+20, 1e-190: plain text, never a numpy scalar's repr
    return np.format_float_positional(value, unique=True, trim="0")


def write_table(table: pd.DataFrame, path) -> Path:
    """Write a tidy table atomically as ``.csv`` or ``.parquet`` (by the extension of ``path``).

    CSV: UTF-8, a header row, no index column, ``,`` separated; missing values are empty
    cells; floats are written in decimal notation with the shortest digits that read back
    exactly (``pandas.read_csv(..., float_precision="round_trip")`` gives the same numbers);
    text is written as it is (quoted only where it holds a comma, quote or newline), except that
    a text cell a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab or carriage
    return first) gets a leading apostrophe (:mod:`cmr.csv_safety`; the recall-table reader
    removes it again, and :func:`cmr.csv_safety.restore_formulas` does for any other reader).
    Parquet keeps the column types (int64, float64, text).
    """
    suffix = result_format(path)
    if suffix == ".nc":
        raise FileFormatError(f"a table is written as .csv or .parquet; got {str(path)!r}")
    path = Path(path)
    with atomic_write(path, suffix=suffix) as tmp:
        if suffix == ".csv":
            safe = neutralise_formulas(table)
            safe.to_csv(tmp, index=False, float_format=_decimal, na_rep="", lineterminator="\n", encoding="utf-8",
                        quoting=csv_quoting(safe))
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
    if layout not in LAYOUTS and not (isinstance(ds, xr.Dataset) and isinstance(layout, str) and layout in ds.data_vars):
        raise SchemaError(f"layout must be one of {', '.join(LAYOUTS)} or a data variable; got {layout!r}")
    if suffix == ".nc":
        return save_dataset(ds, path)
    return write_table(to_dataframe(ds, layout=layout), path)
