"""The ``icl-cmr`` command line.

Each subcommand lives in its own module under :mod:`icl_cmr.analyses.commands` and exposes
``register(subparsers)``; modules import heavy libraries (torch, matplotlib) only inside
the function that runs the command, so ``icl-cmr --help`` stays fast.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys
import warnings

from cmr.errors import ICLCMRError, OutputError
from cmr.io import output_lock

# Subcommand modules, in the order --help lists them.
COMMANDS = (
    "lag_crp",
    "spc",
    "pfr",
    "recall_analyses",
    "loglik",
    "fit_recall",
    "compare",
    "fit_population",
    "heads",
    "repetition_heads",
    "grid",
    "fit",
    "null",
    "top_heads",
    "export",
    "plot",
    "ablate",
    "dissociate",
    "recall_lm",
    "recall_battery",
    "composition",
    "train_toy",
    "run_study",
    "reproduce",
    "bench",
)

DESCRIPTION = """\
icl-cmr: the context maintenance and retrieval model (CMR) for human free recall and for
attention heads of language models. Human recall data and attention heads become the same
lag-profile datasets (netCDF), analysed and fitted by the same code.

Typical use:
  icl-cmr lag-crp psifr:Morton2013 -o morton_crp.nc     # human lag-CRP per subject
  icl-cmr heads -o heads.nc                             # lag profiles of every head of the embedded LLM
  icl-cmr fit heads.nc --objective lsq -o fits.nc       # CMR fits, same call for heads and humans
  icl-cmr run -o results                                # the whole study on the embedded defaults
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="icl-cmr", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"icl_cmr.analyses.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"icl_cmr.analyses.commands.{name}":
                continue  # command not part of this build
            raise
        module.register(sub)
    return parser


#: argument names that hold what a command writes (a file or a directory); a command with other
#: outputs lists them all with ``parser.set_defaults(output_args=(...))``
OUTPUT_ARGS = ("output", "out")


def _output_names(args) -> tuple:
    return tuple(getattr(args, "output_args", None) or OUTPUT_ARGS)


def _inputs(args):
    """Every argument value that names an existing file or directory, other than the outputs."""
    outputs = _output_names(args)
    for name, value in vars(args).items():
        if name in outputs or name in ("func", "output_args"):
            continue
        for item in _flat(value):
            if isinstance(item, (str, os.PathLike)) and os.path.exists(item):
                yield name, item


def _flat(value):
    """The leaves of nested lists and tuples (``--with FILE:PREFIX`` parses to a tuple)."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flat(item)
    else:
        yield value


def _option(name: str) -> str:
    return "-o" if name in OUTPUT_ARGS else f"--{name.replace('_', '-')}"


def _outputs(args):
    """The outputs of a command, each checked not to be one of its inputs nor another of its outputs."""
    named = [(name, getattr(args, name)) for name in _output_names(args) if getattr(args, name, None) is not None]
    seen = {}
    for name, output in named:
        where = os.path.realpath(output)  # the same file under two spellings (./a.nc, a.nc, a link)
        if where in seen:
            raise OutputError(
                f"{_option(seen[where][0])} {str(seen[where][1])!r} and {_option(name)} {str(output)!r} name the same "
                "file; each output needs its own name, or one would replace the other"
            )
        seen[where] = (name, output)
        if not os.path.exists(output):
            continue
        for input_name, item in _inputs(args):
            if os.path.samefile(output, item):
                raise OutputError(
                    f"output {str(output)!r} is also an input (argument {input_name}); writing it ({_option(name)}) "
                    "would replace the input: choose another output name"
                )
    return [output for _, output in named]


def execute(args) -> int:
    """Run a parsed command: refuse an output that is one of its inputs, hold a lock on each output.

    Errors propagate (:func:`main` turns them into one line); tests call this to see their type.
    """
    with contextlib.ExitStack() as locks:  # a second process writing the same output stops at once
        for output in _outputs(args):
            locks.enter_context(output_lock(output))
        return int(args.func(args) or 0)


def _library_notices_never_fail() -> None:
    """A library's deprecation notice is never an error of the user's command, even under ``-W error``.

    Deprecations stay hidden and FutureWarnings are printed once, as Python does by default.
    """
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
    warnings.filterwarnings("default", category=FutureWarning)


#: errors that only a write raises: a third-party writer that fails with one names no file, so the
#: command's outputs are named instead
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def _writing(args, exc: OSError) -> str:
    outputs = [getattr(args, name) for name in _output_names(args) if getattr(args, name, None) is not None]
    if exc.errno not in _WRITE_ERRNOS or not outputs:
        return ""
    return " while writing " + ", ".join(repr(str(output)) for output in outputs)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            _library_notices_never_fail()
            return execute(args)
    except ICLCMRError as exc:
        print(f"icl-cmr {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the environment (disk full, permissions): one line, no traceback
        where = f" ({exc.filename})" if exc.filename else _writing(args, exc)
        print(f"icl-cmr {args.command}: error: {exc.strerror or exc}{where} ({type(exc).__name__})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"icl-cmr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
