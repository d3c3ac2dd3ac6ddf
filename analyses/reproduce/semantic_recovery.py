"""Parameter recovery of semantic CMR: simulate Morton2013 subjects from known weights, fit them back.

Run: ``icl-cmr reproduce semantic-recovery [--sets 12] [--jobs 2] [-o OUT.nc]``.
Each simulated subject replays the 48 study lists of one psifr:Morton2013 subject (real items,
so semantic similarities matter) with parameters drawn from typical ranges; the same free
parameters are fitted back. Prints one JSON line with the correlations of true and recovered
values and writes the recall_fit dataset (with ``true_value`` and ``correlation``).
"""
from __future__ import annotations

import json
import sys
import time

FREE = ("B_enc", "B_rec", "T", "Scf", "Sff")
FIXED = dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)
RANGES = dict(B_enc=(0.4, 0.9), B_rec=(0.4, 0.95), T=(0.05, 0.3), Scf=(0.0, 0.3), Sff=(0.0, 2.0))


def add_arguments(parser) -> None:
    """The options of ``icl-cmr reproduce semantic-recovery``."""
    parser.add_argument("--sets", type=int, default=12, help="simulated subjects (parameter sets) (default 12)")
    parser.add_argument("--jobs", type=int, default=2, help="subjects fitted in parallel threads (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the true values, simulations and fits (default 0)")
    parser.add_argument("-o", "--output", default="results/semantic_recovery.nc", metavar="OUT.nc",
                        help="the recall_fit dataset with true values and correlations (default "
                        "results/semantic_recovery.nc)")


def run(args) -> int:
    """Simulate and fit back semantic CMR (``icl-cmr reproduce semantic-recovery``); write the fits."""
    import cmr
    from cmr.io import save_dataset
    from ...adapters.item_pools import load_item_patterns
    from ...adapters.recall_data import load_recall_data

    events = load_recall_data("psifr:Morton2013")
    patterns = load_item_patterns("psifr:Morton2013", categories=False)
    start = time.perf_counter()
    fits = cmr.parameter_recovery(args.sets, cmr.FitSpec(FREE, FIXED, patterns=patterns), ranges=RANGES,
                                  events=events, rng=args.seed, n_jobs=args.jobs, progress=False)
    save_dataset(fits, args.output)
    corr = {name: round(float(fits["correlation"].sel(parameter=name)), 3) for name in FREE}
    print(json.dumps({"sets": args.sets, "free": list(FREE), "correlation": corr,
                      "seconds": round(time.perf_counter() - start, 1)}))
    return 0


def main(argv=None) -> int:
    """Deprecated entry point of ``python -m icl_cmr.analyses.reproduce.semantic_recovery``: runs
    ``icl-cmr reproduce semantic-recovery``."""
    from cmr import deprecation
    from ..cli import main as cli_main

    deprecation.warn("python -m icl_cmr.analyses.reproduce.semantic_recovery is deprecated and will be removed in the next "
                    "release; use icl-cmr reproduce semantic-recovery")
    return cli_main(["reproduce", "semantic-recovery", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
