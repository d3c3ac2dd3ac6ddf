"""``icl-cmr train-toy``: train a small transformer offline and scan its checkpoints."""
from __future__ import annotations

HELP = "train a small transformer on offline Wikipedia text and watch CMR-like heads emerge"

DESCRIPTION = """\
Train a small Llama-style transformer (default: 2 layers x 2 heads, d_model 64, a 1024-token
byte-level BPE vocabulary trained on the same text) on the Wikipedia sample inside the gensim
wheel, offline and seeded, on CPU in minutes. In every training row short phrases (2-8 tokens)
are copied from earlier in the same row, at every distance, so some tokens can be predicted only
by an induction circuit; the rest of the row is natural text. Around step 1000 the model forms a
previous-token head in layer 0 and induction heads in layer 1 (the loss on copied tokens drops
abruptly). Checkpoints (Hugging Face directories, written atomically) are saved at log-spaced,
then evenly spaced steps in DIR/checkpoints/.

Then the same pipeline as for a released model runs on every checkpoint (unless --no-scan):
head lag profiles on repeated word lists (the same words at every step) -> DIR/profiles.nc,
CMR fits (the study's grid and objective, when a grid is available) -> DIR/fits.nc, and a table
of per-layer curves against training step (best induction score, best CMR distance, share of
CMR-like heads, fitted beta_enc / beta_rec / gamma and inverse temperature of the layer's most
CMR-like head) -> DIR/dynamics.csv. --resume keeps finished checkpoints.

--recipe position-blind trains on the same data a GPT-2-style model (fixed absolute positions)
whose layer-0 attention compares tokens by similarity and cannot see where they are: it starts
with duplicate-token heads and can never form a previous-token head, which leaves the way CMR
builds induction (Q-composition: the earlier copy's position enters the layer-1 query) open
and the textbook previous-token path closed. Trained (seeds 0-3), its layer-1 induction heads
are Q-composed: the causal test finds the earlier copy's position, moved by the duplicate-token
heads, in their queries, and nothing moved in their keys. Compare the two with icl-cmr
composition on a checkpoint (docs/circuit.md).

Examples:
  icl-cmr train-toy -o toy --threads 1      # 3000 steps, about 7 minutes on one core
  icl-cmr train-toy -o toy --quick          # the first 1500 steps of the same run
  icl-cmr train-toy -o toy --steps 6000 --seed 1
  icl-cmr train-toy -o toyq --recipe position-blind --no-scan
"""


def register(sub):
    import argparse

    p = sub.add_parser("train-toy", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory")
    p.add_argument("--quick", action="store_true", help="small and short (tests, demos)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default 3000; quick 1500)")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation and data order (default 0)")
    p.add_argument("--checkpoints", type=int, default=None, help="number of checkpoints incl. step 0 (default 24; quick 16)")
    p.add_argument("--recipe", choices=("copies", "position-blind"), default="copies",
                   help="copies (default): a Llama-style model with rotary positions, which forms a layer-0 "
                        "previous-token head feeding the keys of layer-1 induction heads (K-composition); "
                        "position-blind: the same data, a GPT-2-style model with fixed absolute positions whose "
                        "layer-0 queries and keys cannot read position, so no previous-token head can form and "
                        "induction must go through layer-0 duplicate-token heads (they feed the queries of "
                        "layer 1: Q-composition, docs/circuit.md)")
    p.add_argument("--repeat-fraction", type=float, default=None, metavar="F",
                   help="share of rows with repeated phrases (default 1.0)")
    p.add_argument("--text", default="wikipedia", help="training text: wikipedia (default), a file or a directory")
    p.add_argument("--n-words", type=int, default=20, help="words per prompt list in the scan (default 20)")
    p.add_argument("--n-prompts", type=int, default=4, help="prompts per checkpoint in the scan (default 4)")
    p.add_argument("--grid", default=None, metavar="GRID", help="CMR grid for the fits (default: as icl-cmr fit)")
    p.add_argument("--objective", choices=("paper", "lsq"), default="paper", help="fit objective (default paper)")
    p.add_argument("--no-scan", action="store_true", help="only train")
    p.add_argument("--resume", action="store_true", help="keep a finished training run in DIR and only scan")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.set_defaults(func=run)


def run(args) -> int:
    import dataclasses
    import json
    from pathlib import Path

    from ...adapters.lm import toy_model
    from ..heads import dynamics
    from ...adapters.published_grid import load_grid
    from cmr.errors import DataSourceError
    from cmr.io import save_dataset, write_table

    if args.threads:
        from ...adapters.lm.loading import set_threads

        set_threads(args.threads)
    out = Path(args.output)
    if not args.no_scan:  # the scan's settings fail before minutes of training, not after
        from ...adapters.errors import PromptError
        from .options import check_counts

        check_counts(args, PromptError, n_words=2, n_prompts=1)
    settings = toy_model.recipe_settings(args.recipe, quick=args.quick)
    changes = {"seed": args.seed, "text": str(args.text)}
    if args.steps is not None:
        changes["steps"] = args.steps
    if args.checkpoints is not None:
        changes["n_checkpoints"] = args.checkpoints
    if args.repeat_fraction is not None:
        changes["repeat_fraction"] = args.repeat_fraction
    settings = dataclasses.replace(settings, **changes).validate()
    if settings.text not in ("wikipedia", "kjv") and not args.resume:  # a file that is not text fails before DIR is made
        from ...adapters.text_corpus import read_documents

        read_documents(settings.text)
    log_path = out / toy_model.LOG_FILE
    finished = False
    if args.resume and log_path.is_file():
        try:
            record = json.loads(log_path.read_text(encoding="utf-8"))
            finished = record["settings"] == dataclasses.asdict(settings) and \
                [c["step"] for c in record["checkpoints"]] == record["checkpoint_steps"]
        except (ValueError, KeyError, TypeError) as exc:  # cut short, edited, not JSON: the run cannot be trusted
            print(f"training log {str(log_path)!r} is damaged ({type(exc).__name__}: {exc}); training again")
    if finished:
        print(f"training in {out} is complete; skipped")
    else:
        record = toy_model.train_toy(out, settings=settings)
        print(f"trained {record['n_parameters']} parameters for {settings.steps} steps in {record['seconds']:.0f} s")
    if args.no_scan:
        return 0
    words = toy_model.prompt_words(out, args.n_words)
    profiles = dynamics.scan_checkpoints(toy_model.list_checkpoints(out), words=words, n_prompts=args.n_prompts,
                                         rng=args.seed, model_name="toy")
    save_dataset(profiles, out / "profiles.nc")
    try:
        grid, grid_name = load_grid(args.grid)
    except DataSourceError as exc:
        print(f"no CMR fits ({exc}); profiles are in {out / 'profiles.nc'}")
        fits = None
    else:
        fits = dynamics.fit_series(profiles, grid, objective=args.objective)
        save_dataset(fits, out / "fits.nc")
    if fits is not None:
        table = dynamics.layer_summary(fits, profiles=profiles)
        write_table(table, out / "dynamics.csv")
        from ..plots import save_figure, training_dynamics

        save_figure(training_dynamics(table, training_log=json.loads((out / toy_model.LOG_FILE).read_text())),
                    out / "dynamics.png")
        shown = [c for c in ("checkpoint", "layer", "max_induction_score", "best_distance", "share_cmr_like",
                             "beta_enc", "beta_rec", "gamma", "inverse_temperature") if c in table]
        print(f"CMR fits against {grid_name}:")
        print(table[shown].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {out}")
    return 0
