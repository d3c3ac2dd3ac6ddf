"""``icl-cmr fit-recall``: maximum-likelihood CMR fits of free-recall data, per subject or pooled."""
from __future__ import annotations

HELP = "fit CMR (localist, semantic or category) to recall sequences by maximum likelihood"

DESCRIPTION = """\
Fit CMR (cymr's parameterisation) to each subject of a free-recall data set by maximum
likelihood: seeded differential evolution, then a local L-BFGS-B polish; subjects run in
parallel threads (--jobs). The likelihood equals cymr's (see icl-cmr loglik).

On a dask cluster each subject (each subject and fold with --cv) is one task: --workers N
starts N worker processes on this machine for the fit, --scheduler ADDRESS uses the workers
of a running scheduler (dask scheduler; dask worker ADDRESS on each machine). The numbers
equal a local run's: each subject's searches are seeded from --seed and its label
(docs/fitting-recall.md, "On a cluster"). Needs pip install 'icl-cmr[analyses]'.

SOURCE is a bundled data set (psifr:Morton2013, psifr:peers_notask, cymr:Morton2013_mixed)
or a psifr-format CSV file. --free names the fitted parameters; --fixed gives a JSON object
of fixed values; --tie NAME=EXPR ties a parameter to others (e.g. --tie B_rec=B_enc,
--tie "Dfc=1 - Lfc"; arithmetic only, never evaluated as code); parameters neither free,
fixed nor tied take their defaults (docs/parameters.md). --bounds overrides search ranges,
e.g. --bounds T=0.01:2,X1=0:0.1.

--patterns semantic|category|semantic+category adds the item pool of SOURCE (Morton2013:
psifr's cosine distances as similarities, category units) for semantic / category CMR;
their weights Sfc, Scf, Sff, Cfc, Ccf may then be free. --vectors FILE (your own word
vectors) or --similarity FILE (your own item similarities) gives semantic CMR for any
SOURCE (docs/semantic-cmr.md, "Your own word vectors"). A lab's own export reads with
--columns, --trial-types, --list-keys and --normalize-items (as cmr.from_table).
Each subject is searched until its best two independent searches agree within 0.1 log
units (converged), at least 2 and at most --max-restarts (default 8); --restarts N runs
exactly N instead (1: convergence not checked); --pooled fits one parameter set to all
subjects together; --cv K writes the leave-lists-out cross-validated likelihood (kind
recall_cv) instead of the fits.

--model cmr2 fits CMR2 (docs/cmr2.md): one network per session, lists in order, prior-list
intrusions scored; its parameters B_distract and C_thresh may be free, fixed or bounded like
the others. --session KEY names the variable that labels sessions (session for
psifr:Morton2013; default: --list-keys, else one session per subject). CMR2 is localist:
--patterns, --vectors, --similarity, --pool-size and --cv are refused with it.

The output (kind recall_fit) holds, per subject and parameter, the fitted values, plus
log-likelihood, AIC, BIC, number of scored events n, function evaluations, iterations,
success flag, message, time and every restart. Open it with cmr.load_dataset. With
-o FITS.csv (or .parquet) the output is a table instead: one row per subject, one column
per parameter, then logl, n, AIC, BIC and the fit's diagnostics. After the fit one line
names the estimates within 0.1% of their search range of a bound (at_bound), the subjects
with fewer than 10 scored events per free parameter (few_events) and the subjects whose best
two searches still differ by more than 0.1 log units (not converged: rerun them with a larger
--max-restarts, see docs/fitting-recall.md); nothing when none is.

Examples:
  icl-cmr fit-recall psifr:Morton2013 --free Lfc,Lcf,P1,P2,B_enc,B_start,B_rec,T,X1,X2 -o fits.nc
  icl-cmr fit-recall psifr:Morton2013 --free B_enc,B_rec,T,Sff --patterns semantic --restarts 3 -o sem.nc
  icl-cmr fit-recall data.csv --free B_enc,T --tie B_rec=B_enc --cv 4 -o cv.nc --jobs 2
  icl-cmr fit-recall psifr:peers_notask --free B_enc,B_rec,T,X1,X2 --scheduler tcp://10.0.0.5:8786 -o fits.nc
  icl-cmr fit-recall psifr:Morton2013 --model cmr2 --session session --free B_enc,T,B_distract,C_thresh -o cmr2.nc
"""

def register(sub):
    import argparse

    from .options import add_cluster_options, add_fit_spec_options, add_output, add_patterns, add_recall_data_options

    p = sub.add_parser(
        "fit-recall", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", help="bundled data set name or a psifr-format CSV file")
    add_recall_data_options(p)
    add_fit_spec_options(p)
    add_patterns(p)
    add_output(p, "FITS.nc")
    p.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    p.add_argument("--jobs", type=int, default=1,
                   help="threads of this process: subjects at once, the rest split populations (default 1)")
    p.add_argument("--restarts", type=_restarts, default="auto", metavar="N|auto",
                   help="independent searches per subject, all kept (default auto: until the best two agree)")
    p.add_argument("--max-restarts", type=int, default=8, metavar="N",
                   help="--restarts auto: most searches per subject (default 8)")
    p.add_argument("--start-library", action=argparse.BooleanOptionalAction, default=None,
                   help="also polish from the ten starts of the start library (default: with --restarts auto "
                        "only; docs/fitting-recall.md)")
    p.add_argument("--pooled", action="store_true", help="one fit to all subjects together (group fit)")
    p.add_argument("--cv", type=int, default=None, metavar="K", help="write K-fold leave-lists-out cross-validation")
    p.add_argument("--subjects", default=None, metavar="S,S,...", help="fit only these subjects")
    p.add_argument("--pool-size", type=int, default=None, metavar="N", help="cymr pool size (default: list-sized context)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--model", choices=("cmr", "cmr2"), default="cmr",
                   help="textbook CMR (default) or CMR2: sessions of lists with prior-list intrusions")
    p.add_argument("--session", default=None, metavar="KEY",
                   help="--model cmr2: the variable that labels sessions (e.g. session)")
    add_cluster_options(p)
    p.set_defaults(func=run)


def _restarts(text: str):
    """``--restarts``: ``auto`` or a positive integer."""
    import argparse

    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a positive integer; got {text!r}")
    return value


def run(args) -> int:
    import warnings

    import numpy as np

    import cmr
    from cmr.errors import FitWarning, RecallDataError
    from cmr.io import result_format, write_result
    from ...adapters.recall_data import load_recall_data
    from ..cluster import describe_executor
    from .options import (check_counts, cluster_of, item_patterns_of, parse_bounds, parse_ties,
                          recall_data_options, refuse_textbook_options)

    result_format(args.output)
    refuse_textbook_options(args, "fit-recall")
    check_counts(args, jobs=1)
    cluster = cluster_of(args)  # options checked before the data are read
    free = [name.strip() for name in args.free.split(",") if name.strip()]
    fixed = cmr.read_parameters(args.fixed) if args.fixed else {}
    events = load_recall_data(args.source, **recall_data_options(args))
    if args.subjects:
        wanted = [s.strip() for s in args.subjects.split(",")]
        labels = events["subject"].values.astype(str)
        keep = np.isin(labels, wanted)
        if not keep.any():
            raise RecallDataError(f"--subjects {args.subjects!r} matches no subject of {args.source}")
        events = events.isel(trial=np.flatnonzero(keep))
    if args.cv is not None and args.pooled:
        raise RecallDataError("--cv scores each subject's held-out lists; it cannot be combined with --pooled")
    if args.model == "cmr2":
        spec = cmr.CMR2FitSpec(free, fixed, parse_bounds(args.bounds), tied=parse_ties(args.tie))
        with cluster as executor, warnings.catch_warnings():  # the counts are printed below, in the summary
            warnings.simplefilter("ignore", FitWarning)
            fits = cmr.fit_cmr2(events, spec, session=args.session, by=None if args.pooled else "subject",
                                n_restarts=args.restarts, max_restarts=args.max_restarts, rng=args.seed,
                                n_jobs=args.jobs, executor=executor, progress=not args.no_progress)
            where = describe_executor(executor, n_jobs=args.jobs)
        return _report(args, fits, free, "CMR2", where)
    spec = cmr.FitSpec(free, fixed, parse_bounds(args.bounds), tied=parse_ties(args.tie),
                       patterns=item_patterns_of(args, events),
                       pool_size=args.pool_size)
    options = dict(n_restarts=args.restarts, max_restarts=args.max_restarts, rng=args.seed, n_jobs=args.jobs,
                   progress=not args.no_progress, start_library=args.start_library)
    with cluster as executor:
        where = describe_executor(executor, n_jobs=args.jobs)
        if args.cv is not None:
            result = cmr.cross_validate(events, spec, n_folds=args.cv, executor=executor, **options)
        else:
            with warnings.catch_warnings():  # the same counts are printed below, as one line of the summary
                warnings.simplefilter("ignore", FitWarning)
                fits = cmr.fit_recall(events, spec, by=None if args.pooled else "subject", executor=executor,
                                      **options)
    if args.cv is not None:
        path = write_result(result, args.output)
        print(f"wrote {path}: {result.sizes['subject']} subject(s), {args.cv} folds {where}; "
              f"cross-validated logl {float(result['logl'].sum()):.3f}; "
              f"{_verdict(result['fold_converged'], result['fold_n_restarts'], 'training fits')}")
        return 0
    return _report(args, fits, free, "", where)


def _report(args, fits, free, model: str, where: str) -> int:
    from cmr.io import write_result
    from cmr.textbook.fit import flag_summary

    path = write_result(fits, args.output)
    units = "pooled" if args.pooled else f"{fits.sizes['subject']} subject(s)"
    print(f"wrote {path}: {model + ' ' if model else ''}{units}, free {', '.join(free)}; "
          f"total logl {float(fits['logl'].sum()):.3f}, AIC {float(fits['aic'].sum()):.1f}, "
          f"{float(fits['seconds'].sum()):.1f} s of fitting {where}; "
          f"{_verdict(fits['converged'], fits['n_restarts'], 'pooled fit' if args.pooled else 'subjects')}")
    flags = flag_summary(fits)
    if flags:
        print(f"check: {flags} (see at_bound, few_events, converged)")
    return 0


def _verdict(converged, ran, what: str) -> str:
    """``converged 39 of 40 subjects``, or why convergence was not checked."""
    import numpy as np

    converged = np.atleast_1d(np.asarray(converged.values, dtype=bool))
    ran = np.atleast_1d(np.asarray(ran.values))
    if (ran < 2).all():
        return "convergence not checked (1 restart each; --restarts auto checks it)"
    return f"converged {int(converged.sum())} of {converged.size} {what} (best two restarts within 0.1 log units)"
