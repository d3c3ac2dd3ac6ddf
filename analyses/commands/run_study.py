"""``icl-cmr run``: the whole study on the embedded defaults (what ``make demo`` runs)."""
from __future__ import annotations

HELP = "run the whole study (human lag-CRPs, head scan, CMR fits, ablation, figures, report)"


def register(sub):
    from .options import add_device, add_recall_data_options
    from ..study.stages import DEFAULT_MODEL, DEFAULT_RECALL, DEMO_SETTINGS as D

    p = sub.add_parser(
        "run",
        help=HELP,
        description=(
            "Run the study end to end and write netCDF results, figures and report.md to DIR: "
            "lag-CRPs of every human subject; lag profiles of every attention head of MODEL "
            "(BOS + two copies of a random word list); CMR fits of heads and subjects through the "
            "same call (objectives 'paper' and 'lsq') with a fairly fitted Gaussian baseline; an "
            "ablation test of the top 10% CMR-like heads against random head sets. "
            f"Defaults: model {DEFAULT_MODEL} (embedded, offline), recall data "
            f"{', '.join(DEFAULT_RECALL)}. Every stage writes its outputs atomically and is "
            "recorded in DIR/manifest.json with the SHA-256 of each output and the settings it read; with "
            "--resume, a finished stage is reused unless its outputs are damaged or missing, its own settings "
            "changed, or a stage it reads was redone (a restart with another --n-words keeps the human lag-CRPs, "
            "the grid and the human fits), and the run says which stages it reused and which it redid. A model "
            "that recalls nothing (e.g. an untrained one) skips the recall stage with a note; --recall-lists 0 "
            "leaves it out."
        ),
    )
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"language model (default {DEFAULT_MODEL})")
    p.add_argument(
        "--recall", nargs="+", default=list(DEFAULT_RECALL), metavar="SOURCE",
        help="recall data sets: bundled names (psifr:Morton2013, psifr:peers_notask, "
        "cymr:Morton2013_mixed) or psifr-format CSV files; the options below apply to every one",
    )
    add_recall_data_options(p)
    p.add_argument("--grid", metavar="GRID.nc", help="CMR grid to fit against (from `icl-cmr grid`); "
                   "default: simulate the study's Monte Carlo grid with --grid-trials trials")
    p.add_argument("--grid-trials", type=int, default=D["grid_trials"],
                   help=f"Monte Carlo trials per start position for the grid (default {D['grid_trials']}; the study used 500)")
    p.add_argument("--n-prompts", type=int, default=D["n_prompts"], help=f"prompts for the head scan (default {D['n_prompts']})")
    p.add_argument("--n-words", type=int, default=D["n_words"], help=f"words per prompt copy (default {D['n_words']})")
    p.add_argument("--ablation-passages", type=int, default=D["ablation_passages"],
                   help=f"text passages of 512 tokens for the ablation; 0 skips it (default {D['ablation_passages']}; "
                   "the full test is `icl-cmr ablate` with 300)")
    p.add_argument("--ablation-random", type=int, default=D["ablation_random"],
                   help=f"random head sets to compare with (default {D['ablation_random']})")
    p.add_argument("--recall-lists", type=int, default=D["recall_lists"],
                   help="word lists of 16 words the model recalls itself, intact and with head sets ablated; "
                        f"0 skips it (default {D['recall_lists']}; the full test is icl-cmr recall-lm)")
    p.add_argument("--ablation-matched", type=int, default=D["ablation_matched"],
                   help=f"layer-matched random head sets (default {D['ablation_matched']})")
    p.add_argument("--ablation-modes", nargs="+", choices=("zero", "mean"), default=D["ablation_modes"],
                   help="ablation modes (default: zero)")
    p.add_argument("--ablation-measures", default=",".join(D["ablation_measures"]), metavar="M[,M]",
                   help="measures beside the ICL score: wide_icl, bigram, repeated_tokens (default "
                        f"{','.join(D['ablation_measures'])}, the demo design of icl-cmr ablate)")
    p.add_argument("--seed", type=int, default=D["seed"], help="seed of prompts, grid, passages and random sets")
    add_device(p, D["device"], D["dtype"])
    p.add_argument("--resume", action="store_true",
                   help="reuse the stages an earlier run in DIR finished whose settings and inputs did not change "
                        "(outputs verified by checksum)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .options import recall_data_options
    from ..study.stages import run_study

    overrides = dict(
        grid_trials=args.grid_trials, n_prompts=args.n_prompts, n_words=args.n_words,
        ablation_passages=args.ablation_passages, ablation_random=args.ablation_random,
        ablation_matched=args.ablation_matched,
        ablation_measures=[m.strip() for m in args.ablation_measures.split(",") if m.strip()],
        ablation_modes=list(args.ablation_modes), recall_lists=args.recall_lists, seed=args.seed, device=args.device, dtype=args.dtype,
    )
    if args.grid:
        overrides["grid"] = args.grid
    run_study(args.out, recall=args.recall, model=args.model, resume=args.resume,
              recall_options=recall_data_options(args), **overrides)
    print(f"results in {args.out}/ (report: {args.out}/report.md)")
    return 0
