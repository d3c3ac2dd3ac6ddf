"""The study's top-N table: CMR against the Gaussian baseline on the top induction heads.

Ji-An, Zhou, Benna & Mattar (NeurIPS 2024) pool the heads of the Pythia models at their final
checkpoint, take the N = 20/50/100/200 with the highest induction score, and report the mean CMR
distance (0.11/0.05/0.12/0.12) against the mean distance of their Gaussian baseline
(1.0/0.98/0.98/0.97), with unpaired t-tests (all p < 0.0001). :func:`top_heads_table` redoes this
on the published profiles, side by side:

- **study**: CMR with the ``paper`` objective, the Gaussian with the study's own procedure
  (``gaussian="study"``: ``mu`` started at the peak value, a flat line when the fit fails),
  the unpaired (pooled-variance) t-test as the study ran it (``scipy.stats.ttest_ind``);
- **fair**: the same heads, the fairly fitted Gaussian (the default), against CMR ``paper`` and
  ``lsq``, with paired tests (paired t-test and Wilcoxon signed-rank), since both fits see the
  same heads.

Only four of the study's eight Pythia models are published (70m, 410m, 2.8b, 12b), so the top
sets differ from the study's. ``icl-cmr top-heads`` prints the table.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr

from cmr.deprecation import keyword_only
from cmr.errors import ParameterError
from cmr.profile_fit import fit_profiles
from cmr.schema import provenance_attrs, validate

from ...adapters.head_ranking import rank_heads
from ...adapters.published import published_file, read_published_profiles
from ...adapters.published_grid import load_published_grid

__all__ = ["PYTHIA_MODELS", "TOP_SIZES", "top_induction_heads", "top_heads_fits", "top_heads_table"]

PYTHIA_MODELS = ("pythia-70m-deduped-v0", "pythia-410m-deduped-v0", "pythia-2.8b-deduped-v0", "pythia-12b-deduped-v0")
TOP_SIZES = (20, 50, 100, 200)


@keyword_only
def top_induction_heads(*, reference=None, models=PYTHIA_MODELS, n: int = 200) -> xr.Dataset:
    """The ``n`` heads with the highest induction score pooled over ``models`` (final checkpoints).

    Returns a ``lag_profile`` dataset with one dim ``unit`` (rank order, best first) and
    coords ``model``, ``layer``, ``head``, ``induction_score``; heads without a score are skipped.
    """
    path = published_file("head_profiles.csv.gz", reference=reference)
    parts = []
    for model in models:
        heads = read_published_profiles(path, model=model, checkpoint="final")
        stacked = heads[["profile", "induction_score"]].stack(unit=("model", "checkpoint", "layer", "head"))
        parts.append(stacked.reset_index("unit").transpose("unit", "lag"))
    pooled = xr.concat(parts, dim="unit")
    ranked = rank_heads(pooled["induction_score"].values, largest=True)
    if n > ranked.size:
        raise ParameterError(f"asked for the top {n} induction heads; the models have {ranked.size} scored heads")
    top = pooled.isel(unit=ranked[:n])
    out = xr.Dataset({"profile": (("unit", "lag"), top["profile"].values)},
                     coords={"unit": np.arange(n), "lag": top["lag"].values,
                             "model": ("unit", top["model"].values.astype(str)),
                             "layer": ("unit", top["layer"].values.astype(np.int64)),
                             "head": ("unit", top["head"].values.astype(np.int64)),
                             "induction_score": ("unit", top["induction_score"].values)})
    out.attrs.update(provenance_attrs("lag_profile", "icl_cmr.analyses.heads.top_heads.top_induction_heads",
                                      models=list(models), n=int(n), selection="highest induction score, pooled"))
    out.attrs.update(profile_kind="attention_score", unit_kind="heads")
    return validate(out, "lag_profile")


@keyword_only
def top_heads_fits(*, reference=None, models=PYTHIA_MODELS, n: int = max(TOP_SIZES)) -> pd.DataFrame:
    """Per head (rank order): CMR ``paper`` and ``lsq`` distances, study and fair Gaussian distances."""
    heads = top_induction_heads(reference=reference, models=models, n=n)
    grid = load_published_grid(published_file("cmr_crp_grid.npz", reference=reference))
    study = fit_profiles(heads, grid, objective="paper", gaussian="study")
    fair = fit_profiles(heads, grid, objective="lsq", gaussian="fair")
    params = study["gaussian_parameters"].values
    return pd.DataFrame({
        "model": heads["model"].values, "layer": heads["layer"].values, "head": heads["head"].values,
        "induction_score": heads["induction_score"].values,
        "cmr_paper": study["distance"].values, "cmr_lsq": fair["distance"].values,
        "gaussian_study": study["gaussian_distance"].values, "gaussian_fair": fair["gaussian_distance"].values,
        "gaussian_study_failed": (params[:, 1] == 0) & (params[:, 2] == 0) & (params[:, 3] == 1),
    })


@keyword_only
def top_heads_table(fits: pd.DataFrame, *, sizes=TOP_SIZES) -> pd.DataFrame:
    """Means and tests of the top ``N`` rows of :func:`top_heads_fits` for each ``N`` in ``sizes``."""
    from scipy import stats

    def p_text(result):
        return f"{result.pvalue:.2g}"

    rows = []
    for n in sizes:
        top = fits.iloc[:n]
        cmr, study, fair, lsq = (top[c].to_numpy() for c in ("cmr_paper", "gaussian_study", "gaussian_fair", "cmr_lsq"))
        with warnings.catch_warnings():  # the study's Gaussian distances are often all exactly 1: t is still defined
            warnings.simplefilter("ignore", RuntimeWarning)
            study_test = stats.ttest_ind(cmr, study)
        rows.append({
            "top N": n,
            "heads per model": ", ".join(f"{m.split('-')[1]} {k}" for m, k in top["model"].value_counts(sort=False).items()),
            "study: CMR paper d": float(cmr.mean()),
            "study: Gaussian d": float(study.mean()),
            "study: unpaired t p": p_text(study_test),
            "fair: Gaussian d": float(fair.mean()),
            "fair: paired t p (paper vs Gaussian)": p_text(stats.ttest_rel(cmr, fair)),
            "fair: Wilcoxon p (paper vs Gaussian)": p_text(stats.wilcoxon(cmr, fair)),
            "fair: CMR lsq d": float(lsq.mean()),
            "fair: paired t p (lsq vs Gaussian)": p_text(stats.ttest_rel(lsq, fair)),
            "Gaussian better (lsq)": f"{int(np.sum(fair < lsq))} of {n}",
        })
    return pd.DataFrame(rows)
