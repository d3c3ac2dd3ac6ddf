"""``icl-cmr run``: the whole study on the embedded defaults (what ``make demo`` runs)."""
from __future__ import annotations

HELP = "run the whole study (human lag-CRPs, head scan, CMR fits, ablation, figures, report)"


def register(sub):
    from analyses.study import DEFAULT_MODEL, DEFAULT_RECALL

    p = sub.add_parser(
        "run",
        help=HELP,
        description=(
            "Run the study end to end and write netCDF results, figures and report.md to DIR. "
            f"Defaults: model {DEFAULT_MODEL} (embedded, offline), recall data "
            f"{', '.join(DEFAULT_RECALL)}. Every stage writes its outputs atomically and is "
            "recorded in DIR/manifest.json; with --resume, finished stages are skipped."
        ),
    )
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"language model (default {DEFAULT_MODEL})")
    p.add_argument(
        "--recall",
        nargs="+",
        default=list(DEFAULT_RECALL),
        metavar="SOURCE",
        help="recall data sets: bundled names (psifr:Morton2013, psifr:peers_notask, "
        "cymr:Morton2013_mixed) or psifr-format CSV files",
    )
    p.add_argument("--resume", action="store_true", help="skip stages finished by an earlier run in DIR")
    p.set_defaults(func=run)


def run(args) -> int:
    from analyses.study import run_study

    run_study(args.out, recall=args.recall, model=args.model, resume=args.resume)
    print(f"results in {args.out}/ (report: {args.out}/report.md)")
    return 0
