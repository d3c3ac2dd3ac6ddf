"""Localist vs semantic vs category CMR on Morton2013: cross-validated likelihood, AIC, predictive check.

Run: ``icl-cmr reproduce model-comparison [--subjects 10] [--folds 2] [--jobs 2] -o OUT_DIR``; a lab's
own recall table with ``--source data.csv`` and the recall-data options of fit-recall (``--columns``,
``--trial-types``, ``--list-keys``, ``--normalize-items``), its own pool with ``--vectors`` or
``--similarity`` and ``--variants localist,semantic``. Fits the variants of :data:`VARIANTS` to each
subject (maximum likelihood), scores them by leave-lists-out cross-validation, compares them
(:func:`cmr.compare_models`, with the nested-model check) and checks the best one against the data (:func:`cmr.posterior_predictive`). Writes ``fits_<model>.nc``,
``cv_<model>.nc``, ``comparison.nc``, ``predictive.nc``, ``comparison.md`` (the table of
docs/model-comparison.md) and the figure, and prints one JSON summary line.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

#: the variants of docs/model-comparison.md -> their models of cmr.COMPARISON_MODELS (the ten parameters
#: of Morton & Polyn 2016 free, D tied to 1 - L as in their models; the variants add their pattern weights)
VARIANTS = {"localist": "textbook", "semantic": "semantic", "category": "category"}


def markdown_table(comparison) -> str:
    """The comparison as a markdown table (one row per model)."""
    import numpy as np

    rows = ["| model | k | total logL | AIC | ΔAIC | Akaike weight | subjects best by AIC |"
            + (" cross-validated logL | subjects best by CV | mean per-subject ΔCV logL vs best | Wilcoxon p |"
               if "cv_logl" in comparison else ""),
            "|---|---|---|---|---|---|---|" + ("---|---|---|---|" if "cv_logl" in comparison else "")]
    for m in comparison["model"].values:
        c = comparison.sel(model=m)
        row = (f"| {m} | {int(c['k'])} | {float(c['total_logl']):.1f} | {float(c['total_aic']):.1f} | "
               f"{float(c['delta_aic']):.1f} | {float(c['akaike_weight']):.3g} | {int(c['n_best_aic'])} |")
        if "cv_logl" in comparison:
            p = float(c["paired_p"])
            row += (f" {float(c['total_cv_logl']):.1f} | {int(c['n_best_cv'])} | "
                    f"{float(c['paired_statistic']):.2f} | {'—' if np.isnan(p) else f'{p:.3g}'} |")
        rows.append(row)
    return "\n".join(rows) + "\n"


def add_arguments(parser) -> None:
    """The options of ``icl-cmr reproduce model-comparison``."""
    parser.add_argument("--source", default="psifr:Morton2013",
                        help="recall data: a bundled data set or a psifr-format CSV file (default psifr:Morton2013); "
                        "the semantic variant needs an item pool (psifr:Morton2013's, or --vectors/--similarity), "
                        "the category variant a bundled one")
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
    parser.add_argument("--variants", default=",".join(VARIANTS), metavar="NAME,...",
                        help=f"the variants to compare, at least two of {', '.join(VARIANTS)} (default all)")
    from ..commands.options import add_item_files, add_recall_data_options

    add_recall_data_options(parser)
    add_item_files(parser)
    parser.set_defaults(output_args=("output", "figure"), derived_defaults=default_figure)


def default_figure(args) -> None:
    """``--figure`` when not given: next to the output folder, its name with ``.png`` (never a file of the
    working tree's docs; not inside the folder, which is made only once the comparison runs)."""
    if args.figure is None:
        out = Path(args.output)
        if not out.name:  # "." or "/": name the folder it is
            out = out.resolve()
        args.figure = str(out.parent / f"{out.name}.png")


def run(args) -> int:
    """Fit, cross-validate and compare the variants (``icl-cmr reproduce model-comparison``); write them."""
    import numpy as np
    import pandas as pd

    import cmr
    from cmr.io import atomic_write, save_dataset
    from ...adapters.recall_data import load_recall_data
    from ..plots import predictive_check

    from cmr.errors import ParameterError
    from ..commands.options import model_patterns, recall_data_options

    if Path(args.figure).suffix.lower() != ".png":
        raise ParameterError(f"--figure must be a .png file; got {args.figure!r}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or len(variants) < 2 or len(set(variants)) < len(variants):
        raise ParameterError(f"--variants takes two or more of {', '.join(VARIANTS)}, each once; got {args.variants!r}")
    out = Path(args.output)
    events = load_recall_data(args.source, **recall_data_options(args))
    if args.subjects:
        keep = pd.unique(events["subject"].values)[: args.subjects]
        events = events.isel(trial=np.flatnonzero(np.isin(events["subject"].values, keep)))
    pools = {name: model_patterns(args, events, VARIANTS[name]) for name in variants}
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fits, cvs, seconds = {}, {}, {}
    for name in variants:
        t0 = time.perf_counter()
        spec = cmr.comparison_spec(VARIANTS[name], pools[name])
        options = dict(rng=args.seed, n_jobs=args.jobs, progress=False,
                       de_options=None if args.maxiter is None else dict(maxiter=args.maxiter))
        # a variant nesting the localist one searches from its fit too (its weights at 0 give it exactly)
        nested_fit = fits.get("localist") if name != "localist" else None
        fits[name] = cmr.fit_recall(events, spec, start=nested_fit, **options)
        cvs[name] = cmr.cross_validate(events, spec, n_folds=args.folds, **options)
        save_dataset(fits[name], out / f"fits_{name}.nc")
        save_dataset(cvs[name], out / f"cv_{name}.nc")
        seconds[name] = time.perf_counter() - t0
        print(f"{name}: {seconds[name]:.0f} s", file=sys.stderr)
    nested = {outer: inner for outer, inner in (("semantic", "localist"), ("category", "localist"))
              if outer in fits and inner in fits}
    comparison = cmr.compare_models(fits, cv=cvs, nested=nested)
    save_dataset(comparison, out / "comparison.nc")
    checks = {}
    for name in variants:
        checks[name] = cmr.posterior_predictive(events, fits[name], n_rep=args.rep, rng=args.seed, patterns=pools[name])
        save_dataset(checks[name], out / f"predictive_{name}.nc")
    table = markdown_table(comparison)
    with atomic_write(out / "comparison.md", suffix=".md") as tmp:
        Path(tmp).write_text(table)
    n_subjects = len(pd.unique(events["subject"].values))
    fig = predictive_check(checks, title=f"{args.source}, {n_subjects} subjects: data and fitted CMR variants")
    with atomic_write(Path(args.figure), suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=160)
    print(table)
    print(json.dumps({"source": args.source, "subjects": n_subjects,
                      "folds": args.folds, "best_model": comparison.attrs["best_model"],
                      "fits_worse_than_nested": {str(m): [str(s) for s in comparison["subject"].values[row]]
                                                 for m, row in zip(comparison["model"].values,
                                                                   comparison["fits_worse_than_nested"].values)
                                                 if row.any()} if "fits_worse_than_nested" in comparison else {},
                      "seconds": {k: round(v, 1) for k, v in seconds.items()},
                      "total_seconds": round(time.perf_counter() - start, 1)}))
    return 0


def main(argv=None) -> int:
    """Deprecated entry point of ``python -m icl_cmr.analyses.reproduce.model_comparison``: runs
    ``icl-cmr reproduce model-comparison``."""
    from cmr import deprecation
    from ..cli import main as cli_main

    deprecation.warn("python -m icl_cmr.analyses.reproduce.model_comparison is deprecated and will be removed in the next "
                    "release; use icl-cmr reproduce model-comparison")
    return cli_main(["reproduce", "model-comparison", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
