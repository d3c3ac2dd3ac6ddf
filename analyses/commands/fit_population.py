"""``icl-cmr fit-population``: population-level (hierarchical) CMR fits, and their recovery study."""
from __future__ import annotations

HELP = "fit CMR to all subjects at once: population mean and spread, shrunk subject estimates"

DESCRIPTION = """\
Fit CMR (any model fit-recall fits: localist, semantic, category, with fixed and tied
parameters) to every subject of a free-recall data set at once. Each free parameter is
mapped to logit((value - low) / (high - low)) of its search bounds; subjects' values are
drawn from a normal population on that scale (diagonal covariance), whose mean and sd are
estimated by empirical Bayes: each subject's posterior mode under the current population and
its Laplace (Hessian) approximation, then the population's mean and sd from them, repeated
until neither moves by more than --tol. Subjects with few lists borrow strength from the
others (docs/fitting-recall.md, "Population-level fits").

SOURCE and the model options are those of icl-cmr fit-recall (--free, --fixed, --tie,
--bounds, --patterns, --vectors, --similarity, --pool-size, --subjects), and so are the
places a fit runs: threads (--jobs), or one task per subject and iteration on a dask
cluster (--workers N on this machine, --scheduler ADDRESS), with the same numbers.

The output (kind recall_fit) holds the shrunk subject estimates as `value` (so it serves as a
parameter set for icl-cmr loglik), each subject's interval (value_lower, value_upper), the
population's latent mean and sd and its natural-scale median, each with an interval, and the
convergence history (em_mean, em_sd, em_change, em_marginal_logl). --check CHECK.nc writes
the posterior predictive check (data against the fitted model: lag-CRP, SPC, PFR; kind
predictive_check) with --check-reps simulated recalls per studied list.

--model cmr2 fits CMR2 (docs/cmr2.md) the same way: one network per session, lists in
order, prior-list intrusions scored, B_distract and C_thresh free, fixed or bounded like the
others. --session KEY names the variable that labels sessions (session for psifr:Morton2013;
default: --list-keys, else one session per subject). CMR2 is localist: --patterns, --vectors,
--similarity and --pool-size are refused with it, and so are --recovery and --check (they
simulate textbook CMR; cmr.simulate_cmr2_experiment replays a CMR2 fit).

--recovery N runs the recovery study instead of reading SOURCE: N simulated subjects from a
known population, fitted independently (fit-recall) and hierarchically with their first
--lists counts of lists; prints the error of the subject estimates of both and writes every
estimate to -o.

Examples:
  icl-cmr fit-population psifr:peers_notask --free Lfc,Lcf,P1,P2,B_enc,B_start,B_rec,T,X1,X2 --jobs 2 -o pop.nc
  icl-cmr fit-population psifr:Morton2013 --free B_enc,B_rec,T --check check.nc -o pop.nc
  icl-cmr fit-population psifr:Morton2013 --model cmr2 --session session --free B_enc,B_rec,T,B_distract -o pop2.nc
  icl-cmr fit-population --recovery 40 --lists 4,8,24 --free B_enc,B_rec,T,X1,X2 --jobs 2 -o recovery.nc
  icl-cmr fit-population psifr:peers_notask --free B_enc,B_rec,T --workers 4 -o pop.nc
"""


def register(sub):
    import argparse

    from .options import add_cluster_options, add_fit_spec_options, add_output, add_patterns, add_recall_data_options

    p = sub.add_parser(
        "fit-population", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", nargs="?", default=None,
                   help="bundled data set name or a psifr-format CSV file (not with --recovery)")
    add_recall_data_options(p)
    add_fit_spec_options(p)
    add_patterns(p)
    add_output(p, "POP.nc")
    p.add_argument("--check", default=None, metavar="CHECK.nc", help="also write the posterior predictive check")
    p.add_argument("--check-reps", type=int, default=10, help="simulated recalls per studied list (default 10)")
    p.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="threads of this process: subjects fitted at once (default 1)")
    p.add_argument("--max-iter", type=int, default=200, help="most iterations (default 200)")
    p.add_argument("--tol", type=float, default=1e-3,
                   help="stop when no population mean or sd moves more than this (latent scale; default 0.001)")
    p.add_argument("--subjects", default=None, metavar="S,S,...", help="fit only these subjects")
    p.add_argument("--pool-size", type=int, default=None, metavar="N", help="cymr pool size (default: list-sized context)")
    p.add_argument("--recovery", type=int, default=None, metavar="N",
                   help="run the recovery study with N simulated subjects instead of fitting SOURCE")
    p.add_argument("--lists", default="4,8,24", metavar="N,N,...", help="list counts of --recovery (default 4,8,24)")
    p.add_argument("--start", default=None, metavar="FITS.nc",
                   help="individual fits of the same subjects (fit-recall's output): each subject's first step "
                        "also starts from its own estimate")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--model", choices=("cmr", "cmr2"), default="cmr",
                   help="textbook CMR (default) or CMR2: sessions of lists with prior-list intrusions")
    p.add_argument("--session", default=None, metavar="KEY",
                   help="--model cmr2: the variable that labels sessions (e.g. session)")
    add_cluster_options(p)
    p.set_defaults(func=run, output_args=("output", "check"))


def _parse_counts(text):
    from cmr.errors import ParameterError

    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ParameterError(f"--lists must be positive integers separated by commas, e.g. 4,8,24; got {text!r}")
    return counts


def _recovery(args, spec, cluster) -> int:
    import cmr
    from cmr.errors import ParameterError
    from cmr.io import save_dataset
    from ..cluster import describe_executor
    from .options import check_counts

    if args.source is not None:
        raise ParameterError(f"--recovery simulates its own subjects; got SOURCE {args.source!r} as well")
    if args.check is not None:
        raise ParameterError("--check needs SOURCE data; it cannot be combined with --recovery")
    given = [f"--{name.replace('_', '-')}" for name in ("patterns", "vectors", "similarity", "subjects")
             if getattr(args, name, None) is not None]
    if given:
        raise ParameterError(f"--recovery simulates localist CMR of its own subjects; got {', '.join(given)} as well")
    check_counts(args, recovery=2)
    counts = _parse_counts(args.lists)
    with cluster as executor:
        result = cmr.population_recovery(args.recovery, n_lists=counts, spec=spec, rng=args.seed, n_jobs=args.jobs,
                                         executor=executor, progress=not args.no_progress, max_iter=args.max_iter,
                                         tol=args.tol)
        where = describe_executor(executor, n_jobs=args.jobs)
    path = save_dataset(result, args.output)
    print(f"wrote {path}: {args.recovery} simulated subjects, free {', '.join(spec.free)}, fitted {where}")
    print("RMSE of subject estimates (share of the search range), independent -> hierarchical:")
    for count in result["n_lists"].values:
        row = result.sel(n_lists=count)
        per = ", ".join(f"{name} {float(row['rmse'].sel(estimator='independent', parameter=name)):.3f} -> "
                        f"{float(row['rmse'].sel(estimator='hierarchical', parameter=name)):.3f}" for name in spec.free)
        print(f"  {int(count)} lists: mean {float(row['rmse_mean'].sel(estimator='independent')):.3f} -> "
              f"{float(row['rmse_mean'].sel(estimator='hierarchical')):.3f} ({per})")
    return 0


def run(args) -> int:
    import warnings

    import numpy as np

    import cmr
    from cmr.errors import FitWarning, ParameterError, RecallDataError
    from cmr.io import load_dataset, result_format, save_dataset, write_result
    from cmr.textbook.fit import flag_summary
    from ...adapters.recall_data import load_recall_data
    from ..cluster import describe_executor
    from .options import (check_counts, cluster_of, item_patterns_of, parse_bounds, parse_ties,
                          recall_data_options, refuse_textbook_options)

    result_format(args.output)
    if args.check is not None:
        result_format(args.check)
    check_counts(args, jobs=1, max_iter=1, check_reps=1)  # before a fit of minutes, not after it
    refuse_textbook_options(args, "fit-population")
    cluster = cluster_of(args)
    simulated = [option for option, value in (("--recovery", args.recovery), ("--check", args.check))
                 if value is not None]
    if args.model == "cmr2" and simulated:
        one = len(simulated) == 1
        raise ParameterError(f"{' and '.join(simulated)} simulate{'s' if one else ''} textbook CMR, not --model cmr2; "
                             f"leave {'it' if one else 'them'} out")
    free = [name.strip() for name in args.free.split(",") if name.strip()]
    fixed = cmr.read_parameters(args.fixed) if args.fixed else {}
    if args.recovery is not None:
        spec = cmr.FitSpec(free, fixed, parse_bounds(args.bounds), tied=parse_ties(args.tie),
                           pool_size=args.pool_size)
        return _recovery(args, spec, cluster)
    if args.source is None:
        raise ParameterError("fit-population needs SOURCE (a bundled data set or a recall table) or --recovery N")
    events = load_recall_data(args.source, **recall_data_options(args))
    if args.subjects:
        wanted = [s.strip() for s in args.subjects.split(",")]
        keep = np.isin(events["subject"].values.astype(str), wanted)
        if not keep.any():
            raise RecallDataError(f"--subjects {args.subjects!r} matches no subject of {args.source}")
        events = events.isel(trial=np.flatnonzero(keep))
    if args.model == "cmr2":
        patterns, options = None, dict(session=args.session)
        spec = cmr.CMR2FitSpec(free, fixed, parse_bounds(args.bounds), tied=parse_ties(args.tie))
    else:
        patterns, options = item_patterns_of(args, events), {}
        spec = cmr.FitSpec(free, fixed, parse_bounds(args.bounds), tied=parse_ties(args.tie), patterns=patterns,
                           pool_size=args.pool_size)
    start = load_dataset(args.start) if args.start else None
    with cluster as executor, warnings.catch_warnings():  # the same facts are printed below, one line each
        warnings.simplefilter("ignore", FitWarning)
        fits = cmr.fit_population(events, spec, rng=args.seed, n_jobs=args.jobs, executor=executor,
                                  max_iter=args.max_iter, tol=args.tol, progress=not args.no_progress,
                                  start=start, **options)
        where = describe_executor(executor, n_jobs=args.jobs)
    path = write_result(fits, args.output)
    median = fits["population_median"]
    shown = ", ".join(f"{name} {float(median.sel(parameter=name)):.3g} "
                      f"[{float(fits['population_median_lower'].sel(parameter=name)):.3g}, "
                      f"{float(fits['population_median_upper'].sel(parameter=name)):.3g}]" for name in spec.free)
    state = "converged" if fits.attrs["converged"] else "NOT converged"
    model = "CMR2, " if args.model == "cmr2" else ""
    print(f"wrote {path}: {model}{fits.sizes['subject']} subject(s), {state} in {fits.attrs['n_iter']} iterations "
          f"{where}, "
          f"total logl {float(fits['logl'].sum()):.3f}; population medians {shown}")
    if not fits.attrs["converged"]:
        print(f"check: no convergence in {args.max_iter} iterations; still moving: "
              f"{fits.attrs.get('not_converged_parameters') or 'none above --tol'}; "
              f"{fits.attrs.get('not_converged_advice') or 'raise --max-iter'}")
    flags = flag_summary(fits)
    if flags:
        print(f"check: {flags} (see at_bound, few_events)")
    if args.check is not None:
        check = cmr.posterior_predictive(events, fits, n_rep=args.check_reps, rng=args.seed, patterns=patterns,
                                         pool_size=args.pool_size)
        check_path = save_dataset(check, args.check)
        crp = check["crp_group"].sel(lag=[-1, 1]).values
        spc = check["spc_group"].values
        print(f"wrote {check_path}: lag-CRP at -1, +1 data {crp[0, 0]:.3f}, {crp[0, 1]:.3f} / model "
              f"{crp[1, 0]:.3f}, {crp[1, 1]:.3f}; mean recall data {np.nanmean(spc[0]):.3f} / model "
              f"{np.nanmean(spc[1]):.3f}")
    return 0
