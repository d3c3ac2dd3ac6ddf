"""The numba settings every kernel compiles with, in one place.

Every kernel is ``@njit(**JIT)`` (plus ``inline="always"`` for the walk steps of
:mod:`cmr._transitions`, ``parallel=True`` for the teacher-forced grids):

* ``cache=True``: compiled machine code is kept on disk, so a fresh interpreter loads a kernel
  instead of compiling it (where, see :mod:`cmr._numba_cache`);
* ``nogil=True``: a running kernel releases the GIL, so fits and simulations spread over threads.

No explicit signatures: those compile at import (see docs/architecture.md). A test parses every
kernel module and fails on a decorator that spells these settings out instead.
"""
from __future__ import annotations

__all__ = ["JIT"]

#: keyword arguments of ``numba.njit`` for every kernel of the package
JIT = {"cache": True, "nogil": True}
