"""``icl-cmr reproduce NAME``: rerun one of the comparisons and recoveries documented in docs/.

Each NAME is a library function of :mod:`icl_cmr.analyses.reproduce`; this module parses its
options, calls it and prints (and writes) what it returns.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..reproduce import human_comparison, model_comparison, null_shares, published_fits, recovery, semantic_recovery

HELP = "rerun a documented comparison or parameter recovery (the tables and figures of docs/)"

#: NAME -> (module of icl_cmr.analyses.reproduce that computes it, one line on what it is, what it writes)
ANALYSES = {
    "published-fits": (
        published_fits,
        "CMR (paper, lsq) and Gaussian fits of every published head profile and of human lag-CRPs",
        "a table of docs/fitting.md (stdout; -o TABLE.md); --fits-dir DIR: the fits (.nc)",
    ),
    "human-comparison": (
        human_comparison,
        "fitted CMR parameters of heads, of human subjects and of the literature, side by side",
        "a table of docs/fitting.md (stdout; -o TABLE.md)",
    ),
    "null-shares": (
        null_shares,
        "shares of heads and subjects that are CMR-like beyond chance (permuted and smooth nulls)",
        "the table of docs/null-models.md (stdout; -o TABLE.md)",
    ),
    "recovery": (
        recovery,
        "parameter recovery of textbook CMR: simulate from known parameters, fit them back",
        "-o OUT.nc: the recall_fit dataset with true values; --figure PNG; a JSON line",
    ),
    "semantic-recovery": (
        semantic_recovery,
        "parameter recovery of semantic CMR on the Morton2013 study lists",
        "-o OUT.nc: the recall_fit dataset with true values; a JSON line",
    ),
    "model-comparison": (
        model_comparison,
        "localist vs semantic vs category CMR: likelihood, AIC, cross-validation, predictive check",
        "-o DIR: fits, cross-validations, comparison.md, checks (.nc); --figure PNG",
    ),
}

DESCRIPTION = """\
Rerun one of the study's documented analyses from the installed data (the study's published
head profiles and CMR grid, the bundled recall data sets) and write its table or dataset.
Each NAME has its own options: icl-cmr reproduce NAME --help.

What each NAME writes:
""" + "".join(f"  {name:<18} {writes}\n" for name, (_, _, writes) in ANALYSES.items()) + """
Run times at the defaults on 2 cores: published-fits about 70 s, human-comparison about 30 s,
semantic-recovery about 3 minutes, null-shares about 16 minutes, model-comparison about 40
minutes; recovery grows with --sets, --lists and the number of --free parameters.

Examples:
  icl-cmr reproduce published-fits -o fitting_table.md
  icl-cmr reproduce null-shares --no-smollm2 -o null_table.md
  icl-cmr reproduce recovery --sets 24 --lists 96 --free B_enc,B_rec,T -o recovery.nc
"""

#: the smallest value of each count option of the NAMEs (``--subjects 0`` is every subject; a
#: correlation of true and recovered values needs two --sets)
COUNT_MINIMUMS = {"sets": 2, "lists": 1, "list_length": 1, "jobs": 1, "seed": 0, "n_null": 1, "subjects": 0,
                  "folds": 2, "rep": 1, "maxiter": 1}

REFERENCE_HELP = ("folder with the study's published files (default: $ICL_CMR_REFERENCE, else the copy installed "
                  "with icl-cmr)")


class _AnalysisParser(argparse.ArgumentParser):
    """The parser of one NAME: fills the defaults that depend on other options (a figure next to -o)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        derive = getattr(namespace, "derived_defaults", None)
        if derive is not None:
            derive(namespace)
        return namespace, extras


# --- the options of each NAME ---------------------------------------------------------------------

def _published_fits_options(parser) -> None:
    parser.add_argument("--reference", type=Path, default=None, help=REFERENCE_HELP)
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="TABLE.md",
                        help="write the markdown table here")
    parser.add_argument("--fits-dir", type=Path, default=None, metavar="DIR",
                        help="also save each model's fits as netCDF here")
    parser.add_argument("--models", nargs="*", default=list(published_fits.MODELS), metavar="MODEL",
                        help=f"models to fit (default all: {', '.join(published_fits.MODELS)})")
    parser.set_defaults(output_args=("output", "fits_dir"))
    parser.add_argument("--humans", nargs="*", default=list(published_fits.HUMAN_DATA), metavar="SOURCE",
                        help="recall data sets (default: PEERS, Morton2013; none: give --humans alone)")


def _human_comparison_options(parser) -> None:
    parser.add_argument("--reference", type=Path, default=None, help=REFERENCE_HELP)
    parser.add_argument("--objective", choices=("paper", "lsq"), default="lsq", help="fitting objective (default lsq)")
    parser.add_argument("-o", "--out", type=Path, metavar="TABLE.md", help="write the table as markdown here")


def _null_shares_options(parser) -> None:
    parser.add_argument("--reference", type=Path, default=None, help=REFERENCE_HELP)
    parser.add_argument("--heads", type=Path, default=None, metavar="HEADS.nc",
                        help="SmolLM2 head profiles (.nc, from icl-cmr heads) instead of extracting them")
    parser.add_argument("--no-smollm2", action="store_true", help="skip the embedded model")
    parser.add_argument("--models", nargs="*", default=list(published_fits.MODELS), metavar="MODEL",
                        help=f"published models (default all: {', '.join(published_fits.MODELS)})")
    parser.add_argument("--n-null", type=int, default=null_shares.N_NULL,
                        help=f"null profiles per unit and null (default {null_shares.N_NULL})")
    parser.add_argument("-o", "--out", type=Path, metavar="TABLE.md", help="write the markdown table here")


def _recovery_options(parser) -> None:
    parser.add_argument("--sets", type=int, default=24, help="simulated parameter sets (default 24)")
    parser.add_argument("--lists", type=int, default=48, help="lists per simulated subject (default 48)")
    parser.add_argument("--list-length", type=int, default=24, help="items per list (default 24)")
    parser.add_argument("--jobs", type=int, default=2, help="subjects fitted in parallel threads (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the true values, simulations and fits (default 0)")
    parser.add_argument(
        "--free", default=",".join(recovery.FREE),
        help="comma-separated free parameters (default: the ten of Morton & Polyn 2016); the others "
        "are fixed at their defaults (Afc = Acf = 0, Dfc = Dcf = 0.85)",
    )
    parser.add_argument("-o", "--output", default="results/recall_recovery.nc", metavar="OUT.nc",
                        help="the recall_fit dataset with true values and correlations (default "
                        "results/recall_recovery.nc)")
    parser.add_argument("--figure", default=None, metavar="FIGURE.png",
                        help="true against recovered values (default: the output's name with .png, "
                        "results/recall_recovery.png)")
    parser.set_defaults(output_args=("output", "figure"), derived_defaults=_figure_beside_file)


def _semantic_recovery_options(parser) -> None:
    parser.add_argument("--sets", type=int, default=12, help="simulated subjects (parameter sets) (default 12)")
    parser.add_argument("--jobs", type=int, default=2, help="subjects fitted in parallel threads (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the true values, simulations and fits (default 0)")
    parser.add_argument("-o", "--output", default="results/semantic_recovery.nc", metavar="OUT.nc",
                        help="the recall_fit dataset with true values and correlations (default "
                        "results/semantic_recovery.nc)")


def _model_comparison_options(parser) -> None:
    from .options import add_item_files, add_recall_data_options

    variants = model_comparison.VARIANTS
    parser.add_argument("--source", default=model_comparison.SOURCE,
                        help=f"recall data: a bundled data set or a psifr-format CSV file (default "
                        f"{model_comparison.SOURCE}); the semantic variant needs an item pool "
                        f"({model_comparison.SOURCE}'s, or --vectors/--similarity), the category variant a bundled one")
    parser.add_argument("--subjects", type=int, default=10, help="first N subjects (0: all) (default 10)")
    parser.add_argument("--folds", type=int, default=2, help="leave-lists-out folds per subject (default 2)")
    parser.add_argument("--jobs", type=int, default=2, help="subjects fitted in parallel threads (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fits and simulations (default 0)")
    parser.add_argument("--rep", type=int, default=20,
                        help="simulated recall periods per list (predictive check) (default 20)")
    parser.add_argument("--maxiter", type=int, default=None, help="differential-evolution generations (default scipy's 1000)")
    parser.add_argument("-o", "--output", default="results/model_comparison", metavar="DIR",
                        help="folder of the fits, cross-validations, comparison and predictive checks (default "
                        "results/model_comparison)")
    parser.add_argument("--figure", default=None, metavar="FIGURE.png",
                        help="data against the fitted variants (default: next to the output folder, its name with "
                        ".png: results/model_comparison.png)")
    parser.add_argument("--variants", default=",".join(variants), metavar="NAME,...",
                        help=f"the variants to compare, at least two of {', '.join(variants)} (default all)")
    add_recall_data_options(parser)
    add_item_files(parser)
    parser.set_defaults(output_args=("output", "figure"), derived_defaults=_figure_beside_folder)


def _figure_beside_file(args) -> None:
    """``--figure`` when not given: next to ``-o``, its name with ``.png`` (never a file of the working tree's docs)."""
    if args.figure is None:
        args.figure = str(Path(args.output).with_suffix(".png"))


def _figure_beside_folder(args) -> None:
    """``--figure`` when not given: next to the output folder, its name with ``.png`` (never a file of the
    working tree's docs; not inside the folder, which is made only once the comparison runs)."""
    if args.figure is None:
        out = Path(args.output)
        if not out.name:  # "." or "/": name the folder it is
            out = out.resolve()
        args.figure = str(out.parent / f"{out.name}.png")


# --- what each NAME runs ------------------------------------------------------------------------------

def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


def _png(figure) -> None:
    from cmr.errors import ParameterError

    if Path(figure).suffix.lower() != ".png":
        raise ParameterError(f"--figure must be a .png file; got {figure!r}")


def _print_table(table: str, out=None) -> None:
    """Print a markdown table and, if ``out`` is given, write it there atomically."""
    if out:
        from cmr.io import atomic_write

        with atomic_write(out, suffix=".md") as tmp:
            tmp.write_text(table + "\n")
    print(table)


def _run_published_fits(args) -> None:
    table = published_fits.fit_published(models=args.models, humans=args.humans, reference=args.reference,
                                          fits_dir=args.fits_dir, log=_stderr)
    if args.output is not None:
        from cmr.io import atomic_write

        with atomic_write(args.output) as tmp:
            tmp.write_text(table)
    print(table)


def _run_human_comparison(args) -> None:
    _print_table(human_comparison.compare_parameters(reference=args.reference, objective=args.objective), args.out)


def _run_null_shares(args) -> None:
    table = null_shares.shares_beyond_chance(reference=args.reference, heads=args.heads, models=args.models,
                                    include_smollm2=not args.no_smollm2, n_null=args.n_null, log=_stderr)
    _print_table(table, args.out)


def _run_recovery(args) -> None:
    _png(args.figure)
    free = [name.strip() for name in args.free.split(",") if name.strip()]
    start = time.perf_counter()
    fits = recovery.recover_parameters(sets=args.sets, lists=args.lists, list_length=args.list_length, free=free,
                             rng=args.seed, n_jobs=args.jobs, output=args.output, figure=args.figure)
    print(json.dumps({"free": free, "sets": args.sets, "lists": args.lists, "list_length": args.list_length,
                      "seconds": round(time.perf_counter() - start, 1), "correlation": recovery.correlations(fits),
                      "median_nfev": int(fits["nfev"].median()), "output": args.output, "figure": args.figure}))


def _run_semantic_recovery(args) -> None:
    start = time.perf_counter()
    fits = semantic_recovery.recover_semantic(sets=args.sets, rng=args.seed, n_jobs=args.jobs, output=args.output)
    print(json.dumps({"sets": args.sets, "free": list(semantic_recovery.FREE),
                      "correlation": semantic_recovery.correlations(fits),
                      "seconds": round(time.perf_counter() - start, 1)}))


def _run_model_comparison(args) -> None:
    import pandas as pd

    from ...adapters.recall_data import load_recall_data
    from .options import model_patterns, recall_data_options

    _png(args.figure)
    variants = model_comparison.variants_of(args.variants, option="--variants")
    events = model_comparison.first_subjects(load_recall_data(args.source, **recall_data_options(args)),
                                             args.subjects)
    pools = {name: model_patterns(args, events, model_comparison.VARIANTS[name]) for name in variants}
    start = time.perf_counter()
    result = model_comparison.compare_variants(
        events, variants=variants, patterns=pools, subjects=0, folds=args.folds, rng=args.seed, n_jobs=args.jobs,
        rep=args.rep, maxiter=args.maxiter, output=args.output, figure=args.figure, label=args.source, log=_stderr)
    comparison = result.comparison
    print(model_comparison.comparison_table(comparison))
    worse = comparison["fits_worse_than_nested"] if "fits_worse_than_nested" in comparison else None
    print(json.dumps({"source": args.source, "subjects": len(pd.unique(events["subject"].values)),
                      "folds": args.folds, "best_model": comparison.attrs["best_model"],
                      "fits_worse_than_nested": {} if worse is None else {
                          str(m): [str(s) for s in comparison["subject"].values[row]]
                          for m, row in zip(comparison["model"].values, worse.values) if row.any()},
                      "seconds": {k: round(v, 1) for k, v in result.seconds.items()},
                      "total_seconds": round(time.perf_counter() - start, 1)}))


#: NAME -> (adds its options, runs it)
_COMMANDS = {
    "published-fits": (_published_fits_options, _run_published_fits),
    "human-comparison": (_human_comparison_options, _run_human_comparison),
    "null-shares": (_null_shares_options, _run_null_shares),
    "recovery": (_recovery_options, _run_recovery),
    "semantic-recovery": (_semantic_recovery_options, _run_semantic_recovery),
    "model-comparison": (_model_comparison_options, _run_model_comparison),
}


def register(sub):
    parser = sub.add_parser("reproduce", help=HELP, description=DESCRIPTION,
                            formatter_class=argparse.RawDescriptionHelpFormatter)

    def one_line_error(message):  # an unknown NAME: one line naming the choices, without the usage
        parser.exit(2, f"{parser.prog}: error: {message}; icl-cmr reproduce --help describes each\n")

    parser.error = one_line_error
    names = parser.add_subparsers(dest="analysis", metavar="NAME", required=True, parser_class=_AnalysisParser,
                                  title="analyses")
    for name, (module, line, _) in ANALYSES.items():
        analysis = names.add_parser(name, help=line, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        _COMMANDS[name][0](analysis)
        analysis.set_defaults(func=run)


def run(args) -> int:
    from .options import check_counts

    check_counts(args, **{name: low for name, low in COUNT_MINIMUMS.items() if hasattr(args, name)})
    _COMMANDS[args.analysis][1](args)
    return 0
