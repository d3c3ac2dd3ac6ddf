"""Does the default fit reach the maximum? Textbook CMR on psifr:Morton2013 or peers_notask, against the best known.

The best known maximum of each subject (``icl_cmr.data``'s ``fit_reference_morton2013.csv`` and
``fit_reference_peers_notask.csv``; data/README.md says how they were made) is compared with
what ``cmr.fit_recall(events, cmr.FitSpec())`` reaches by default, subject by subject: the share within
``CONVERGENCE_TOLERANCE`` (0.1 log units) of it, the shortfalls, the convergence verdicts and
the fitting time per subject. cymr's ``Recall.fit_indiv`` (its differential evolution and
polish, scipy's defaults) runs on the first ``cymr_subjects`` of the same subjects, side by
side: it takes minutes per subject, so by default on one.
"""
from __future__ import annotations

import time
import warnings
from importlib import resources
from io import StringIO

import numpy as np
import pandas as pd

from cmr.deprecation import keyword_only
from cmr.constants import CONVERGENCE_TOLERANCE
from cmr.errors import FitWarning
from cmr.events import to_table
from cmr.textbook.parameters import fit_bounds
import cmr

from ...adapters.recall_data import load_recall_data
from .cmr_fit import cymr_modules

REFERENCE_FILE = "fit_reference_morton2013.csv"
#: the best known maxima of each bundled data set
REFERENCE_FILES = {"psifr:Morton2013": REFERENCE_FILE, "psifr:peers_notask": "fit_reference_peers_notask.csv"}
FIXED = dict(Afc=0.0, Acf=0.0, Dfc=0.85, Dcf=0.85)  # FitSpec()'s fixed values (cmr.default_parameters)


def load_reference(data: str = "psifr:Morton2013") -> pd.DataFrame:
    """The best known maximum per subject of ``data``: ``subject``, ``logl``, the ten free parameters."""
    text = resources.files("icl_cmr.data").joinpath(REFERENCE_FILES[data]).read_text()

    return pd.read_csv(StringIO(text), comment="#")


def _cymr_fit(events, subjects, bounds, **options) -> pd.DataFrame:
    """cymr's fit_indiv (method 'de', one search per subject; ``options`` go to its search) of ``subjects``.

    One row per subject: ``subject``, ``logl`` and ``seconds``.
    """
    cymr_cmr, _ = cymr_modules()
    rows = []
    for subject in subjects:
        table = to_table(events.isel(trial=np.flatnonzero(events["subject"].values == subject)))
        table["item_index"] = table.groupby("item", sort=True).ngroup()
        param_def, patterns = cymr_cmr.config_loc_cmr(int(table["item_index"].max()) + 1)
        param_def.set_fixed(**FIXED)
        param_def.set_free(**{name: tuple(bound) for name, bound in bounds.items()})
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = cymr_cmr.CMR().fit_indiv(table, param_def, patterns=patterns, n_jobs=1, method="de", **options)
        rows.append(dict(subject=subject, logl=float(np.max(result["logl"].astype(float))),
                         seconds=time.perf_counter() - start))
    return pd.DataFrame(rows)


@keyword_only
def bench_fit_quality(*, repeats: int = 1, subjects=None, cymr_subjects: int = 1, n_jobs: int = 2,
                      data: str = "psifr:Morton2013") -> dict:
    """Share of subjects the default fit brings within 0.1 log units of the best known; vs cymr.

    ``data``: a key of :data:`REFERENCE_FILES`. ``repeats`` is not used (one fit of every
    subject is the measurement). ``n_jobs=2``: two subjects at a time, one thread each, so ``ours_s``
    (the median of subjects' own seconds) is a subject's cost on one of two busy cores and
    ``wall_per_subject_s`` (the wall time over the subjects) the cost per subject on 2 cores.
    """
    reference = load_reference(data)
    reference["subject"] = reference["subject"].astype(str)
    events = load_recall_data(data)
    labels = np.asarray(events["subject"].values).astype(str)
    wanted = [str(s) for s in (subjects if subjects is not None else reference["subject"])]
    events = events.isel(trial=np.flatnonzero(np.isin(labels, wanted)))
    spec = cmr.FitSpec()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        fits = cmr.fit_recall(events, spec, rng=0, n_jobs=n_jobs, progress=False)
    wall = time.perf_counter() - start
    seeds, restart_logl = fits["restart_seed"].values, fits["restart_logl"].values
    searched = seeds >= 0  # differential-evolution searches; -2: polishes from the start library
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a unit without library polishes: all-NaN row
        ours = pd.DataFrame(dict(
            subject=np.asarray(fits["subject"].values).astype(str), logl=fits["logl"].values,
            first=[row[ok][0] for row, ok in zip(restart_logl, searched)],
            searches=np.nanmax(np.where(searched, restart_logl, np.nan), axis=1),
            library=np.nanmax(np.where(seeds == -2, restart_logl, np.nan), axis=1),
            seconds=fits["seconds"].values, restarts=searched.sum(axis=1), nfev=fits["nfev"].values,
            converged=fits["converged"].values))
    both = ours.merge(reference[["subject", "logl"]].rename(columns={"logl": "best"}), on="subject")
    gap = both["best"] - both["logl"]
    first_gap = both["best"] - both["first"]
    searches_gap, library_gap = both["best"] - both["searches"], both["best"] - both["library"]
    within = gap <= CONVERGENCE_TOLERANCE
    result = {
        "name": "fit-quality" if data == "psifr:Morton2013" else "fit-quality-peers",
        "data": data,
        "ours_s": float(both["seconds"].median()),
        "reference": "cymr fit_indiv (DE + polish), per subject",
        "reference_s": None,
        "ratio": None,
        "subjects": int(len(both)),
        "within_0.1": int(within.sum()),
        "within_share": float(within.mean()),
        "total_shortfall": float(gap.clip(lower=0).sum()),
        "max_shortfall": float(gap.max()),
        "converged": int(both["converged"].sum()),
        "converged_but_short": int((both["converged"] & ~within).sum()),
        "median_restarts": float(both["restarts"].median()),
        "median_evaluations": float(both["nfev"].median()),
        "one_search_within_0.1": int((first_gap <= CONVERGENCE_TOLERANCE).sum()),
        "searches_within_0.1": int((searches_gap <= CONVERGENCE_TOLERANCE).sum()),
        "library_within_0.1": int((library_gap <= CONVERGENCE_TOLERANCE).sum()),
        "above_best_known": int((gap < -CONVERGENCE_TOLERANCE).sum()),
        "wall_s": wall,
        "n_jobs": int(n_jobs),
        "wall_per_subject_s": wall / max(1, len(both)),
    }
    if cymr_subjects:
        chosen = list(both["subject"][: int(cymr_subjects)])
        bounds = dict(zip(spec.free, fit_bounds(spec.free, bounds=spec.bounds)))
        originals = np.asarray(events["subject"].values)
        texts = originals.astype(str)
        theirs = _cymr_fit(events, [originals[np.flatnonzero(texts == s)[0]] for s in chosen], bounds)
        theirs["subject"] = theirs["subject"].astype(str)
        theirs = theirs.merge(both[["subject", "best", "seconds", "logl"]].rename(columns={"logl": "ours_logl"}),
                              on="subject", suffixes=("", "_ours"))
        result.update({
            "reference_s": float(theirs["seconds"].median()),
            "ratio": float(theirs["seconds"].median() / theirs["seconds_ours"].median()),
            "cymr_subjects": chosen,
            "cymr_within_0.1": int((theirs["best"] - theirs["logl"] <= CONVERGENCE_TOLERANCE).sum()),
            "cymr_shortfall": [round(float(v), 3) for v in theirs["best"] - theirs["logl"]],
            "ours_shortfall_same_subjects": [round(float(v), 3) for v in theirs["best"] - theirs["ours_logl"]],
        })
    return result


@keyword_only
def bench_fit_quality_peers(*, repeats: int = 1, cymr_subjects: int = 0, n_jobs: int = 2) -> dict:
    """:func:`bench_fit_quality` on psifr:peers_notask (126 subjects; cymr's fit_indiv not run by default)."""
    return bench_fit_quality(repeats=repeats, cymr_subjects=cymr_subjects, n_jobs=n_jobs, data="psifr:peers_notask")
