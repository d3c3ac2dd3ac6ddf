"""``icl-cmr export``: an existing result as a table (CSV, Parquet) or netCDF, alone or joined per unit."""
from __future__ import annotations

HELP = "convert a result (.nc) to a CSV or Parquet table; join per-unit tables of several results"

DESCRIPTION = """\
Write a result of another icl-cmr command (a netCDF file) in the format the output's
extension names: .csv (for a spreadsheet or R), .parquet (pandas, R arrow, DuckDB) or .nc.

Layouts (--layout):
  units  one row per unit (head, subject, list, grid point) with its numbers: for heads
         model, checkpoint, layer, head, induction_score, copying_score, ..., amplitude (the
         score profile's range over lags -5..5), attention_mass and uniform_mass (probability
         on lags -5..5 and its uniform-attention level; heads with probabilities); for a fit
         distance, gain, offset, beta_enc, beta_rec, gamma, grid_beta_enc, ...,
         gaussian_mu, gaussian_sigma, aic, bic, gaussian_aic, ...; for recall fits one
         column per CMR parameter, logl, n, ...
  long   one row per unit and lag (profiles, lag-CRPs), per unit and serial position (SPC,
         PFR), per unit, output and serial position (PNR); per-unit numbers repeated
  auto   (default) units for fits, psifr's long table for recall events, long otherwise
  NAME   a data variable of RESULT: one row per value of its dims, with every variable whose
         dims fit in them (--layout spc of a predictive check; --layout set_layer of an
         ablation; --layout units of events: one row per list)

A table that leaves variables out (curves over other dims, values the same for every unit)
says so in one line after the output, with the layout that holds them, e.g.
  left out: spc, spc_group, spc_group_sem (use --layout spc); pfr, ... (use --layout pfr)

--with FILE.nc:PREFIX joins the per-unit table of another result of the same units, its
columns prefixed with PREFIX_ (repeatable; without :PREFIX its columns are added as they
are and must not collide with the others). The results must hold exactly the same units.
Columns come in this order: RESULT's, those of --with files without a prefix, then the
prefixed ones.

Examples:
  icl-cmr export fits.nc -o fits.csv
  icl-cmr export heads.nc --with fits_lsq.nc:lsq --with fits_paper.nc:paper -o heads.csv
  icl-cmr export crp.nc --layout long -o crp.parquet
  icl-cmr export check.nc --layout spc -o check_spc.csv
"""


def parse_with(text: str):
    """``FILE`` or ``FILE:PREFIX`` -> (path, prefix or None); PREFIX is a name like lsq."""
    import argparse

    path, sep, prefix = text.rpartition(":")
    if not sep or "/" in prefix or "\\" in prefix or "." in prefix:
        path, prefix = text, None  # no prefix given (a colon inside a path stays in the path)
    elif not prefix.isidentifier():
        raise argparse.ArgumentTypeError(
            f"--with takes FILE.nc or FILE.nc:PREFIX with PREFIX a name such as lsq; got {text!r}")
    if not path:
        raise argparse.ArgumentTypeError(f"--with takes FILE.nc or FILE.nc:PREFIX; got {text!r}")
    return path, prefix


def register(sub):
    import argparse

    from .options import add_output

    p = sub.add_parser("export", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", metavar="RESULT.nc", help="a result of icl-cmr (netCDF)")
    add_output(p, "OUT.csv")
    p.add_argument("--layout", default="auto", metavar="LAYOUT",
                   help="units: one row per unit; long: one row per unit and lag (or position); auto (default): "
                        "units for fits, long otherwise; the name of a data variable: the table of its dims")
    p.add_argument("--with", dest="joined", action="append", type=parse_with, default=[], metavar="FILE.nc[:PREFIX]",
                   help="join the per-unit table of another result of the same units, columns prefixed PREFIX_ "
                        "(repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr import load_dataset, save_dataset, to_dataframe, unit_table
    from cmr.errors import ParameterError, SchemaError
    from cmr.io import result_format, write_table
    from cmr.tables import left_out_line

    suffix = result_format(args.output)
    if args.joined and suffix == ".nc":
        raise ParameterError("--with joins per-unit tables: write them to .csv or .parquet, not .nc")
    if args.joined and args.layout == "long":
        raise ParameterError("--with joins per-unit tables: use --layout units (or auto), not long")
    result = load_dataset(args.result)
    if suffix == ".nc":
        path = save_dataset(result, args.output)
        print(f"wrote {path}: the {result.attrs['icl_cmr_kind']} dataset of {args.result}")
        return 0
    if args.joined:
        # unit_table numbers its inputs: RESULT, the unprefixed --with files, then the prefixed ones
        plain = [file for file, prefix in args.joined if prefix is None]
        named = _named([(prefix, file) for file, prefix in args.joined if prefix is not None])
        files = [args.result, *plain, *named.values()]
        try:
            table = unit_table(_with_head_summaries(result), *(_with_head_summaries(load_dataset(f)) for f in plain),
                               **{p: _with_head_summaries(load_dataset(f)) for p, f in named.items()})
        except SchemaError as exc:
            legend = ", ".join(f"{number} = {file}" for number, file in enumerate(files, start=1))
            raise SchemaError(f"{exc} (results: {legend})") from None
    else:
        table = to_dataframe(_with_head_summaries(result), layout=args.layout)
    missing = left_out_line(result, layout="units" if args.joined else args.layout, option="--layout ")
    path = write_table(table, args.output)
    shown = ", ".join(map(str, table.columns[:6])) + (", ..." if table.shape[1] > 6 else "")
    print(f"wrote {path}: {len(table)} rows x {table.shape[1]} columns ({shown})")
    if missing:
        print(missing)
    return 0


def _with_head_summaries(dataset):
    """A head profile dataset with each head's amplitude and attention mass (computed if the file predates them)."""
    if dataset.attrs.get("icl_cmr_kind") == "lag_profile" and dataset.attrs.get("unit_kind") == "heads":
        from ...adapters.head_profiles import with_attention_mass

        return with_attention_mass(dataset)
    return dataset


def _named(pairs) -> dict:
    from cmr.errors import ParameterError

    named = {}
    for prefix, file in pairs:
        if prefix in named:
            raise ParameterError(f"--with: the prefix {prefix!r} is given twice")
        named[prefix] = file
    return named
