"""Share of units that are CMR-like beyond chance, per model and per human data set.

Reproduces the tables of docs/null-models.md:

    icl-cmr reproduce null-shares [--reference DIR] [--heads SMOL.nc] [-o TABLE.md]

Every unit goes through :func:`cmr.null_models.cmr_like_null` (the study's published grid,
objectives ``paper`` and ``lsq``, 200 permuted-lag and 200 roughness-matched structureless null
profiles per unit, alpha 0.05): the published heads of every model at its final checkpoint
(window -5..+5), the heads of the embedded SmolLM2-135M (extracted here with the default prompt
settings, or read from ``--heads``) and the subjects of PEERS and Morton2013 (lag-CRPs, lags
-5..-1, 1..5). Also the share that survives a Benjamini-Hochberg correction across the units of
a row (false discovery rate 0.05). Beside it, forward asymmetry: the median of
(y(+1) - y(-1)) / sd_lag(y) and the units whose lag +1 is above (forward) or below (backward)
lag -1 beyond their own sampling error (p <= 0.05, two-sided), with Wilson 95% intervals. Last,
the units CMR-like under the study's definition (d < 0.5 and beyond both nulls) and under the
strict one (also attention mass, a forward effect size and the mirror criterion; the mass
criterion is applied to heads with probabilities only, and the column says so).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cmr import multiple_comparisons
from cmr.checks import seed_of
from cmr.crp import lag_crp
from cmr.deprecation import keyword_only, warn
from cmr.errors import ParameterError
from cmr.io import load_dataset
from cmr.markdown import markdown_table
from cmr.null_models import cmr_like_null
from ...adapters.lm.extraction import extract_heads
from ...adapters.lm.loading import load_model
from ...adapters.published import published_file, read_published_profiles
from ...adapters.published_grid import load_published_grid
from ...adapters.recall_data import load_recall_data
from .published_fits import HUMAN_DATA, MODELS
from ..study.layout import DEFAULT_MODEL, HEAD_LAGS, HUMAN_LAGS

N_NULL = 200
ALPHA = 0.05


def benjamini_hochberg(p_values, q: float = ALPHA) -> np.ndarray:
    """Deprecated: ``cmr.benjamini_hochberg(p_values) <= q`` (adjusted p-values, then the level).

    Boolean mask of the p-values rejected by the Benjamini-Hochberg step-up rule at level ``q``.
    """
    warn("icl_cmr.analyses.reproduce.null_shares.benjamini_hochberg is deprecated and will be removed in the next "
         "release; use cmr.benjamini_hochberg(p_values) <= q (it returns adjusted p-values)")
    return multiple_comparisons.benjamini_hochberg(p_values) <= q


@keyword_only
def summarise(label: str, null, *, top=None) -> dict:
    """One table row: shares of a ``profile_null`` dataset's units (``top``: mask of top-10% induction heads)."""
    p = null["p_value"].values.ravel()
    finite = np.isfinite(p)
    d = null["distance"].values.ravel()[finite]
    p = p[finite]
    row = {
        "units": label,
        "objective": null.attrs["objective"],
        "n": str(int(finite.sum())),
        "d < 0.5": f"{100 * np.mean(d < 0.5):.0f}%",
        "null d < 0.5 (permuted / smooth)": (f"{100 * null.attrs['null_share_cmr_like_permuted']:.0f}% / "
                                             f"{100 * null.attrs['null_share_cmr_like_smooth']:.0f}%"),
        "calibrated threshold": f"{null.attrs['calibrated_threshold']:.3f}",
        "beyond chance (p <= 0.05)": f"{100 * np.mean(p <= ALPHA):.0f}%",
        "after BH (FDR 0.05)": f"{100 * np.mean(multiple_comparisons.benjamini_hochberg(p) <= ALPHA):.0f}%",
    }
    if top is not None:
        top = np.asarray(top).ravel()[finite]
        row["top-10% induction heads beyond chance"] = f"{int(np.sum(p[top] <= ALPHA))} of {int(top.sum())}"
    else:
        row["top-10% induction heads beyond chance"] = "-"
    row.update(asymmetry_columns(null, finite, top=top))
    row.update(definition_columns(null, finite, top=top))
    return row


@keyword_only
def definition_columns(null, finite, *, top=None) -> dict:
    """The row's CMR-like units under the study's and the strict definition (docs/null-models.md)."""
    study = null["cmr_like_study"].values.ravel()[finite].astype(bool)
    strict = null["cmr_like_strict"].values.ravel()[finite].astype(bool)
    mass = null.attrs["mass_criterion"]
    cells = {
        "CMR-like, study (d < 0.5, beyond both nulls)": _count_interval(study),
        "CMR-like, strict": _count_interval(strict),
        "mass criterion": mass.split(":")[0],
    }
    if top is not None:
        cells["top-10% induction heads CMR-like (study / strict)"] = (f"{int(np.sum(study[top]))} / "
                                                                      f"{int(np.sum(strict[top]))} of {int(top.sum())}")
    else:
        cells["top-10% induction heads CMR-like (study / strict)"] = "-"
    return cells


@keyword_only
def asymmetry_columns(null, finite, *, top=None) -> dict:
    """Forward-asymmetry cells of a table row: counts with Wilson 95% intervals (``finite``: the row's units)."""
    forward = null["forward_beyond_chance"].values.ravel()[finite].astype(bool)
    backward = null["backward_beyond_chance"].values.ravel()[finite].astype(bool)
    cmr_like = null["p_value"].values.ravel()[finite] <= ALPHA
    asymmetry = null["asymmetry"].values.ravel()[finite]
    cells = {
        "median asymmetry (+1 vs -1, sd units)": f"{np.median(asymmetry):+.2f}" if asymmetry.size else "-",
        "forward beyond chance": _count_interval(forward),
        "backward beyond chance": _count_interval(backward),
        "CMR-like and forward beyond chance": _count_interval(cmr_like & forward),
    }
    if top is not None:
        cells["top-10% induction heads forward"] = f"{int(np.sum(forward[top]))} of {int(top.sum())}"
    else:
        cells["top-10% induction heads forward"] = "-"
    return cells


def _count_interval(mask) -> str:
    """``k of n (share%, Wilson 95% interval)``."""
    k, n = int(np.sum(mask)), int(np.size(mask))
    if n == 0:
        return "0 of 0"
    low, high = wilson_interval(k, n)
    return f"{k} of {n} ({100 * k / n:.0f}%, {100 * low:.0f}-{100 * high:.0f}%)"


@keyword_only
def wilson_interval(k: int, n: int, *, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial share ``k / n`` (95% by default)."""
    share = k / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _top_decile(heads):
    if "induction_score" not in heads:
        return None
    induction = heads["induction_score"].values.ravel()
    return np.isfinite(induction) & (induction >= np.nanquantile(induction, 0.9))


def smollm2_heads(path=None):
    """The embedded model's head profiles: read from ``path``, else extracted with the default prompts."""
    if path is not None:
        return load_dataset(path)
    return extract_heads(load_model(DEFAULT_MODEL))


def null_table(*, reference: str | Path | None = None, heads_path: str | Path | None = None,
               objectives: Sequence[str] = ("paper", "lsq"), models: Sequence[str] = MODELS,
               humans: Sequence[str] = HUMAN_DATA, include_smollm2: bool = True, n_null: int = N_NULL, rng=0,
               log: Callable[[str], None] | None = None) -> list[dict]:
    """Rows of the shares table (list of dicts) over published models, SmolLM2 and human data sets.

    Parameters as :func:`shares_beyond_chance`.
    """
    seed = seed_of(rng)
    grid = load_published_grid(published_file("cmr_crp_grid.npz", reference=reference))
    profiles = published_file("head_profiles.csv.gz", reference=reference)
    sources = [(f"{m} heads", lambda m=m: read_published_profiles(profiles, model=m,
                                                                    checkpoint="final"), HEAD_LAGS) for m in models]
    if include_smollm2:
        sources.append((f"{DEFAULT_MODEL} heads", lambda: smollm2_heads(heads_path), HEAD_LAGS))
    sources += [(f"{s} subjects", lambda s=s: lag_crp(load_recall_data(s), by="subject"), HUMAN_LAGS) for s in humans]
    rows = []
    for label, load, lags in sources:
        units = load()
        for objective in objectives:
            start = time.perf_counter()
            null = cmr_like_null(units, grid, objective=objective, lags=lags, n_null=n_null, rng=seed)
            rows.append(summarise(label, null, top=_top_decile(units)))
            if log is not None:
                log(f"{label} {objective}: {null.attrs['n_units']} units in {time.perf_counter() - start:.1f} s")
    return rows


def shares_beyond_chance(*, reference: str | Path | None = None, heads: str | Path | None = None,
                         models: Sequence[str] = MODELS, humans: Sequence[str] = HUMAN_DATA,
                         include_smollm2: bool = True, objectives: Sequence[str] = ("paper", "lsq"), n_null: int = N_NULL, rng=0,
                         log: Callable[[str], None] | None = None) -> str:
    """Share of units that are CMR-like beyond chance, per model and per human data set.

    Parameters
    ----------
    reference : path, optional
        Folder with the study's published files (default: ``$ICL_CMR_REFERENCE``, else the copy
        installed with icl-cmr).
    heads : path, optional
        Head profiles of the embedded model (.nc, from ``icl-cmr heads``); default: extracted here
        with the default prompt settings (loads the model).
    models : sequence of str, default :data:`MODELS`
        Published models, each at its final checkpoint.
    humans : sequence of str, default :data:`HUMAN_DATA`
        Recall data sets whose subjects are tested.
    include_smollm2 : bool, default True
        Test the embedded model's heads too.
    objectives : sequence of str, default ("paper", "lsq")
        Objectives of :func:`cmr.null_models.cmr_like_null`, one row each per unit set.
    n_null : int, default :data:`N_NULL`
        Null profiles per unit and null.
    rng : int or numpy.random.Generator, default 0
        Seed of the null profiles (a Generator draws one seed, used for every row).
    log : callable, optional
        Called with one line per row (units and seconds).

    Returns
    -------
    str
        The markdown table of docs/null-models.md (no trailing line break).
    """
    rows = null_table(reference=reference, heads_path=heads, objectives=objectives, models=models, humans=humans,
                      include_smollm2=include_smollm2, n_null=n_null, rng=rng, log=log)
    if not rows:
        raise ParameterError("null_shares needs at least one model, data set or the embedded model; got none")
    return markdown_table(rows[0].keys(), (row.values() for row in rows))
