"""The ``icl-cmr`` command line.

Each subcommand lives in its own module under :mod:`icl_cmr.analyses.commands` and exposes
``register(subparsers)``; modules import heavy libraries (torch, matplotlib) only inside
the function that runs the command, so ``icl-cmr --help`` stays fast.
"""
from __future__ import annotations

import argparse
import contextlib
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
    "heads",
    "grid",
    "fit",
    "null",
    "top_heads",
    "export",
    "plot",
    "ablate",
    "recall_lm",
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


#: argument names that hold what a command writes (a file or a directory)
OUTPUT_ARGS = ("output", "out")


def _inputs(args):
    """Every argument value that names an existing file or directory, other than the outputs."""
    for name, value in vars(args).items():
        if name in OUTPUT_ARGS or name == "func":
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


def _outputs(args):
    """The outputs of a command, each checked not to be one of its inputs."""
    outputs = [getattr(args, name) for name in OUTPUT_ARGS if getattr(args, name, None) is not None]
    for output in outputs:
        if not os.path.exists(output):
            continue
        for name, item in _inputs(args):
            if os.path.samefile(output, item):
                raise OutputError(
                    f"output {str(output)!r} is also an input (argument {name}); writing it would replace "
                    "the input: choose another output name"
                )
    return outputs


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
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"icl-cmr {args.command}: error: {exc.strerror or exc}{where} ({type(exc).__name__})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"icl-cmr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
