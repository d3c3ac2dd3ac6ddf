"""Deprecation aliases: an old public name keeps working for one release and says what replaced it.

Every alias warns with :class:`DeprecationWarning` pointing at the caller's line. Three shapes:

* :func:`renamed` -- a function under its old name (``paper_crp = renamed("paper_crp", paper_lag_distribution)``);
* :func:`warn` -- anything else (an old keyword, an old option), at the caller's line;
* :func:`alias_moved_modules` -- whole modules that moved (``icl_cmr.adapters.transformer_lens``),
  importable under the old dotted name.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["renamed", "warn", "alias_moved_modules"]


def _import_machinery(frame) -> bool:
    """A frame of importlib's bootstrap, which :func:`warnings.warn` skips when it counts levels."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def _caller_level() -> int:
    """The ``stacklevel`` (for a warn called by :func:`warn`) of the first frame outside this module
    and the import machinery."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename == __file__ or _import_machinery(frame)):
        level += not _import_machinery(frame)
        frame = frame.f_back
    return level


def warn(message: str, *, skip: int = 0) -> None:
    """Warn ``message`` as a DeprecationWarning at the first caller outside the library's alias code.

    ``skip``: further frames to pass over; a public function warning about its own deprecated
    arguments passes 1, so the warning points at the line that called it.
    """
    warnings.warn(message, DeprecationWarning, stacklevel=_caller_level() + skip)


def renamed(old: str, new, *, module: str = "cmr"):
    """``new`` under its old name ``old``: same call, plus a DeprecationWarning naming the new one."""
    message = (f"{module}.{old} is deprecated and will be removed in the next release; "
               f"use {module}.{new.__name__}")

    @functools.wraps(new)
    def alias(*args, **kwargs):
        warn(message)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated alias of :func:`{module}.{new.__name__}`.\n\n" + (new.__doc__ or "")
    return alias


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module name as a module that re-exports its new home(s) and warns once."""

    def __init__(self, moved: dict[str, tuple[str, ...]]):
        self.moved = moved

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.moved:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        targets = self.moved[module.__name__]
        warn(f"{module.__name__} is deprecated and will be removed in the next release; "
             f"import from {' and '.join(targets)}")
        names = []
        for target in targets:
            new = importlib.import_module(target)
            for name in getattr(new, "__all__", ()):
                setattr(module, name, getattr(new, name))
                names.append(name)
        module.__all__ = names
        module.__doc__ = f"Deprecated: moved to {' and '.join(targets)}."


def alias_moved_modules(moved: dict[str, tuple[str, ...]]) -> None:
    """Make each old dotted module name in ``moved`` importable as an alias of its new module(s)."""
    if not any(isinstance(finder, _MovedModules) and finder.moved == moved for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules(moved))
