"""``icl-cmr ablate``: the causal test of CMR-like heads on in-context learning."""
from __future__ import annotations

HELP = "ablate the most CMR-like heads vs. random head sets and measure the in-context learning score"

DESCRIPTION = """\
Causal test (Ji-An et al., NeurIPS 2024, after Olsson et al. 2022): are the heads whose
attention looks like human free recall (CMR-like heads) needed for in-context learning?

ICL score of a passage = loss at token 500 minus loss at token 50 (each averaged over +-5
tokens): negative when the model predicts better late in a passage. It is measured on natural
text passages (default: 300 passages of 512 tokens from the Wikipedia sample inside the gensim
wheel, offline), first unablated, then with each head set ablated. A head is ablated at its
output before the output projection: set to zero, or to its mean output over the same passages.
Per passage, effect = ablated - unablated score (> 0: ablation hurts ICL).

Head sets: the top set, fixed before any ablation (--heads-from FITS.nc: the --top-fraction of
heads with the smallest CMR distance, best from fits of head profiles measured on a held-out
prompt seed, e.g. icl-cmr heads --seed 1; --rank-by strict: the heads that pass the strict
definition of CMR-like, from icl-cmr null; or an explicit --heads L18.H6,L17.H3); --n-random
seeded random sets of the same size drawn uniformly among all heads; --n-matched layer-matched
random sets (as many heads per layer as the top set); and, with --control-from HEADS.nc, a
control set of the top induction heads of the same size. Passages are drawn in random order,
at most 4 windows per article; each passage's article is stored.

Statistics per mode: the primary test of a set against random sets is its place among them:
the rank of its mean effect, with the exact permutation p = (1 + #{random >= top}) /
(1 + n_random) (120 sets: smallest p 0.008), and z against the random sets' mean and sd. Beside
it: the contrast with the random sets' mean, with set and article as crossed random effects;
for fixed sets (a set against none, top against induction) paired tests over article means
(t-test, Wilcoxon, Cohen's d_z with a cluster-bootstrap interval, a t interval of the mean
difference); and Holm's correction across modes and comparisons (rank tests and contrasts as
two families; each printed test names its family). Holm multiplies the smallest rank p by
the number of rank tests m (up to 3 per mode), so a rank test can reach 0.05 only with at least
20 m sets: 60 for one mode, 120 for both (the default); the command says so when a design
cannot.

Cost: per passage one unablated pass (with mean ablation a partial second one), then every
(set x mode) condition resumes at the set's first ablated layer, batched --batch-size conditions per forward pass
(Llama, Mistral, Qwen2, Qwen3 and Gemma 3 families; other models run full passes through the bridge).
See docs/ablation.md for measured times. A demo:
  icl-cmr ablate --heads L18.H6,L17.H3,L17.H4 --n-passages 12 --n-random 50 --n-matched 0 --mode zero -o abl.nc
Full size, held-out top set and induction control:
  icl-cmr heads --seed 1 -o heads1.nc && icl-cmr fit heads1.nc --objective lsq -o fits1.nc
  icl-cmr ablate --heads-from fits1.nc --control-from heads1.nc --mode both -o ablation.nc
A 7-8B model on a 24 GB GPU (passages run in bfloat16, losses in float64 on the host):
  icl-cmr ablate ./Meta-Llama-3-8B --device cuda --dtype bfloat16 --heads-from fits.nc -o abl.nc
The peak memory (GPU, or the process on the CPU) is printed and stored in the file's attrs.

Measures with power (--measures, default all; icl, the study's score, always): wide_icl (mean
loss over tokens --wide-late 400:505 minus over --wide-early 20:100), bigram (on the same
passes: loss on tokens that complete a bigram seen earlier in the passage minus loss on the
other tokens 1..late+window) and repeated_tokens (loss over the second copy, tokens 101..199,
minus loss over the first copy, tokens 1..99, of --repeat-length 100 random token ids repeated
once, own passes). Each measure's effect is
ablated - intact, > 0: ablation hurts ICL; every measure gets the same rank test, paired tests
and d_z intervals, and Holm's correction runs over measures x modes x comparisons. Token
indices are 0-based text positions, BOS not counted. Modes: zero, mean, resample (each
ablated head's output, hook_z, from another passage at the same positions: passage p takes
the next passage of a random cyclic order seeded --seed + 3), both (zero + mean), all. The
default, all measures, leaves out with a note those that cannot fit (the wide windows in short
passages, repeated tokens beyond the model's context); named ones that cannot fit are an error.

Designs (--design; explicit options override a preset; without --design the defaults above,
analyses.causal.design.AblationDesign()):
  cpu    chosen from the power calculation (docs/ablation.md) for >= 80% power of the
         bigram and repeated_tokens measures within 2 hours on 2 CPU cores (SmolLM2-135M):
         {cpu}
  study  the study's size, 1,000 random and layer-matched sets, for --device cuda --dtype bfloat16:
         {study}
  demo   the ablation stage of icl-cmr run:
         {demo}
"""


def _description():
    from ..causal.design import PRESETS

    text = DESCRIPTION
    for name, preset in PRESETS.items():
        text = text.replace("{" + name + "}", preset.options())
    return text



def build_design(args):
    """The :class:`~icl_cmr.analyses.causal.design.AblationDesign` the options ask for: ``--design``
    (or the defaults), with every option given replacing its field."""
    from ..causal.design import MODE_NAMES, AblationDesign

    base = AblationDesign.preset(args.design) if args.design else AblationDesign()
    return base.replace(
        n_passages=args.n_passages, n_random=args.n_random, n_matched=args.n_matched,
        modes=MODE_NAMES[args.mode] if args.mode else None, measures=args.measures, dtype=args.dtype,
        top_fraction=args.top_fraction, n_tokens=args.n_tokens, early=args.early, late=args.late, window=args.window,
        wide_early=args.wide_early, wide_late=args.wide_late, repeat_length=args.repeat_length,
        batch_size=args.batch_size)


def _window(text):
    import argparse

    try:
        first, last = (int(v) for v in str(text).split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a window must be FIRST:LAST token positions, e.g. 20:100; got {text!r}") from None
    return first, last


def register(sub):
    import argparse

    from ..causal.design import MODE_NAMES, PRESETS, AblationDesign
    from .options import add_device, add_output

    D = AblationDesign()
    p = sub.add_parser("ablate", help=HELP, description=_description(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="smollm2-135m",
                   help="model name or local directory (default smollm2-135m, embedded)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--heads-from", metavar="FITS.nc", help="profile_fit (or heads lag_profile) file ranking the heads")
    which.add_argument("--heads", metavar="L18.H6,L17.H3", help="explicit top heads")
    p.add_argument("--rank-by", default="study", metavar="{study,strict} or VARIABLE",
                   help="definition of CMR-like that ranks --heads-from (docs/null-models.md): study (default: the "
                        "smallest CMR distance, the study's top set) or strict (heads that pass the strict definition, "
                        "smallest distance first; needs a profile_null file from icl-cmr null); or a variable of "
                        "--heads-from (distance: smallest first; induction_score and other *_score: largest first)")
    p.add_argument("--top-fraction", type=float, default=None,
                   help=f"share of all heads in the top set (default {D.top_fraction:g})")
    p.add_argument("--design", choices=tuple(PRESETS), default=None,
                   help="a preset of sizes, modes, measures and dtype (see above); explicit options override it")
    p.add_argument("--n-random", type=int, default=None,
                   help=f"random head sets (default {D.n_random}: enough for Holm's correction over both modes)")
    p.add_argument("--n-matched", type=int, default=None,
                   help=f"layer-matched random head sets (default {D.n_matched}; 0: none)")
    p.add_argument("--control-from", metavar="HEADS.nc",
                   help="heads file (icl-cmr heads) whose top induction_score heads form a control set")
    p.add_argument("--mode", choices=tuple(MODE_NAMES), default=None,
                   help="ablation: zero, mean, resample, both (zero + mean) or all (default both)")
    p.add_argument("--measures", default=None, metavar="M[,M]",
                   help="measures beside the study's icl score: wide_icl, bigram, repeated_tokens, or all (default all)")
    p.add_argument("--wide-early", type=_window, default=None, metavar="FIRST:LAST",
                   help="tokens of the wide_icl early window, inclusive (default {}:{})".format(*D.wide_early))
    p.add_argument("--wide-late", type=_window, default=None, metavar="FIRST:LAST",
                   help="tokens of the wide_icl late window, inclusive (default {}:{})".format(*D.wide_late))
    p.add_argument("--repeat-length", type=int, default=None,
                   help=f"random tokens repeated once in each repeated_tokens passage (default {D.repeat_length})")
    p.add_argument("--n-passages", type=int, default=None, help=f"text passages (default {D.n_passages})")
    p.add_argument("--n-tokens", type=int, default=None, help=f"tokens per passage (default {D.n_tokens})")
    p.add_argument("--text", default="wikipedia",
                   help="text source: wikipedia (default), kjv, a text file, a directory or a MediaWiki dump")
    p.add_argument("--max-per-article", type=int, default=4,
                   help="windows of one document (article) at most (default 4; 0: no cap, e.g. for one long text file)")
    p.add_argument("--early", type=int, default=None, help=f"early token (default {D.early})")
    p.add_argument("--late", type=int, default=None, help=f"late token (default {D.late})")
    p.add_argument("--window", type=int, default=None, help=f"half-window of tokens averaged (default {D.window})")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the passages, the random sets and the bootstrap (default 0)")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"ablated conditions per forward pass (default {D.batch_size})")
    p.add_argument("--time-budget", type=float, default=None, metavar="MINUTES",
                   help="start no passage's ablations after this many minutes; test the passages done")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    add_device(p)
    p.set_defaults(dtype=None)  # the design's (float32) unless given
    add_output(p, "ABLATION.nc")
    p.set_defaults(func=run)


def _prompt_seed(ds):
    """The prompt seed of the head profiles a dataset was measured or fitted on (None if not recorded)."""
    import json

    from cmr.checks import is_integer

    try:
        info = json.loads(ds.attrs.get("provenance", "{}"))
        while "prompt" not in info and "profiles_provenance" in info:  # a fit: the provenance of its profiles
            inner = info["profiles_provenance"]
            info = json.loads(inner) if isinstance(inner, str) else inner
        seed = info.get("prompt", {}).get("seed")
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None
    return int(seed) if is_integer(seed) else None


def _shared_prompt_seed(ranked, control):
    """The prompt seed of the ranked profiles when it is not held out: the seed of the control's
    profiles, or (without a control) 0, the seed of icl-cmr heads that the other analyses use."""
    seed = _prompt_seed(ranked)
    other = _prompt_seed(control) if control is not None else 0
    return seed if seed is not None and seed == other else None


def shared_with(args) -> str:
    return (f"the seed of --control-from {args.control_from}" if args.control_from
            else "the default of icl-cmr heads, whose profiles the other analyses describe")


def run(args) -> int:
    import time

    from ...adapters.head_ranking import ranked_head_set, top_heads
    from ...adapters.text_corpus import load_passages
    from ...adapters.lm.loading import describe_peak_memory, load_model, measure_peak_memory, with_run_record
    from ..causal import ablation
    from cmr.errors import ParameterError
    from cmr.io import load_dataset, result_format, write_result
    from .options import check_counts, check_fraction

    from ..causal.measures import check_window

    result_format(args.output)
    check_counts(args, n_random=1, n_matched=0, n_passages=2, n_tokens=2, early=0, late=1, window=0, batch_size=1,
                 seed=0, repeat_length=2, max_per_article=0)
    if args.top_fraction is not None:
        check_fraction(args.top_fraction, "--top-fraction")
    design = build_design(args)
    # windows given must fit; measures the user named (or a preset did) must fit; all leaves out those that cannot
    for name in ("wide_early", "wide_late"):
        if getattr(args, name) is not None and (not design.named_measures or "wide_icl" in design.measures):
            check_window(getattr(design, name), design.n_tokens, "--" + name.replace("_", "-"))
    measures, notes = design.fitted_measures()
    for note in notes:
        print(f"note: {note}", flush=True)
    ablation.scored_positions(design.early, design.late, design.window, design.n_tokens)  # before the model loads
    if args.time_budget is not None and not args.time_budget > 0:
        raise ParameterError(f"--time-budget must be a positive number of minutes; got {args.time_budget:g}")
    if args.threads:
        from ...adapters.lm.loading import set_threads

        set_threads(args.threads)
    started = time.perf_counter()
    if args.heads:
        top, source = ablation.parse_heads(args.heads), "explicit list"
    else:
        ranked = load_dataset(args.heads_from)
        top, how, notes = ranked_head_set(ranked, rank_by=args.rank_by, fraction=design.top_fraction)
        source = f"{args.heads_from}: {how}"
        for note in notes:
            print(f"note: {note}", flush=True)
    control = None
    if args.control_from:
        control = top_heads(load_dataset(args.control_from), variable="induction_score", n_heads=len(top), largest=True)
    listed = ",".join(f"L{l}.H{h}" for l, h in top)
    print(f"top set fixed before any ablation ({len(top)} heads, {source}): {listed}", flush=True)
    if not args.heads:
        shared = _shared_prompt_seed(ranked, load_dataset(args.control_from) if args.control_from else None)
        if shared is not None:
            print(f"note: the top set was ranked on head profiles of prompt seed {shared}, {shared_with(args)}; it is "
                  "not held out, so the test also measures how the set was chosen: rank on profiles of another seed "
                  "(icl-cmr heads --seed 1, then icl-cmr fit)", flush=True)
    modes = design.modes
    family = dict(n_matched=design.n_matched, n_modes=len(modes), control=control is not None, n_measures=len(measures))
    floor = ablation.holm_rank_floor(design.n_random, **family)
    if floor >= 0.05:
        print(f"note: with {design.n_random} random and {design.n_matched} layer-matched sets, no rank test can reach "
              f"p < 0.05 after Holm's correction over {len(measures)} measures x {len(modes)} modes "
              f"(smallest adjusted p {floor:.3f}); --n-random {20 * ablation.rank_family_size(**family)} or more lifts it",
              flush=True)
    model = load_model(args.model, device=args.device, dtype=design.dtype)
    measures, later = design.fitted_measures(n_ctx=getattr(model.bridge.cfg, "n_ctx", None))
    for note in later[len(notes):]:
        print(f"note: {note}", flush=True)
    passages, articles = load_passages(args.text, model.tokenizer, n_passages=design.n_passages, n_tokens=design.n_tokens, rng=args.seed,
                                       max_per_document=args.max_per_article or None, return_articles=True)
    info = model.provenance()
    info.update(text_source=str(args.text), top_heads_source=source, top_heads=listed,
                n_passages=int(design.n_passages), design=str(args.design or "none"))
    if control is not None:
        info.update(control_heads=",".join(f"L{l}.H{h}" for l, h in control),
                    control_heads_source=f"{args.control_from}: largest induction_score")
    with measure_peak_memory(model.device) as memory:
        result = ablation.run_ablation(
            model.bridge, passages, top, design=design.replace(measures=measures), control_heads=control, rng=args.seed,
            info=info, time_budget_s=None if args.time_budget is None else 60.0 * args.time_budget, articles=articles)
    result = with_run_record(result, **memory)
    path = write_result(result, args.output)
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s")
    print(f"{args.model} on {model.device} in {model.dtype}; {describe_peak_memory(result.attrs)}")
    print(f"unablated ICL score {float(result['baseline_icl_score'].mean()):+.3f} nats "
          f"({result.sizes['passage']} of {design.n_passages} passages, from {result.attrs['n_articles']} articles)")
    for line in ablation.summary_lines(result):
        print(line)
    from ..causal.measures import measure_summary_lines
    from ..causal.power import power_lines

    for line in [*measure_summary_lines(result), *power_lines(result)]:
        print(line)
    return 0
