"""Fitted CMR parameters of heads, of human subjects and of the literature, side by side.

``icl-cmr reproduce human-comparison [--reference DIR] [-o TABLE.md]`` fits every subject of
PEERS and Morton2013 and the top-10% induction heads of each published model through the same
call (``cmr.profile_fit.fit_profiles``, objective ``lsq``, the study's published grid) and
prints median and interquartile range of (beta_enc, beta_rec, gamma) next to the published human
fits listed in data/published_human_cmr_fits.csv, with every beta also on the other model's
scale (decay-matched, :mod:`cmr.beta_scales`) and the share of fits on the grid's edge.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cmr.beta_scales import paper_beta, textbook_beta
from cmr.crp import lag_crp
from cmr.errors import ParameterError
from cmr.markdown import markdown_table
from cmr.profile_fit import fit_profiles
from ...adapters.published import published_file, published_human_fits, read_published_profiles
from ...adapters.published_grid import load_published_grid
from ...adapters.recall_data import load_recall_data
from ..study.layout import HEAD_LAGS, HUMAN_LAGS

MODELS = ("gpt2-small", "pythia-410m-deduped-v0", "qwen-7b", "mistral-7b", "llama3-8b")
#: the recall data sets whose subjects are fitted
HUMAN_DATA = ("psifr:peers_notask", "psifr:Morton2013")


def _quartiles(values) -> str:
    q = np.nanpercentile(values, [25, 50, 75])
    return f"{q[1]:.2f} [{q[0]:.2f}, {q[2]:.2f}]"


def _describe(label, params: np.ndarray, distance: np.ndarray, edges: np.ndarray) -> dict:
    """Median [IQR] of the paper's variant's parameters, of beta on the textbook scale, and grid-edge shares."""
    finite = np.isfinite(distance)
    row = {"units": label, "n": str(int(finite.sum())), "median d": float(np.nanmedian(distance))}
    for k, name in enumerate(("beta_enc", "beta_rec", "gamma")):
        row[name] = _quartiles(params[:, k])
    row["beta_enc textbook"] = _quartiles(textbook_beta(params[:, 0], phase="enc"))
    row["beta_rec textbook"] = _quartiles(textbook_beta(params[:, 1], phase="rec"))
    share = 100 * edges[finite].mean(axis=0)
    row["on grid edge: beta_enc / beta_rec / gamma"] = f"{share[0]:.0f}% / {share[1]:.0f}% / {share[2]:.0f}%"
    return row


def comparison_table(*, reference: str | Path | None = None, objective: str = "lsq", models: Sequence[str] = MODELS,
                     humans: Sequence[str] = HUMAN_DATA) -> pd.DataFrame:
    """The rows of the comparison as a frame: subjects, top-10% induction heads, published fits.

    Parameters as :func:`compare_parameters`; one row per data set, model and published study.
    """
    grid = load_published_grid(published_file("cmr_crp_grid.npz", reference=reference))
    profiles = published_file("head_profiles.csv.gz", reference=reference)
    rows = []
    for source in humans:
        crp = lag_crp(load_recall_data(source), by="subject")
        fits = fit_profiles(crp, grid, objective=objective, lags=HUMAN_LAGS, invalid="nan")
        params = fits["parameters"].transpose("subject", "parameter").values
        edges = fits["at_grid_edge"].transpose("subject", "parameter").values
        rows.append(_describe(f"{source} subjects", params, fits["distance"].values, edges))
    for model in models:
        heads = read_published_profiles(profiles, model=model, checkpoint="final")
        fits = fit_profiles(heads, grid, objective=objective, lags=HEAD_LAGS, invalid="nan")
        induction = heads["induction_score"].values.ravel()
        finite = np.isfinite(induction)
        top = finite & (induction >= np.nanpercentile(induction[finite], 90))
        params = fits["parameters"].transpose(..., "parameter").values.reshape(-1, 3)[top]
        edges = fits["at_grid_edge"].transpose(..., "parameter").values.reshape(-1, 3)[top]
        rows.append(_describe(f"{model} top-10% induction heads", params, fits["distance"].values.ravel()[top], edges))
    published = published_human_fits()
    for _, p in published.iterrows():
        label = f"published: {p['study']}" + (f" ({p['data']})" if isinstance(p["data"], str) else "")
        # published fits are textbook CMR: shown on both scales (the paper's variant's by the inverse map)
        rows.append({"units": label, "n": "-", "median d": np.nan,
                     "beta_enc": f"{paper_beta(p['beta_enc'], phase='enc'):.2f}", "beta_rec": f"{paper_beta(p['beta_rec'], phase='rec'):.2f}",
                     "gamma": "-", "beta_enc textbook": f"{p['beta_enc']:.3f}", "beta_rec textbook": f"{p['beta_rec']:.3f}",
                     "on grid edge: beta_enc / beta_rec / gamma": "-"})
    return pd.DataFrame(rows)


def compare_parameters(*, reference: str | Path | None = None, objective: str = "lsq", models: Sequence[str] = MODELS,
                       humans: Sequence[str] = HUMAN_DATA) -> str:
    """Fitted CMR parameters of heads, of human subjects and of the literature, side by side.

    Every subject of PEERS and Morton2013 and the top-10% induction heads of each model of
    :data:`MODELS` go through :func:`cmr.profile_fit.fit_profiles` on the study's published grid;
    the published human fits (data/published_human_cmr_fits.csv) follow.

    Parameters
    ----------
    reference : path, optional
        Folder with the study's published files (default: ``$ICL_CMR_REFERENCE``, else the copy
        installed with icl-cmr).
    objective : {"lsq", "paper"}, default "lsq"
        Fitting objective of :func:`cmr.profile_fit.fit_profiles`.
    models : sequence of str, default :data:`MODELS`
        Published models whose top-10% induction heads are fitted (final checkpoint).
    humans : sequence of str, default :data:`HUMAN_DATA`
        Recall data sets whose subjects are fitted.

    Returns
    -------
    str
        The markdown table of docs/fitting.md (median [IQR] of beta_enc, beta_rec, gamma, beta on the
        textbook scale, grid-edge shares); no trailing line break.
    """
    if objective not in ("lsq", "paper"):
        raise ParameterError(f"objective must be 'lsq' or 'paper'; got {objective!r}")
    frame = comparison_table(reference=reference, objective=objective, models=models, humans=humans)
    return markdown_table(frame.columns, frame.itertuples(index=False))
