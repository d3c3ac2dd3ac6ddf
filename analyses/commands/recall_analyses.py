"""``icl-cmr recall-analyses``: a chosen set of free-recall analyses into one dataset or table."""
from __future__ import annotations

from .options import RECALL_SOURCES

HELP = "several free-recall analyses (psifr's and beyond) of one data set into one file"

DESCRIPTION = f"""\
Run a chosen set of free-recall analyses of one data set, with psifr's names and results:

  lag_crp, lag_rank, spc, pfr, pnr, input_crp   temporal organisation and serial position
  intrusion_rates, pli_list_lag                 intrusions (prior-list ones by list lag)
  stop_probability, irt, lag_crl                when recall stops; inter-response times
                                                (irt, lag_crl need --time-key)
  category_crp, category_clustering             category organisation (needs --category-key)
  distance_crp, distance_rank,                  semantic organisation (needs --distances)
  distance_rank_shifted, distance_rank_window,
  distance_rank_window_asym
  rep_crp, neighbor_crp, spacing_recall,        lists with repeated study items (docs/repetition.md;
  first_presentation_bias                       bundled: icl-cmr:repetition); the analyses without a
                                                convention for repeats refuse them and all leaves them out

{RECALL_SOURCES}
The output's extension picks the format: .nc (one netCDF dataset: each analysis's variables
and dims prefixed with its name, e.g. category_crp_prob, lag_crp_lag), .csv or .parquet (one
long table: an analysis column, then each analysis's own columns; empty where an analysis
has no such column).

Examples:
  icl-cmr recall-analyses psifr:Morton2013 --distances psifr:Morton2013 -o morton.nc
  icl-cmr recall-analyses psifr:Morton2013 --analyses lag_crp,category_crp -o two.csv
  icl-cmr recall-analyses lab.csv --list-keys session --normalize-items -o lab.csv
  icl-cmr recall-analyses LohnasKahana2014.h5 --analyses spacing_recall,first_presentation_bias -o lk.nc
"""


def register(sub):
    from .options import add_lags, add_recall_command

    parser = add_recall_command(sub, "recall-analyses", HELP, DESCRIPTION, "result", run)
    parser.add_argument("--analyses", default="all", metavar="NAME[,NAME]",
                        help="comma-separated analyses, or all (default: every analysis the data support)")
    parser.add_argument("--category-key", default="category", metavar="COL",
                        help="column with each studied item's category (default category)")
    parser.add_argument("--distances", default=None, metavar="NAME|FILE.npz",
                        help="item distances: psifr:Morton2013 or an .npz with arrays items and distances")
    parser.add_argument("--index-key", default=None, metavar="COL",
                        help="column with each item's row in the distance matrix (default: match items by name)")
    parser.add_argument("--bins", type=int, default=10, metavar="N",
                        help="distance-CRP bins between the 1st and 99th percentile of the distances (default 10)")
    parser.add_argument("--max-lag", type=int, default=3, metavar="K", help="largest list lag of pli_list_lag (3)")
    parser.add_argument("--max-shift", type=int, default=3, metavar="K",
                        help="recalls back of distance_rank_shifted (default 3)")
    parser.add_argument("--time-key", default="rt", metavar="COL",
                        help="column with each recall's onset time, for irt and lag_crl (default rt)")
    add_lags(parser, None, "lags of lag_crp to keep")


def run(args) -> int:
    import json

    from cmr.analysis_set import analyses_table, run_analyses
    from cmr.io import result_format, write_result, write_table
    from ...adapters.recall_data import load_item_distances, load_recall_data
    from .options import describe_units, grouping, recall_data_options

    suffix = result_format(args.output)
    events = load_recall_data(args.source, **recall_data_options(args))
    distances = None if args.distances is None else load_item_distances(args.distances)
    options = dict(by=grouping(args), lags=args.lags, category_key=args.category_key, distances=distances,
                   index_key=args.index_key, edges=args.bins, max_lag=args.max_lag, max_shift=args.max_shift,
                   time_key=args.time_key)
    if suffix == ".nc":
        result = run_analyses(events, analyses=args.analyses, **options)
        path = write_result(result, args.output)
        names = ", ".join(json.loads(result.attrs["analyses"]))
        units = describe_units(result, events)
    else:
        table = analyses_table(events, analyses=args.analyses, **options)
        path = write_table(table, args.output)
        names = ", ".join(table["analysis"].unique())
        units = f"{events.sizes['trial']} lists"
    ignored = json.loads(events.attrs.get("ignored_trial_types", "{}"))
    skipped = "; ignored rows: " + ", ".join(f"{n} {kind}" for kind, n in ignored.items()) if ignored else ""
    print(f"wrote {path}: {names} of {args.source} ({units}){skipped}")
    return 0
