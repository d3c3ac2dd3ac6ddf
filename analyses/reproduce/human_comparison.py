"""Fitted CMR parameters of heads, of human subjects and of the literature, side by side.

``icl-cmr reproduce human-comparison [--reference DIR] [-o TABLE.md]`` fits every subject of
PEERS and Morton2013 and the top-10% induction heads of each published model through the same
call (``cmr.profile_fit.fit_profiles``, objective ``lsq``, the study's published grid) and
prints median and interquartile range of (beta_enc, beta_rec, gamma) next to the published human
fits listed in data/published_human_cmr_fits.csv, with every beta also on the other model's
scale (decay-matched, :mod:`cmr.beta_scales`) and the share of fits on the grid's edge.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cmr.beta_scales import paper_beta, textbook_beta
from ...adapters.published import published_file, published_human_fits
from ..study.layout import HEAD_LAGS, HUMAN_LAGS

MODELS = ("gpt2-small", "pythia-410m-deduped-v0", "qwen-7b", "mistral-7b", "llama3-8b")


def _quartiles(values) -> str:
    q = np.nanpercentile(values, [25, 50, 75])
    return f"{q[1]:.2f} [{q[0]:.2f}, {q[2]:.2f}]"


def _describe(label, params: np.ndarray, distance: np.ndarray, edges: np.ndarray) -> dict:
    """Median [IQR] of the paper's variant's parameters, of beta on the textbook scale, and grid-edge shares."""
    finite = np.isfinite(distance)
    row = {"units": label, "n": str(int(finite.sum())), "median d": float(np.nanmedian(distance))}
    for k, name in enumerate(("beta_enc", "beta_rec", "gamma")):
        row[name] = _quartiles(params[:, k])
    row["beta_enc textbook"] = _quartiles(textbook_beta(params[:, 0], "enc"))
    row["beta_rec textbook"] = _quartiles(textbook_beta(params[:, 1], "rec"))
    share = 100 * edges[finite].mean(axis=0)
    row["on grid edge: beta_enc / beta_rec / gamma"] = f"{share[0]:.0f}% / {share[1]:.0f}% / {share[2]:.0f}%"
    return row


def comparison_table(reference: Path | None = None, objective: str = "lsq") -> pd.DataFrame:
    from ...adapters.published import read_published_profiles
    from ...adapters.published_grid import load_published_grid
    from ...adapters.recall_data import load_recall_data
    from cmr.crp import lag_crp
    from cmr.profile_fit import fit_profiles

    grid = load_published_grid(published_file("cmr_crp_grid.npz", reference))
    profiles = published_file("head_profiles.csv.gz", reference)
    rows = []
    for source in ("psifr:peers_notask", "psifr:Morton2013"):
        crp = lag_crp(load_recall_data(source), by="subject")
        fits = fit_profiles(crp, grid, objective=objective, lags=HUMAN_LAGS, invalid="nan")
        params = fits["parameters"].transpose("subject", "parameter").values
        edges = fits["at_grid_edge"].transpose("subject", "parameter").values
        rows.append(_describe(f"{source} subjects", params, fits["distance"].values, edges))
    for model in MODELS:
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
                     "beta_enc": f"{paper_beta(p['beta_enc'], 'enc'):.2f}", "beta_rec": f"{paper_beta(p['beta_rec'], 'rec'):.2f}",
                     "gamma": "-", "beta_enc textbook": f"{p['beta_enc']:.3f}", "beta_rec textbook": f"{p['beta_rec']:.3f}",
                     "on grid edge: beta_enc / beta_rec / gamma": "-"})
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """A pipe table (no tabulate dependency); floats with 3 decimals, NaN as '-'."""
    def cell(v):
        if isinstance(v, float):
            return "-" if not np.isfinite(v) else f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def add_arguments(parser) -> None:
    """The options of ``icl-cmr reproduce human-comparison``."""
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder with the study's published files (default: $ICL_CMR_REFERENCE, else the "
                             "copy installed with icl-cmr)")
    parser.add_argument("--objective", choices=("paper", "lsq"), default="lsq", help="fitting objective (default lsq)")
    parser.add_argument("-o", "--out", type=Path, metavar="TABLE.md", help="write the table as markdown here")


def run(args) -> int:
    """Fit and tabulate (``icl-cmr reproduce human-comparison``): print the table, write it to ``--out``."""
    emit_markdown(markdown(comparison_table(args.reference, args.objective)), args.out)
    return 0


def main(argv=None) -> int:
    """Deprecated entry point of ``python -m icl_cmr.analyses.reproduce.human_comparison``: runs
    ``icl-cmr reproduce human-comparison``."""
    import sys

    from cmr import deprecation
    from ..cli import main as cli_main

    deprecation.warn("python -m icl_cmr.analyses.reproduce.human_comparison is deprecated and will be removed in the next "
                    "release; use icl-cmr reproduce human-comparison")
    return cli_main(["reproduce", "human-comparison", *(sys.argv[1:] if argv is None else argv)])


def emit_markdown(table: str, out=None) -> None:
    """Print a markdown table and, if ``out`` is given, write it there atomically."""
    if out:
        from cmr.io import atomic_write

        with atomic_write(out, suffix=".md") as tmp:
            tmp.write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    raise SystemExit(main())
