"""Deprecation aliases: an old public name keeps working for one release and says what replaced it.

Every alias warns with :class:`DeprecationWarning` pointing at the caller's line. The shapes:

* :func:`renamed` -- a function under its old name (``paper_crp = renamed("paper_crp", paper_lag_distribution)``);
* :func:`renamed_keywords` -- a keyword under its old name (``@renamed_keywords(seed="rng")``);
* :func:`keyword_only` -- options that became keyword-only still accepted by position;
* :func:`warn` -- anything else (an old option, an old value), at the caller's line;
* :func:`alias_moved_modules` -- whole modules that moved (``icl_cmr.adapters.transformer_lens``),
  importable under the old dotted name.

This module is public: the layers above ``cmr`` (``icl_cmr.adapters``, ``icl_cmr.analyses``) keep
their old names working through it too.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import inspect
import sys
import warnings

__all__ = ["renamed", "renamed_keywords", "keyword_only", "warn", "alias_moved_modules"]


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


def renamed(old: str, new, *, module: str = "cmr", new_module: str | None = None):
    """``new`` under its old name ``old``: same call, plus a DeprecationWarning naming the new one.

    ``old`` lives in ``module``; ``new`` in ``new_module`` (``module`` when None), so a function that
    moved to another module keeps its old home for one release.
    """
    message = (f"{module}.{old} is deprecated and will be removed in the next release; "
               f"use {new_module or module}.{new.__name__}")

    @functools.wraps(new)
    def alias(*args, **kwargs):
        warn(message)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated alias of :func:`{new_module or module}.{new.__name__}`.\n\n" + (new.__doc__ or "")
    return alias


def _name(func) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def renamed_keywords(**old_to_new: str):
    """Decorator: each keyword ``old`` of ``old_to_new`` keeps working as ``new`` for one release.

    A call that passes the old keyword warns and is passed on under the new one; passing both is
    a ``TypeError``, as any repeated argument is.
    """
    def wrap(func):
        @functools.wraps(func)
        def inner(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{_name(func)}() got {old!r} (the deprecated name) and {new!r}; pass {new!r}")
                    warn(f"{_name(func)}: the keyword {old!r} is deprecated and will be removed in the next "
                         f"release; use {new!r}")
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return inner

    return wrap


def keyword_only(func):
    """Decorator for a function whose options became keyword-only (after ``*``): for one release an
    option still passed by position is passed on by keyword, in the order the options are
    declared, with a DeprecationWarning that names them."""
    parameters = inspect.signature(func).parameters.values()
    positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)
    options = [p.name for p in parameters if p.kind == p.KEYWORD_ONLY]

    @functools.wraps(func)
    def inner(*args, **kwargs):
        if len(args) > positional:
            extra = args[positional:]
            if len(extra) > len(options):
                raise TypeError(f"{_name(func)}() takes {positional} positional arguments and "
                                f"{len(options)} options by keyword; {len(args)} were given by position")
            names = options[: len(extra)]
            repeated = [name for name in names if name in kwargs]
            if repeated:
                raise TypeError(f"{_name(func)}() got {', '.join(map(repr, repeated))} by position and by keyword")
            warn(f"{_name(func)}: passing {', '.join(names)} by position is deprecated and will be an error "
                 f"in the next release; pass {'it' if len(names) == 1 else 'them'} by keyword")
            kwargs.update(zip(names, extra))
            args = args[:positional]
        return func(*args, **kwargs)

    return inner


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
