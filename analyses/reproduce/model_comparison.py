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

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

import cmr
from cmr.checks import seed_of
from cmr.errors import ParameterError
from cmr.io import atomic_write, save_dataset
from cmr.markdown import markdown_table
from ...adapters.item_pools import load_patterns_of_kind
from ...adapters.recall_data import load_recall_data
from ..plots import predictive_check

#: the variants of docs/model-comparison.md -> their models of cmr.COMPARISON_MODELS (the ten parameters
#: of Morton & Polyn 2016 free, D tied to 1 - L as in their models; the variants add their pattern weights)
VARIANTS = {"localist": "textbook", "semantic": "semantic", "category": "category"}
#: the recall data set of docs/model-comparison.md
SOURCE = "psifr:Morton2013"


class ModelComparison(NamedTuple):
    """What :func:`compare_variants` computed: the comparison and, per variant, its datasets and seconds."""
    comparison: xr.Dataset
    fits: dict
    cvs: dict
    checks: dict
    seconds: dict


def comparison_table(comparison: xr.Dataset) -> str:
    """The comparison as a markdown table (one row per model; ends with a line break)."""
    cv = "cv_logl" in comparison
    columns = ["model", "k", "total logL", "AIC", "ΔAIC", "Akaike weight", "subjects best by AIC"]
    if cv:
        columns += ["cross-validated logL", "subjects best by CV", "mean per-subject ΔCV logL vs best", "Wilcoxon p"]
    rows = []
    for m in comparison["model"].values:
        c = comparison.sel(model=m)
        row = [m, int(c["k"]), f"{float(c['total_logl']):.1f}", f"{float(c['total_aic']):.1f}",
               f"{float(c['delta_aic']):.1f}", f"{float(c['akaike_weight']):.3g}", int(c["n_best_aic"])]
        if cv:
            p = float(c["paired_p"])
            row += [f"{float(c['total_cv_logl']):.1f}", int(c["n_best_cv"]), f"{float(c['paired_statistic']):.2f}",
                    "—" if np.isnan(p) else f"{p:.3g}"]
        rows.append(row)
    return markdown_table(columns, rows) + "\n"


def first_subjects(events: xr.Dataset, n: int) -> xr.Dataset:
    """The trials of the first ``n`` subjects of ``events``, in the data's order (0: every subject)."""
    if not n:
        return events
    keep = pd.unique(events["subject"].values)[:n]
    return events.isel(trial=np.flatnonzero(np.isin(events["subject"].values, keep)))


def variants_of(variants: str | Sequence[str], *, option: str = "variants") -> list[str]:
    """The variants to compare: two or more names of :data:`VARIANTS`, each once (a text is split at commas).

    ``option`` names the argument in the error message.
    """
    given = variants
    if isinstance(variants, str):
        variants = variants.split(",")
    names = [str(v).strip() for v in variants if str(v).strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or len(names) < 2 or len(set(names)) < len(names):
        raise ParameterError(f"{option} takes two or more of {', '.join(VARIANTS)}, each once; got {given!r}")
    return names


def compare_variants(events: str | xr.Dataset = SOURCE, *, variants: Sequence[str] = tuple(VARIANTS),
                     patterns: Mapping | None = None, subjects: int = 10, folds: int = 2, rng=0, n_jobs: int = 2,
                     rep: int = 20, maxiter: int | None = None, output: str | Path | None = None,
                     figure: str | Path | None = None, label: str | None = None,
                     log: Callable[[str], None] | None = None) -> ModelComparison:
    """Fit, cross-validate and compare CMR variants on recall data, and check each against the data.

    Each variant of :data:`VARIANTS` is fitted to each subject by maximum likelihood
    (:func:`cmr.fit_recall`; a variant nesting the localist one also searches from its fit),
    scored by leave-lists-out cross-validation (:func:`cmr.cross_validate`), compared
    (:func:`cmr.compare_models`, with the nested-model check) and simulated for a predictive
    check (:func:`cmr.posterior_predictive`).

    Parameters
    ----------
    events : str or xarray.Dataset, default :data:`SOURCE`
        Recall data: a bundled data set or a psifr-format CSV file, or an events dataset.
    variants : sequence of str or str, default all of :data:`VARIANTS`
        Two or more variants, each once (a text: names separated by commas).
    patterns : mapping, optional
        Item patterns (:class:`cmr.ItemPatterns`) of a variant by name; a semantic or category
        variant not in it gets the bundled pool of ``events`` (which must then name one).
    subjects : int, default 10
        Only the first N subjects (0: all).
    folds : int, default 2
        Leave-lists-out folds per subject.
    rng : int or numpy.random.Generator, default 0
        Seed of the fits and simulations.
    n_jobs : int, default 2
        Subjects fitted in parallel threads.
    rep : int, default 20
        Simulated recall periods per list of the predictive check.
    maxiter : int, optional
        Differential-evolution generations (default scipy's 1000).
    output : path, optional
        Folder to write ``fits_<variant>.nc``, ``cv_<variant>.nc``, ``comparison.nc``,
        ``predictive_<variant>.nc`` and ``comparison.md`` to (made if missing).
    figure : path, optional
        Data against the fitted variants (.png).
    label : str, optional
        The data's name in the figure's title (default: ``events`` if it is a name, else "recall data").
    log : callable, optional
        Called with one line per variant (its seconds).

    Returns
    -------
    ModelComparison
        The ``model_comparison`` dataset; per variant its fits, cross-validation, predictive check and seconds.

    Raises
    ------
    ParameterError
        Fewer than two variants, an unknown or repeated one, or a figure that is not a .png file.
    """
    if figure is not None and Path(figure).suffix.lower() != ".png":
        raise ParameterError(f"figure must be a .png file; got {str(figure)!r}")
    names = variants_of(variants)
    seed = seed_of(rng)
    source = events if isinstance(events, str) else None
    label = label if label is not None else source or "recall data"
    if isinstance(events, str):
        events = load_recall_data(events)
    events = first_subjects(events, subjects)
    patterns = dict(patterns or {})
    missing = [name for name in names if name not in patterns and cmr.COMPARISON_MODELS[VARIANTS[name]][1]]
    if missing and source is None:
        raise ParameterError(f"patterns must give the item pool of {', '.join(missing)}: the recall data are a "
                             "dataset, not a bundled data set with its pool")
    pools = {name: patterns[name] if name in patterns else
             load_patterns_of_kind(source, cmr.COMPARISON_MODELS[VARIANTS[name]][1]) for name in names}
    out = None if output is None else Path(output)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    fits, cvs, seconds = {}, {}, {}
    for name in names:
        t0 = time.perf_counter()
        spec = cmr.comparison_spec(VARIANTS[name], pools[name])
        options = dict(rng=seed, n_jobs=n_jobs, progress=False,
                       de_options=None if maxiter is None else dict(maxiter=maxiter))
        # a variant nesting the localist one searches from its fit too (its weights at 0 give it exactly)
        nested_fit = fits.get("localist") if name != "localist" else None
        fits[name] = cmr.fit_recall(events, spec, start=nested_fit, **options)
        cvs[name] = cmr.cross_validate(events, spec, n_folds=folds, **options)
        if out is not None:
            save_dataset(fits[name], out / f"fits_{name}.nc")
            save_dataset(cvs[name], out / f"cv_{name}.nc")
        seconds[name] = time.perf_counter() - t0
        if log is not None:
            log(f"{name}: {seconds[name]:.0f} s")
    nested = {outer: inner for outer, inner in (("semantic", "localist"), ("category", "localist"))
              if outer in fits and inner in fits}
    comparison = cmr.compare_models(fits, cv=cvs, nested=nested)
    if out is not None:
        save_dataset(comparison, out / "comparison.nc")
    checks = {}
    for name in names:
        checks[name] = cmr.posterior_predictive(events, fits[name], n_rep=rep, rng=seed, patterns=pools[name])
        if out is not None:
            save_dataset(checks[name], out / f"predictive_{name}.nc")
    if out is not None:
        with atomic_write(out / "comparison.md", suffix=".md") as tmp:
            Path(tmp).write_text(comparison_table(comparison))
    if figure is not None:
        n_subjects = len(pd.unique(events["subject"].values))
        fig = predictive_check(checks, title=f"{label}, {n_subjects} subjects: data and fitted CMR variants")
        with atomic_write(Path(figure), suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=160)
    return ModelComparison(comparison, fits, cvs, checks, seconds)
