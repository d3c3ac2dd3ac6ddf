"""Fit every published head profile with `paper`, `lsq` and the fair Gaussian baseline.

Reproduces the comparison table of docs/fitting.md from the study's published files
(``head_profiles.csv.gz`` and ``cmr_crp_grid.npz``, Ji-An, Zhou, Benna & Mattar, NeurIPS 2024):

    icl-cmr reproduce published-fits [--reference DIR] [-o TABLE.md] [--fits-dir DIR]

Models: gpt2-small, the four Pythia models at their final checkpoint (142 = step 143000),
qwen-7b, mistral-7b, llama3-8b; window -5..+5; CMR distance < 0.5 counts as "CMR-like".
Human subjects (PEERS, Morton2013 lag-CRPs from the psifr wheel) go through the same call on
lags -5..-1, 1..5 (a recall lag-CRP is undefined at lag 0).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cmr.crp import lag_crp
from cmr.io import save_dataset
from cmr.markdown import markdown_table
from cmr.profile_fit import fit_profiles
from ...adapters.published import published_file, read_published_profiles
from ...adapters.published_grid import load_published_grid
from ...adapters.recall_data import load_recall_data

MODELS = (
    "gpt2-small",
    "pythia-70m-deduped-v0",
    "pythia-410m-deduped-v0",
    "pythia-2.8b-deduped-v0",
    "pythia-12b-deduped-v0",
    "qwen-7b",
    "mistral-7b",
    "llama3-8b",
)
THRESHOLD = 0.5
#: human free-recall data sets fitted by the same call (subject lag-CRPs; lag 0 is undefined)
HUMAN_DATA = ("psifr:peers_notask", "psifr:Morton2013")
HUMAN_LAGS = (-5, -4, -3, -2, -1, 1, 2, 3, 4, 5)


def fit_model(profiles_path, grid, model):
    """Fits of one model's heads at its final checkpoint: (paper fit, lsq fit with Gaussian)."""
    heads = read_published_profiles(profiles_path, model=model, checkpoint="final")
    paper = fit_profiles(heads, grid, objective="paper", gaussian=False)
    lsq = fit_profiles(heads, grid, objective="lsq", gaussian=True)
    return heads, paper, lsq


def fit_humans(source, grid):
    """Subject lag-CRPs of a recall data set fitted by the same call, on lags +-1..5."""
    crp = lag_crp(load_recall_data(source), by="subject", max_lag=5)
    paper = fit_profiles(crp, grid, objective="paper", lags=HUMAN_LAGS, gaussian=False)
    lsq = fit_profiles(crp, grid, objective="lsq", lags=HUMAN_LAGS, gaussian=True)
    return crp, paper, lsq


def summarise(model, heads, paper, lsq) -> dict:
    if "induction_score" in heads:
        induction = heads["induction_score"].values.ravel()
        top = induction >= np.nanquantile(induction, 0.9)  # the top 10% induction heads (NaN scores excluded)
    else:  # human subjects
        top = np.zeros(paper["distance"].size, dtype=bool)
    d_paper = paper["distance"].values.ravel()
    d_lsq = lsq["distance"].values.ravel()
    d_gauss = lsq["gaussian_distance"].values.ravel()
    g_aic = lsq["gaussian_aic"].values.ravel()
    return {
        "model": model,
        "checkpoint": int(paper["checkpoint"].values[0]) if "checkpoint" in paper.dims else None,
        "heads": int(d_paper.size),
        "paper_below": float(np.mean(d_paper < THRESHOLD)),
        "paper_median": float(np.median(d_paper)),
        "lsq_below": float(np.mean(d_lsq < THRESHOLD)),
        "lsq_median": float(np.median(d_lsq)),
        "gauss_below": float(np.mean(d_gauss < THRESHOLD)),
        "gauss_median": float(np.median(d_gauss)),
        "gauss_beats_paper_aic": int(np.sum(g_aic < paper["aic"].values.ravel())),
        "gauss_beats_lsq_aic": int(np.sum(g_aic < lsq["aic"].values.ravel())),
        "gauss_beats_lsq_aic_cmr_like": int(np.sum((g_aic < lsq["aic"].values.ravel()) & (d_lsq < THRESHOLD))),
        "cmr_like_lsq": int(np.sum(d_lsq < THRESHOLD)),
        "top_induction": int(top.sum()),
        "gauss_beats_lsq_aic_top": int(np.sum((g_aic < lsq["aic"].values.ravel()) & top)),
        "top_lsq_median": float(np.median(d_lsq[top])) if top.any() else float("nan"),
        "top_gauss_median": float(np.median(d_gauss[top])) if top.any() else float("nan"),
    }


COLUMNS = (
    "model (checkpoint) or data set", "units", "paper: d<0.5", "paper: median d", "lsq: d<0.5", "lsq: median d",
    "Gaussian: d<0.5", "Gaussian: median d", "Gaussian better by AIC than paper / lsq", "... among lsq d<0.5 units",
    "top-10% induction heads: Gaussian better by AIC", "top-10%: median d lsq / Gaussian",
)


def markdown(rows) -> str:
    """The table of docs/fitting.md from the rows of :func:`summarise` (ends with a line break)."""
    def cells(r):
        label = f"{r['model']} ({r['checkpoint']})" if r["checkpoint"] is not None else f"{r['model']} (subjects)"
        top = ((f"{r['gauss_beats_lsq_aic_top']} of {r['top_induction']}",
                f"{r['top_lsq_median']:.3f} / {r['top_gauss_median']:.3f}") if r["top_induction"] else ("-", "-"))
        return (label, r["heads"], f"{100 * r['paper_below']:.0f}%", f"{r['paper_median']:.3f}",
                f"{100 * r['lsq_below']:.0f}%", f"{r['lsq_median']:.3f}", f"{100 * r['gauss_below']:.0f}%",
                f"{r['gauss_median']:.3f}",
                f"{r['gauss_beats_paper_aic']} / {r['gauss_beats_lsq_aic']} "
                f"({100 * r['gauss_beats_lsq_aic'] / r['heads']:.0f}%)",
                f"{r['gauss_beats_lsq_aic_cmr_like']} of {r['cmr_like_lsq']}", *top)

    return markdown_table(COLUMNS, (cells(r) for r in rows)) + "\n"


def fit_published(*, models: Sequence[str] = MODELS, humans: Sequence[str] = HUMAN_DATA,
                  reference: str | Path | None = None, fits_dir: str | Path | None = None,
                  log: Callable[[str], None] | None = None) -> str:
    """Fit every published head profile and human lag-CRP with ``paper``, ``lsq`` and the Gaussian baseline.

    Parameters
    ----------
    models : sequence of str, default :data:`MODELS`
        Published models, each at its final checkpoint (window -5..+5).
    humans : sequence of str, default :data:`HUMAN_DATA`
        Recall data sets whose subject lag-CRPs go through the same call (lags -5..-1, 1..5).
    reference : path, optional
        Folder with the study's published files (default: ``$ICL_CMR_REFERENCE``, else the copy
        installed with icl-cmr).
    fits_dir : path, optional
        Also save each model's fits here as ``<model>_paper.nc`` and ``<model>_lsq.nc``.
    log : callable, optional
        Called with one line per model or data set (units and seconds).

    Returns
    -------
    str
        The markdown table of docs/fitting.md, one row per model and data set (ends with a line break).
    """
    profiles_path = published_file("head_profiles.csv.gz", reference=reference)
    grid = load_published_grid(published_file("cmr_crp_grid.npz", reference=reference))
    rows = []
    for model in models:
        start = time.perf_counter()
        heads, paper, lsq = fit_model(profiles_path, grid, model)
        rows.append(summarise(model, heads, paper, lsq))
        if fits_dir is not None:
            save_dataset(paper, Path(fits_dir) / f"{model}_paper.nc")
            save_dataset(lsq, Path(fits_dir) / f"{model}_lsq.nc")
        if log is not None:
            log(f"{model}: {rows[-1]['heads']} heads in {time.perf_counter() - start:.1f} s")
    for source in humans:
        start = time.perf_counter()
        crp, paper, lsq = fit_humans(source, grid)
        rows.append(summarise(source, crp, paper, lsq))
        if log is not None:
            log(f"{source}: {rows[-1]['heads']} subjects in {time.perf_counter() - start:.1f} s")
    return markdown(rows)
