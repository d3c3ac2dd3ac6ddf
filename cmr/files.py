"""Input files checked before they are read: what the path is, how large it is, what it declares.

Every reader of a user's file goes through these checks first, so a hostile or mistaken path
ends in one typed line instead of a hang, a traceback or memory exhausted:

* :func:`check_input_file`: the path must be a regular file (a named pipe would block the read
  forever, ``/dev/zero`` never ends, a directory is not a file) no larger than the cap of its
  kind (:data:`SIZE_LIMITS`), checked with ``stat()`` before a byte is read;
* :func:`check_hdf5_file`: an HDF5 file (netCDF-4 results, item-pattern files) keeps every
  dataset inside itself (no external raw storage, virtual dataset, external or dangling link:
  each would read another file of the machine) and declares no more data than the memory
  available (a 6 KiB file can declare 1 TiB);
* :func:`read_arrays`: ``.npy`` and ``.npz`` files read with those checks, their headers
  checked against the file and the memory before an array is allocated, never unpickled.

The caps are per kind of file, in bytes on disk; change an entry of :data:`SIZE_LIMITS` (in
Python) or set the environment variable :data:`SIZE_LIMIT_ENV` (bytes, for every kind) to
read larger files.
"""
from __future__ import annotations

import os
import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .errors import DataSourceError, FileFormatError, OptionalDependencyError

__all__ = [
    "SIZE_LIMITS",
    "SIZE_LIMIT_ENV",
    "check_input_file",
    "check_hdf5_file",
    "read_arrays",
    "available_memory",
    "size_text",
]

_MiB, _GiB = 1 << 20, 1 << 30

#: the largest file of each kind read, in bytes on disk (checked with ``stat()`` before reading)
SIZE_LIMITS = {
    "json": 16 * _MiB,   # parameter files, network files, manifests, training logs
    "text": 1 * _GiB,    # CSV/TSV/text tables: recall tables, word vectors, similarities, word pools
    "array": 4 * _GiB,   # .npy / .npz recall matrices, distances, vectors, similarities
    "hdf5": None,        # netCDF results and item-pattern files: their declared data must fit in memory
}

#: environment variable that, when set to a number of bytes, replaces every cap of :data:`SIZE_LIMITS`
SIZE_LIMIT_ENV = "ICL_CMR_MAX_INPUT_BYTES"


def size_text(n: float) -> str:
    """A byte count as people read it: ``512 bytes``, ``1.5 GiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def available_memory() -> int:
    """Bytes of memory this process could still allocate (MemAvailable; all physical memory elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):  # pragma: no cover - no way to tell
        return 1 << 62


def _limit(kind: str) -> tuple[int, str]:
    """The cap of ``kind`` in bytes and where it comes from (for the message)."""
    override = os.environ.get(SIZE_LIMIT_ENV)
    if override:
        try:
            value = int(override)
        except ValueError:
            value = -1
        if value < 1:
            raise DataSourceError(f"{SIZE_LIMIT_ENV} must be a whole number of bytes >= 1; got {override!r}")
        return value, SIZE_LIMIT_ENV
    if kind not in SIZE_LIMITS:
        raise ValueError(f"unknown file kind {kind!r}; known: {', '.join(SIZE_LIMITS)}")  # a caller's mistake
    cap = SIZE_LIMITS[kind]
    return (available_memory(), "the memory available") if cap is None else (cap, f"cmr.files.SIZE_LIMITS[{kind!r}]")


_SPECIAL = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO), which could block the read forever"),
    (stat.S_ISCHR, "a character device (such as /dev/zero), which has no end"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_input_file(path, what: str = "input", *, kind: str = "text", max_bytes: int | None = None) -> Path:
    """Refuse a path that is not a regular, readable file of at most the cap of ``kind``.

    Nothing is opened: the checks use ``stat()`` (following symbolic links), so a named pipe
    never blocks and a 2 GiB file is refused without reading it.

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What the file is, for the message (``"recall table"``, ``"word-vector file"``).
    kind : {"json", "text", "array", "hdf5"}
        Which cap of :data:`SIZE_LIMITS` applies.
    max_bytes : int, optional
        A cap of the caller's instead (still replaced by :data:`SIZE_LIMIT_ENV` when set).

    Returns
    -------
    Path

    Raises
    ------
    DataSourceError
        The path does not exist, is a dangling link, a directory, a named pipe, a device or a
        socket, cannot be read, or is larger than its cap.
    """
    path = Path(path)
    label = f"{what} {str(path)!r}"
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise DataSourceError(f"{label} is a symbolic link to {os.readlink(path)!r}, which does not exist") from None
        raise DataSourceError(f"no such file: {str(path)!r} ({what} not found)") from None
    except OSError as exc:
        raise DataSourceError(f"cannot read {label}: {exc.strerror or exc}") from None
    for test, name in _SPECIAL:
        if test(info.st_mode):
            raise DataSourceError(f"{label} is {name}; expected a regular file")
    if not stat.S_ISREG(info.st_mode):  # pragma: no cover - every other file type is listed above
        raise DataSourceError(f"{label} is not a regular file")
    cap, source = _limit(kind) if max_bytes is None or os.environ.get(SIZE_LIMIT_ENV) else (max_bytes, "the caller")
    if info.st_size > cap:
        raise DataSourceError(f"{label} is {size_text(info.st_size)}; expected at most {size_text(cap)} "
                              f"(the cap for {kind} files, set by {source}; set {SIZE_LIMIT_ENV} to read larger files)")
    if not os.access(path, os.R_OK):
        raise DataSourceError(f"cannot read {label}: permission denied")
    return path


# --- HDF5: every dataset inside the file, every declared size within memory ----------------------

def check_hdf5_file(path, what: str = "file") -> None:
    """Refuse an HDF5 file that keeps data outside itself or declares more data than memory holds.

    Walks every link of the file with h5py (netCDF4 has no way to tell) without reading any
    data: an external link, a soft link to nothing, a dataset with external raw storage or a
    virtual dataset (each would read other files of this machine) is refused, and so is a
    file whose datasets declare more bytes in all than :func:`available_memory`. A file that
    is not HDF5 is left to its reader.

    Raises
    ------
    FileFormatError
        Data stored outside the file, a dangling link, or declared sizes beyond memory.
    OptionalDependencyError
        h5py is not installed.
    """
    path = Path(path)
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - h5py is a dependency
        raise OptionalDependencyError(
            f"reading {str(path)!r} needs h5py to check where its data are stored: pip install h5py") from exc
    try:
        handle = h5py.File(path, "r")
    except (OSError, ValueError):
        return  # not HDF5 (netCDF-3) or damaged: its reader reports it
    sizes = {}
    with handle:
        problem = None

        def visit(name, link):
            nonlocal problem
            if problem is not None:
                return problem
            where = "/" + name
            if isinstance(link, h5py.ExternalLink):
                problem = f"{where!r} is stored outside the file (an external link to {link.filename!r})"
            elif isinstance(link, h5py.SoftLink) and handle.get(name) is None:
                problem = f"{where!r} is a link to {link.path!r}, which is not in the file"
            elif isinstance(link, h5py.HardLink):
                item = handle.get(name)
                if isinstance(item, h5py.Dataset):
                    if item.external:
                        problem = (f"{where!r} is stored outside the file (external storage in "
                                   f"{os.fsdecode(item.external[0][0])!r})")
                    elif item.is_virtual:
                        problem = f"{where!r} is stored outside the file (a virtual dataset mapped onto other files)"
                    elif not _netcdf_dimension_only(item):
                        sizes[where] = (int(np.prod(item.shape, dtype=object)) * item.dtype.itemsize, item.shape)
            return problem

        try:
            handle.visititems_links(visit)
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            raise FileFormatError(f"{what} {str(path)!r} is not a readable HDF5 file: {type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    if problem is not None:
        raise FileFormatError(f"{what} {str(path)!r}: variable {problem}; expected every variable's data inside the file")
    total, available = sum(size for size, _ in sizes.values()), available_memory()
    if total > available:
        largest = max(sizes, key=lambda name: sizes[name][0])
        raise FileFormatError(
            f"{what} {str(path)!r} declares {size_text(total)} of data (variable {largest!r}: shape "
            f"{tuple(int(n) for n in sizes[largest][1])}, {size_text(sizes[largest][0])}); expected data that fit "
            f"in the {size_text(available)} of memory available")


def _netcdf_dimension_only(dataset) -> bool:
    """A netCDF-4 dimension without a coordinate variable: HDF5 declares it but no data is ever read."""
    name = dataset.attrs.get("NAME", b"") if "NAME" in dataset.attrs else b""
    return isinstance(name, bytes) and name.startswith(b"This is a netCDF dimension but not a netCDF variable")


# --- .npy / .npz ---------------------------------------------------------------------------------

def _array_header(stream, label: str, member: str = "") -> tuple:
    """(shape, dtype) of the ``.npy`` stream, without reading its data."""
    fmt = np.lib.format
    where = f"{label} (array {member!r})" if member else label
    try:
        version = fmt.read_magic(stream)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(stream)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        raise FileFormatError(f"{where} is not a valid .npy array file (its header does not read: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    if dtype.hasobject:
        raise FileFormatError(f"{where} is not a valid .npy array file: it holds Python objects, which are never "
                              "unpickled; expected numbers or text (save with numpy arrays of a plain dtype)")
    return tuple(int(n) for n in shape), dtype


def _check_declared(label: str, declared: int, stored: int | None) -> None:
    available = available_memory()
    if declared > available:
        raise FileFormatError(f"{label} declares {size_text(declared)} of array data; expected data that fit in the "
                              f"{size_text(available)} of memory available")
    if stored is not None and declared > stored:
        raise FileFormatError(f"{label} is not a valid .npy array file: it declares {size_text(declared)} of data but "
                              f"holds {size_text(stored)} (truncated?)")


def read_arrays(path, what: str = "array file", names=None) -> dict:
    """The arrays of an ``.npy`` file (``{"": array}``) or ``.npz`` file (``{name: array}``), checked first.

    :func:`check_input_file` (kind ``"array"``), then each header: a damaged header, Python
    objects (never unpickled), an array declaring more bytes than the file holds or than the
    memory available are refused before the array is allocated.

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What the file is, for messages.
    names : sequence of str, optional
        The arrays an ``.npz`` must hold (only these are read); others are ignored.

    Raises
    ------
    DataSourceError
        See :func:`check_input_file`.
    FileFormatError
        Not a valid ``.npy``/``.npz`` file, an array missing, or declared sizes as above.
    """
    path = check_input_file(path, what, kind="array")
    label = f"{what} {str(path)!r}"
    try:
        with open(path, "rb") as handle:
            if handle.read(6) == b"\x93NUMPY":
                handle.seek(0)
                shape, dtype = _array_header(handle, label)
                _check_declared(label, int(np.prod(shape, dtype=object)) * dtype.itemsize,
                                os.fstat(handle.fileno()).st_size - handle.tell())
                if names is not None:
                    raise FileFormatError(f"{label} is a .npy file of one array; expected an .npz with arrays "
                                          f"{', '.join(map(repr, names))}")
                handle.seek(0)
                return {"": np.load(handle, allow_pickle=False)}
            handle.seek(0)
            if not zipfile.is_zipfile(handle):
                raise FileFormatError(f"{label} is not a valid .npy or .npz array file (neither signature found)")
            handle.seek(0)
            with zipfile.ZipFile(handle) as archive:
                members = {info.filename[:-4] if info.filename.endswith(".npy") else info.filename: info
                           for info in archive.infolist()}
                wanted = list(members) if names is None else list(names)
                missing = [name for name in wanted if name not in members]
                if missing:
                    raise FileFormatError(f"{label} has no array {', '.join(map(repr, missing))}; it has "
                                          f"{', '.join(map(repr, members)) or 'none'}")
                declared = 0
                for name in wanted:
                    with archive.open(members[name]) as member:
                        shape, dtype = _array_header(member, label, name)
                        declared += int(np.prod(shape, dtype=object)) * dtype.itemsize
                _check_declared(label, declared, None)
                arrays = {}
                for name in wanted:
                    with archive.open(members[name]) as member:
                        arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                return arrays
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        if isinstance(exc, (FileFormatError, DataSourceError)):
            raise
        raise FileFormatError(f"{label} is not a valid .npy/.npz array file: damaged or truncated "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
