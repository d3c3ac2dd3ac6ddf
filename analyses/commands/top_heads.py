"""``icl-cmr top-heads``: the study's top-N table, its procedure and the fair one side by side."""
from __future__ import annotations

HELP = "CMR against the Gaussian baseline on the top induction heads (the study's table and a fair redo)"

DESCRIPTION = """\
Pool the published heads of the Pythia models (final checkpoint), take the N with the highest
induction score (N = 20, 50, 100, 200), and compare the mean CMR distance with a Gaussian
baseline's two ways:

  study  CMR 'paper' fit against the study's Gaussian procedure (mu started at the peak value,
         a flat line when the fit fails), unpaired t-test: reproduces the study's table
         (Ji-An et al., NeurIPS 2024: Gaussian 1.0/0.98/0.98/0.97)
  fair   the same heads against a fairly fitted Gaussian (many starts, bounded), paired tests
         (paired t and Wilcoxon signed-rank), CMR 'paper' and 'lsq'

Reads the study's published files installed with icl-cmr (or from --reference DIR or
$ICL_CMR_REFERENCE). Only four of the study's eight Pythia models are published, so the
top sets are not the study's own.

Examples:
  icl-cmr top-heads
  icl-cmr top-heads --sizes 10 20 -o top_heads.csv      # also the per-head distances
  icl-cmr top-heads --models qwen-7b mistral-7b llama3-8b
"""


def register(sub):
    import argparse

    from ..heads.top_heads import PYTHIA_MODELS, TOP_SIZES

    p = sub.add_parser("top-heads", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(PYTHIA_MODELS), metavar="MODEL",
                   help="published models to pool (default: the four Pythia models)")
    p.add_argument("--sizes", nargs="+", type=int, default=list(TOP_SIZES), metavar="N",
                   help="top-set sizes (default 20 50 100 200)")
    p.add_argument("--reference", default=None, metavar="DIR", help="folder with head_profiles.csv.gz and cmr_crp_grid.npz (default: the copy installed with icl-cmr)")
    p.add_argument("-o", "--output", default=None, metavar="FITS.csv",
                   help="also write the per-head distances (.csv or .parquet)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr.errors import ParameterError
    from cmr.io import result_format, write_table
    from cmr.markdown import markdown_table
    from ..heads.top_heads import top_heads_fits, top_heads_table

    if args.output is not None and result_format(args.output) == ".nc":
        raise ParameterError(f"-o writes a table: give a .csv or .parquet name; got {args.output!r}")
    if any(n < 2 for n in args.sizes):
        raise ParameterError(f"--sizes must be at least 2 (a paired test needs pairs); got {args.sizes}")
    from ...adapters.published import PUBLISHED_FILES, published_file

    for name in PUBLISHED_FILES:  # profiles, induction scores and grid: a folder lacking one fails here, not mid-way
        published_file(name, reference=args.reference)
    fits = top_heads_fits(reference=args.reference, models=tuple(args.models), n=max(args.sizes))
    table = top_heads_table(fits, sizes=sorted(args.sizes))
    print(markdown_table(table.columns, table.itertuples(index=False)))
    if args.output is not None:
        print(f"wrote {write_table(fits, args.output)}")
    return 0
