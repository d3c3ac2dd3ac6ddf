"""Parameter recovery of textbook CMR fits: simulate from known parameters, fit, compare.

Run: ``icl-cmr reproduce recovery [--sets 24] [--jobs 2] [--free B_enc,B_rec,...] [-o OUT.nc]``.
Writes the recall_fit dataset with ``true_value`` and ``correlation``, a figure (``--figure``;
by default the output's name with ``.png``) and prints one JSON summary line.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

RECOVERY_FIXED = dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)
# true values are drawn from ranges typical of fits to human free recall (Morton & Polyn
# 2016; cymr's Morton2013 example): data simulated from, e.g., X2 = 1.5 stop after 2-3
# recalls and carry almost no information about the other parameters
RECOVERY_RANGES = dict(
    Lfc=(0.1, 0.9), Lcf=(0.1, 0.9), P1=(0.5, 8.0), P2=(0.5, 4.0), B_enc=(0.3, 0.9),
    B_start=(0.1, 0.9), B_rec=(0.3, 0.95), T=(0.05, 0.3), X1=(0.001, 0.05), X2=(0.1, 0.4),
)


def add_arguments(parser) -> None:
    """The options of ``icl-cmr reproduce recovery``."""
    parser.add_argument("--sets", type=int, default=24, help="simulated parameter sets (default 24)")
    parser.add_argument("--lists", type=int, default=48, help="lists per simulated subject (default 48)")
    parser.add_argument("--list-length", type=int, default=24, help="items per list (default 24)")
    parser.add_argument("--jobs", type=int, default=2, help="subjects fitted in parallel threads (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the true values, simulations and fits (default 0)")
    parser.add_argument(
        "--free", default=",".join(("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2")),
        help="comma-separated free parameters (default: the ten of Morton & Polyn 2016); the others "
        "are fixed at their defaults (Afc = Acf = 0, Dfc = Dcf = 0.85)",
    )
    parser.add_argument("-o", "--output", default="results/recall_recovery.nc", metavar="OUT.nc",
                        help="the recall_fit dataset with true values and correlations (default "
                        "results/recall_recovery.nc)")
    parser.add_argument("--figure", default=None, metavar="FIGURE.png",
                        help="true against recovered values (default: the output's name with .png, "
                        "results/recall_recovery.png)")
    parser.set_defaults(output_args=("output", "figure"), derived_defaults=default_figure)


def default_figure(args) -> None:
    """``--figure`` when not given: next to ``-o``, its name with ``.png`` (never a file of the working tree's docs)."""
    if args.figure is None:
        args.figure = str(Path(args.output).with_suffix(".png"))


def run(args) -> int:
    """Simulate, fit back and compare (``icl-cmr reproduce recovery``); write the fits and the figure."""
    from cmr.errors import ParameterError

    if Path(args.figure).suffix.lower() != ".png":
        raise ParameterError(f"--figure must be a .png file; got {args.figure!r}")

    from cmr.textbook.fit import parameter_recovery
    from cmr.textbook.spec import FitSpec
    from cmr.io import save_dataset

    from .. import plots

    free = [name.strip() for name in args.free.split(",") if name.strip()]
    start = time.perf_counter()
    fits = parameter_recovery(
        args.sets, FitSpec(free, RECOVERY_FIXED), ranges={name: RECOVERY_RANGES[name] for name in free},
        list_length=args.list_length, n_lists=args.lists, rng=args.seed, n_jobs=args.jobs,
    )
    seconds = time.perf_counter() - start
    save_dataset(fits, args.output)
    plots.save_figure(plots.parameter_recovery(fits), args.figure)
    corr = {str(p): round(float(r), 4) for p, r, f in
            zip(fits["parameter"].values, fits["correlation"].values, fits["free"].values) if f}
    print(json.dumps({"free": free, "sets": args.sets, "lists": args.lists, "list_length": args.list_length,
                      "seconds": round(seconds, 1), "correlation": corr,
                      "median_nfev": int(fits["nfev"].median()), "output": args.output,
                      "figure": args.figure}))
    return 0


def main(argv=None) -> int:
    """Deprecated entry point of ``python -m icl_cmr.analyses.reproduce.recovery``: runs ``icl-cmr reproduce recovery``."""
    from cmr import deprecation
    from ..cli import main as cli_main

    deprecation.warn("python -m icl_cmr.analyses.reproduce.recovery is deprecated and will be removed in the next release; "
                    "use icl-cmr reproduce recovery")
    return cli_main(["reproduce", "recovery", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
