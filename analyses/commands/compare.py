"""``icl-cmr compare``: fit several CMR variants to the same subjects and compare them."""
from __future__ import annotations

HELP = "fit several CMR variants (textbook, semantic, category, CMR2) to the same subjects and compare them"

DESCRIPTION = """\
Which CMR explains these recalls best? Fit each named variant to each subject of SOURCE by
maximum likelihood (cmr.fit_recall, cmr.fit_cmr2; differential evolution then L-BFGS-B) and
compare them subject by subject (cmr.compare_recall_models).

Models (--models, comma-separated, at least two):
  textbook  localist CMR: Lfc, Lcf, P1, P2, B_enc, B_start, B_rec, T, X1, X2 free,
            Dfc = 1 - Lfc and Dcf = 1 - Lcf (Morton & Polyn 2016)
  semantic  textbook + Scf, Sff over item similarities (Polyn et al. 2009; Morton & Polyn
            2016); it nests textbook CMR (Scf = Sff = 0). Similarities: --vectors FILE,
            --similarity FILE, or SOURCE's own pool (psifr:Morton2013)
  category  textbook + Cfc, Ccf over category units of SOURCE's pool (psifr:Morton2013);
            nests textbook CMR
  cmr2      CMR2 (Lohnas, Polyn & Kahana 2015): textbook + B_distract, C_thresh, lists of a
            session in one network (--session KEY; default --list-keys, else one per subject).
            CMR2 also scores prior-list intrusions, textbook CMR does not: on data with such
            intrusions (psifr:Morton2013) their likelihoods are of different events and the
            pair is refused before fitting

What is written (-o; .nc keeps everything, .csv/.parquet one row per model and subject):
  per subject and model: log-likelihood logl, AIC, BIC, Akaike weight among the models,
    the fitted free parameters, with --cv K the K-fold leave-lists-out cross-validated
    log-likelihood cv_logl, and converged when the fits report it;
  per model: totals, delta AIC and Akaike weight of the summed AIC, winner ratios (share of
    subjects each model wins by logl, AIC, BIC and cv_logl; ties shared, so each sums to 1);
  per pair of models: the mean per-subject difference, its paired p over subjects (--test:
    two-sided Wilcoxon signed-rank, default, or paired t) and the share of subjects where the
    row model beats the column model. The compared score is cv_logl with --cv, else the
    AIC-penalised log-likelihood logl - k;
  the nested-model check: a model that nests another can never have a lower maximum, and its
    search also starts from the nested model's fit; each subject where its log-likelihood is
    still lower (by more than 0.01) is flagged (fits_worse_than_nested) and named in the
    summary. Cross-validation folds search without that start.
A summary is printed: the table per model, the p-matrix, the flagged subjects and the
parameter means with 95% intervals over subjects.

Every model gets the same fitting options: --restarts, --seed, --jobs, --maxiter and
--popsize of the differential evolution (defaults: scipy's 1000 generations, population 15;
a quick look: --maxiter 50). The recall-data options are those of fit-recall.

On a dask cluster each subject of each model's fit (each subject and fold with --cv) is one
task, the models one after another: --workers N starts N worker processes on this machine,
--scheduler ADDRESS uses the workers of a running scheduler (pip install 'icl-cmr[analyses]').
The numbers equal a run in threads; --jobs is refused with either.

Examples:
  icl-cmr compare psifr:Morton2013 --models textbook,semantic,category --subjects 1,2,3 -o cmp.nc
  icl-cmr compare data.csv --models textbook,semantic --vectors glove_pool.txt --normalize-items \\
      --cv 4 --jobs 2 -o cmp.csv
  icl-cmr compare sessions.csv --models textbook,cmr2 --list-keys session --maxiter 100 -o cmp.nc
  icl-cmr compare psifr:Morton2013 --models textbook,category --scheduler tcp://HOST:8786 -o cmp.nc
"""


def register(sub):
    import argparse

    from .options import add_cluster_options, add_item_files, add_output, add_recall_data_options, add_subjects

    p = sub.add_parser("compare", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="SOURCE", help="bundled data set name or a psifr-format CSV file")
    add_recall_data_options(p)
    add_subjects(p)
    p.add_argument("--models", required=True, metavar="NAME,NAME,...",
                   help="the models to compare: textbook, semantic, category, cmr2 (at least two)")
    add_item_files(p)
    add_output(p, "COMPARISON.nc")
    p.add_argument("--cv", type=int, default=None, metavar="K",
                   help="also score each model by K-fold leave-lists-out cross-validation (textbook variants)")
    p.add_argument("--test", choices=("wilcoxon", "t"), default="wilcoxon",
                   help="paired test over subjects: two-sided Wilcoxon signed-rank (default) or paired t-test")
    p.add_argument("--session", default=None, metavar="KEY", help="cmr2: the variable that labels sessions")
    p.add_argument("--seed", type=int, default=0, help="root random seed of every fit (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="threads: subjects at once (default 1)")
    p.add_argument("--restarts", type=_restarts, default=None, metavar="N|auto",
                   help="independent searches per subject and model, or auto (default: fit-recall's)")
    p.add_argument("--maxiter", type=int, default=None, metavar="N",
                   help="differential-evolution generations (default scipy's 1000)")
    p.add_argument("--popsize", type=int, default=None, metavar="N",
                   help="differential-evolution population per free parameter (default 15)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    add_cluster_options(p)
    p.set_defaults(func=run)


def _restarts(text: str):
    """``--restarts``: a count, or auto."""
    import argparse

    if text.strip() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--restarts must be a whole number or auto; got {text!r}") from None


def run(args) -> int:
    import cmr
    from cmr.checks import is_integer
    from cmr.errors import ParameterError
    from cmr.io import result_format, write_result
    from ...adapters.recall_data import load_recall_data
    from ..cluster import describe_executor
    from .options import check_counts, cluster_of, model_patterns, recall_data_options, selected_subjects

    result_format(args.output)
    check_counts(args, cv=2, jobs=1, maxiter=1, popsize=1)
    if is_integer(args.restarts):
        check_counts(args, restarts=1)
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = [name for name in names if name not in cmr.COMPARISON_MODELS]
    if unknown or len(names) < 2 or len(set(names)) < len(names):
        why = f"unknown model(s) {', '.join(map(repr, unknown))}" if unknown else "fewer than two or a repeated model"
        raise ParameterError(f"--models takes two or more of {', '.join(cmr.COMPARISON_MODELS)}, each once; "
                             f"got {args.models!r} ({why})")
    if args.cv is not None and "cmr2" in names:
        raise ParameterError("--cv cross-validates the textbook variants only; --models has cmr2 (leave out one)")
    if (args.vectors or args.similarity) and "semantic" not in names:
        raise ParameterError("--vectors/--similarity give the item similarities of the semantic model; "
                             f"--models {args.models} has none")
    if args.session is not None and "cmr2" not in names:
        raise ParameterError(f"--session labels the sessions of cmr2; --models {args.models} has none")
    cluster = cluster_of(args)  # options checked before the data are read
    events = selected_subjects(args, load_recall_data(args.source, **recall_data_options(args)))
    patterns = {name: model_patterns(args, events, name) for name in names if cmr.COMPARISON_MODELS[name][1]}
    de_options = {key: value for key, value in (("maxiter", args.maxiter), ("popsize", args.popsize))
                  if value is not None}
    with cluster as executor:
        where = describe_executor(executor, n_jobs=args.jobs)
        comparison, _, _ = cmr.compare_recall_models(
            events, models=names, patterns=patterns, n_folds=args.cv, session=args.session, test=args.test,
            n_restarts=args.restarts, rng=args.seed, n_jobs=args.jobs, executor=executor,
            progress=not args.no_progress, de_options=de_options or None)
    path = write_result(comparison, args.output)
    print(summary(comparison))
    print(f"fitted {len(names)} models to {comparison.sizes['subject']} subject(s) {where}")
    print(f"wrote {path}")
    return 0


def summary(comparison) -> str:
    """The comparison as text: the table per model, the p-matrix, nested-model flags, parameter means."""
    import numpy as np

    c = comparison
    models = [str(m) for m in c["model"].values]
    width = max(8, *map(len, models))
    has_cv = "cv_logl" in c
    head = (f"{'model':<{width}} {'k':>3} {'logL':>11} {'AIC':>11} {'dAIC':>9} {'weight':>8} "
            f"{'wins logL':>9} {'wins AIC':>8} {'wins BIC':>8}"
            + (f" {'CV logL':>11} {'wins CV':>8}" if has_cv else ""))
    lines = [f"{c.sizes['subject']} subject(s), {int(c['n'].sum())} scored events; best by "
             f"{'cross-validated log-likelihood' if has_cv else 'AIC'}: {c.attrs['best_model']}", head]
    for m in models:
        r = c.sel(model=m)
        line = (f"{m:<{width}} {int(r['k']):>3} {float(r['total_logl']):>11.2f} {float(r['total_aic']):>11.2f} "
                f"{float(r['delta_aic']):>9.2f} {float(r['akaike_weight']):>8.3g} "
                f"{float(r['winner_ratio_logl']):>9.2f} "
                f"{float(r['winner_ratio_aic']):>8.2f} {float(r['winner_ratio_bic']):>8.2f}")
        if has_cv:
            line += f" {float(r['total_cv_logl']):>11.2f} {float(r['winner_ratio_cv_logl']):>8.2f}"
        lines.append(line)
    lines.append(f"paired p over subjects ({c.attrs['paired_test']}) of the per-subject difference in "
                 f"{'cross-validated log-likelihood' if has_cv else 'logL - k'}:")
    lines.append(" " * width + "".join(f" {m:>{width}}" for m in models))
    for m in models:
        row = c["p_versus"].sel(model=m).values
        lines.append(f"{m:<{width}}" + "".join(f" {'-' if np.isnan(p) else f'{p:.3g}':>{width}}" for p in row))
    if "fits_worse_than_nested" in c:
        for m in models:
            inner = str(c["nested_model"].sel(model=m).values)
            if not inner:
                continue
            flagged = c["fits_worse_than_nested"].sel(model=m).values
            gain = c["nested_gain"].sel(model=m).values
            if flagged.any():
                which = ", ".join(f"{s} ({g:.2f})" for s, g in zip(c["subject"].values[flagged], gain[flagged]))
                lines.append(f"check: {m} nests {inner} but fits worse for {int(flagged.sum())} subject(s): {which}; "
                             "its search missed the maximum there: refit with more --restarts or --maxiter")
            else:
                lines.append(f"nested check: {m} fits at least as well as {inner} (which it nests) for every subject")
    if "converged" in c:
        lines.append("converged (the fits' own verdict): " + ", ".join(
            f"{m} {int(c['converged'].sel(model=m).sum())}/{c.sizes['subject']}" for m in models))
    lines.append("free parameters, mean [95% interval of the mean over subjects]:")
    for m in models:
        values = c["parameter_value"].sel(model=m)
        parts = [f"{str(p)} {_mean_ci(values.sel(parameter=p).values)}" for p in c["parameter"].values
                 if np.isfinite(values.sel(parameter=p).values).any()]
        lines.append(f"  {m}: " + ", ".join(parts))
    return "\n".join(lines)


def _mean_ci(values) -> str:
    """``0.42 [0.30, 0.54]``: the mean and its t interval over subjects (the mean alone for one subject)."""
    import numpy as np
    from scipy import stats

    values = values[np.isfinite(values)]
    mean = float(values.mean())
    if values.size < 2:
        return f"{mean:.3g}"
    half = float(stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size))
    return f"{mean:.3g} [{mean - half:.3g}, {mean + half:.3g}]"
