"""The ``icl-cmr`` command line.

Each subcommand lives in its own module under :mod:`icl_cmr.analyses.commands` and exposes
``register(subparsers)``; modules import heavy libraries (torch, matplotlib) only inside
the function that runs the command, so ``icl-cmr --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from cmr.errors import ICLCMRError

# Subcommand modules, in the order --help lists them.
COMMANDS = (
    "lag_crp",
    "spc",
    "pfr",
    "loglik",
    "fit_recall",
    "heads",
    "grid",
    "fit",
    "export",
    "ablate",
    "composition",
    "train_toy",
    "run_study",
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


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ICLCMRError as exc:
        print(f"icl-cmr {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"icl-cmr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
