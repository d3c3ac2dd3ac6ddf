"""``icl-cmr composition``: which composition a model's induction heads use (weights and causal test)."""
from __future__ import annotations

HELP = "composition scores of every head pair and the causal Q/K composition test of the top induction heads"

DESCRIPTION = """\
CMR, built as attention, is a Q-composition circuit: a duplicate-token head retrieves the
context of the cue's earlier copy into the query of an induction head (Ji-An et al. 2024;
docs/circuit.md). Textbook induction heads are K-composed: a previous-token head writes into
the key (Elhage et al. 2021). This command measures which one a model's heads use.

1. Composition scores (Elhage et al. 2021) of every (earlier head, later head) pair, Q, K and
   V, with layer norms folded and grouped-query attention resolved, against the random
   baseline (E[score^2] = 1/d_model); written to -o.
2. The causal test of the --top induction heads (or --heads): on repeated-list prompts, every
   earlier head's direct output is removed from only the query input or only the key input of
   the head; the drop of its induction score classifies it as K-composed, Q-composed, mixed or
   neither, and names the upstream heads whose removal alone matters; written to --causal.
   The class counts what earlier heads moved from other positions: the share of their output
   that comes from attending to the position itself moves nothing (a key that reads its own
   position through it is not composed); the table also shows the drops and the class of the
   whole output. drop(V): the same removal from the value input, measured on the head's
   output (the share of it lost along its own direction), not on where it attends.

3. With --cmr, CMR fitted to every head's lag profile on the same prompts; with --figure, each
   tested head's class against its CMR distance (is the Q-composed head more CMR-like?).

Examples (SmolLM2, about 20 s on 2 CPU cores; a toy checkpoint, seconds):
  icl-cmr composition -o composition.nc --causal causal.nc --top 4
  icl-cmr composition toy/checkpoints/step_003000 -o comp.nc --causal causal.nc --cmr fits.nc \\
      --figure class_vs_cmr.png --top 2 --n-words 20 --n-prompts 4
"""


def register(sub):
    import argparse

    from .options import add_device, add_output

    p = sub.add_parser("composition", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="smollm2-135m",
                   help="model name or local directory (default smollm2-135m, embedded)")
    p.add_argument("--causal", metavar="CAUSAL.nc", help="also run the causal test and write it here")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--top", type=int, default=4, help="test the N heads with the largest induction score (default 4)")
    which.add_argument("--heads", metavar="L18.H6,L17.H3", help="explicit heads to test")
    p.add_argument("--n-words", type=int, default=50, help="words per prompt list (default 50)")
    p.add_argument("--n-prompts", type=int, default=2, help="prompts (default 2)")
    p.add_argument("--n-baseline", type=int, default=200, help="random factor sets of the baseline (default 200)")
    p.add_argument("--cmr", metavar="FITS.nc",
                   help="also fit CMR to every head's lag profile on the same prompts (the study's grid), write the "
                        "fits here and print each tested head's CMR distance")
    p.add_argument("--objective", choices=("paper", "lsq"), default="lsq", help="CMR fit objective (default lsq)")
    p.add_argument("--figure", metavar="PNG", help="with --causal and --cmr: composition class against CMR distance")
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts and the baseline (default 0)")
    add_device(p)
    add_output(p, "COMPOSITION.nc")
    p.set_defaults(func=run, output_args=("output", "causal", "cmr", "figure"))  # every file it writes


def run(args) -> int:
    import sys

    import numpy as np

    from cmr.errors import ParameterError
    from cmr.io import result_format, write_result
    from ...adapters.lm import causal_composition, composition
    from ...adapters.head_ranking import composing_heads, rank_heads
    from ...adapters.lm.loading import load_model
    from ..causal.ablation import parse_heads
    from .options import check_counts

    result_format(args.output)
    for name in ("causal", "cmr"):
        if getattr(args, name):
            result_format(getattr(args, name))
    if args.figure and not (args.causal and args.cmr):
        raise ParameterError("--figure needs --causal and --cmr (the class and the CMR distance of each tested head)")
    check_counts(args, top=1, n_words=2, n_prompts=1, n_baseline=1, seed=0)
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    print(f"composition scores of every head pair from the weights ({args.n_baseline} random baseline draws) ...",
          file=sys.stderr, flush=True)
    scores = composition.composition_scores(model, n_baseline=args.n_baseline, rng=args.seed)
    print(f"composition scores of {model.n_layers * model.n_heads} heads -> {write_result(scores, args.output)}")
    print(composition_summary(scores))
    if not args.causal:
        return 0
    if args.heads:
        heads = parse_heads(args.heads)
    else:
        print(f"induction scores of every head ({args.n_prompts} prompts of {args.n_words} words) ...",
              file=sys.stderr, flush=True)
        induction = causal_composition.induction_scores(model, n_words=args.n_words, n_prompts=args.n_prompts,
                                                        rng=args.seed)
        induction = composing_heads(induction)  # never layer 0: no earlier head to compose with
        order = rank_heads(induction, n=args.top)
        heads = [tuple(int(i) for i in np.unravel_index(flat, induction.shape)) for flat in order]
    from tqdm.auto import tqdm

    with tqdm(total=len(heads), desc=f"causal composition test of {len(heads)} heads", unit="head",
              file=sys.stderr) as bar:
        causal = causal_composition.path_ablation(model, heads, n_words=args.n_words, n_prompts=args.n_prompts,
                                                  rng=args.seed, composition=scores, progress=bar.update)
    print(f"causal composition test -> {write_result(causal, args.causal)}")
    fits = cmr_fits(model, args) if args.cmr else None
    print(causal_table(causal, fits))
    if args.figure:
        from ..plots import composition_against_cmr, save_figure

        save_figure(composition_against_cmr(causal, fits), args.figure)
        print(f"figure -> {args.figure}")
    return 0


def cmr_fits(model, args):
    """CMR fits of every head's lag profile on the command's prompts, written to ``--cmr``."""
    from cmr.io import write_result
    from cmr.profile_fit import fit_profiles
    from ...adapters.lm.extraction import extract_heads
    from ...adapters.published_grid import load_grid

    import sys

    from tqdm.auto import tqdm

    with tqdm(total=args.n_prompts, desc="lag profiles of every head", unit="prompt", file=sys.stderr) as bar:
        heads = extract_heads(model, n_words=args.n_words, n_prompts=args.n_prompts, rng=args.seed,
                              progress=bar.update)
    grid, grid_name = load_grid(None)
    fits = fit_profiles(heads, grid, objective=args.objective, invalid="nan")
    print(f"CMR fits ({args.objective}, {grid_name}) of {model.n_layers * model.n_heads} heads -> "
          f"{write_result(fits, args.cmr)}")
    return fits


def composition_summary(scores) -> str:
    """Mean score per composition against the baseline, and the strongest pairs."""
    lines = []
    for kind in scores["composition"].values:
        s = scores["score"].sel(composition=kind)
        top = s.where(s == s.max()).stack(pair=s.dims).dropna("pair")
        pair = top["pair"].values[0]
        lines.append(f"  {kind}: mean {float(s.mean()):.3f} vs random {float(scores['baseline_mean'].sel(composition=kind)):.3f} "
                     f"(sd {float(scores['baseline_sd'].sel(composition=kind)):.4f}); largest {float(s.max()):.3f}, "
                     f"L{pair[2]}.H{pair[3]} -> L{pair[0]}.H{pair[1]}")
    return "\n".join(lines)


def causal_table(causal, fits=None) -> str:
    """One line per tested head: induction score, relative drops (what earlier heads moved from other
    positions; then their whole output), classes, upstream heads (and, with ``fits``, the head's CMR
    distance)."""
    distance = None
    if fits is not None:
        distance = fits["distance"].squeeze([d for d in ("model", "checkpoint") if d in fits["distance"].dims], drop=True)
    lines = ["  head      induction  drop(Q)  drop(K)  drop(V)  class    whole: drop(Q)  drop(K)  class    "
             + ("CMR distance  " if fits is not None else "") + "upstream (layer.head/path)"]
    for t in causal["target"].values:
        row = causal.sel(target=t)
        layer, head = int(row["layer"]), int(row["head"])
        extra = "" if distance is None else f"{float(distance.sel(layer=layer, head=head)):12.4f}  "
        lines.append(f"  L{layer}.H{head:<5} {float(row['base_induction']):9.3f}  "
                     f"{float(row['drop_moved'].sel(path='Q')):7.3f}  {float(row['drop_moved'].sel(path='K')):7.3f}  "
                     f"{float(row['value_drop_moved']):7.3f}  {str(row['composition_class'].values):7}  "
                     f"{float(row['drop_all'].sel(path='Q')):14.3f}  {float(row['drop_all'].sel(path='K')):7.3f}  "
                     f"{str(row['whole_output_class'].values):7}  {extra}{row['upstream'].values}")
    return "\n".join(lines)
