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

import sys
import time
from pathlib import Path

import numpy as np

from cmr import multiple_comparisons
from cmr.deprecation import warn
from .human_comparison import emit_markdown, markdown
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


def summarise(label: str, null, top=None) -> dict:
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
    row.update(asymmetry_columns(null, finite, top))
    row.update(definition_columns(null, finite, top))
    return row


def definition_columns(null, finite, top=None) -> dict:
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


def asymmetry_columns(null, finite, top=None) -> dict:
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


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
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
    from cmr.io import load_dataset

    if path is not None:
        return load_dataset(path)
    from ...adapters.lm.loading import load_model
    from ...adapters.lm.extraction import extract_heads

    return extract_heads(load_model(DEFAULT_MODEL))


def null_table(reference=None, heads_path=None, objectives=("paper", "lsq"), models=MODELS, humans=HUMAN_DATA,
               include_smollm2=True, n_null=N_NULL, log=None):
    """Rows of the shares table (list of dicts) over published models, SmolLM2 and human data sets."""
    from ...adapters.published import published_file, read_published_profiles
    from ...adapters.published_grid import load_published_grid
    from ...adapters.recall_data import load_recall_data
    from cmr.crp import lag_crp
    from cmr.null_models import cmr_like_null

    grid = load_published_grid(published_file("cmr_crp_grid.npz", reference))
    profiles = published_file("head_profiles.csv.gz", reference)
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
            null = cmr_like_null(units, grid, objective=objective, lags=lags, n_null=n_null, rng=0)
            rows.append(summarise(label, null, _top_decile(units)))
            if log is not None:
                log(f"{label} {objective}: {null.attrs['n_units']} units in {time.perf_counter() - start:.1f} s")
    return rows


def add_arguments(parser) -> None:
    """The options of ``icl-cmr reproduce null-shares``."""
    parser.add_argument("--reference", type=Path, default=None, help="folder with the study's published files (default: $ICL_CMR_REFERENCE, else the copy installed with icl-cmr)")
    parser.add_argument("--heads", type=Path, default=None, metavar="HEADS.nc",
                        help="SmolLM2 head profiles (.nc, from icl-cmr heads) instead of extracting them")
    parser.add_argument("--no-smollm2", action="store_true", help="skip the embedded model")
    parser.add_argument("--models", nargs="*", default=list(MODELS), metavar="MODEL",
                        help=f"published models (default all: {', '.join(MODELS)})")
    parser.add_argument("--n-null", type=int, default=N_NULL, help=f"null profiles per unit and null (default {N_NULL})")
    parser.add_argument("-o", "--out", type=Path, metavar="TABLE.md", help="write the markdown table here")


def run(args) -> int:
    """Test every unit and tabulate (``icl-cmr reproduce null-shares``): print the table, write it to ``--out``."""
    import pandas as pd

    rows = null_table(args.reference, args.heads, models=args.models, include_smollm2=not args.no_smollm2,
                      n_null=args.n_null, log=lambda text: print(text, file=sys.stderr))
    emit_markdown(markdown(pd.DataFrame(rows)), args.out)
    return 0


def main(argv=None) -> int:
    """Deprecated entry point of ``python -m icl_cmr.analyses.reproduce.null_shares``: runs ``icl-cmr reproduce null-shares``."""
    from cmr import deprecation
    from ..cli import main as cli_main

    deprecation.warn("python -m icl_cmr.analyses.reproduce.null_shares is deprecated and will be removed in the next "
                    "release; use icl-cmr reproduce null-shares")
    return cli_main(["reproduce", "null-shares", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
