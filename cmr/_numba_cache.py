"""Where numba keeps compiled kernels, and what to do when no such place is writable.

numba caches every ``@njit(cache=True)`` kernel next to its source (``__pycache__``) or in the
user's cache directory; when neither is writable (a read-only install and a read-only HOME,
as on shared lab machines or in containers) it refuses to define the kernel, so the import
fails. :func:`ensure_cache_location` detects that case before any kernel is defined and
points numba at a private temporary directory instead, with one warning.
"""
from __future__ import annotations

import os
import stat
import tempfile
import warnings
from pathlib import Path

__all__ = ["ensure_cache_location", "kernel_directories"]


def kernel_directories() -> list[Path]:
    """The directories of this package that hold ``@njit(cache=True)`` kernels."""
    root = Path(__file__).resolve().parent
    return [root, root / "textbook", root / "paper"]


def _probe():  # a stand-in function: numba's locators read its code object only
    return None


def _cacheable(directory: Path) -> bool:
    """Whether numba finds a writable cache place for a kernel defined in ``directory``."""
    from numba.core import caching

    source = next(iter(sorted(directory.glob("*.py"))), None)
    if source is None:
        return True
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # renamed in numba 0.60
    return any(cls.from_function(_probe, str(source)) is not None for cls in impl._locator_classes)


def _private_directory() -> Path:
    """A temporary cache directory only this user can write (numba's cache files are pickles)."""
    path = Path(tempfile.gettempdir()) / f"icl-cmr-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
        owned = not hasattr(os, "getuid") or info.st_uid == os.getuid()
        if stat.S_ISDIR(info.st_mode) and owned and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return path
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="icl-cmr-numba-"))


def ensure_cache_location() -> Path | None:
    """Point numba at a temporary cache directory when it has nowhere to cache this package's kernels.

    Returns the directory chosen, or None when numba's own locations work (or ``NUMBA_CACHE_DIR``
    is set). Warns once (``RuntimeWarning``) when it falls back.
    """
    from numba.core import config

    if config.CACHE_DIR or getattr(config, "CACHE_LOCATOR_CLASSES", ""):
        return None  # the user chose where numba caches
    if all(_cacheable(directory) for directory in kernel_directories()):
        return None
    try:
        directory = _private_directory()
    except OSError:
        return None  # no temporary directory either: numba's own error says so
    config.CACHE_DIR = str(directory)
    warnings.warn(
        f"numba cannot write its cache next to the installed package nor in the user's cache directory; "
        f"compiled kernels are cached in {directory} instead (set NUMBA_CACHE_DIR to choose a place)",
        RuntimeWarning,
        stacklevel=2,
    )
    return directory
