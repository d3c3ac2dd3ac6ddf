"""``icl-cmr recall-lm``: the language model as a free-recall subject."""
from __future__ import annotations

HELP = "give a language model word lists to recall and score its answers like human free recall"

DESCRIPTION = """\
The language model as a free-recall subject (after Mistry et al. 2025; Bajaj et al. 2025):
an instruction-tuned model is shown a list of words drawn from a human experiment's word
pool and asked to recall them in any order (--task free) or in the studied order (--task
serial, a control). Its answers are parsed into recalls: list numbers, bullets, quotes,
commas, sentences and prose ("Sure! Here are the words I remember", "The words were ...")
are handled; repeats stay in the sequence; words not on the list are intrusions; every
category is counted per list (docs/llm-recall.md gives the rules). Generation is batched
with a key-value cache; a row stops at the end of its turn, after --max-new-tokens, or in a
decoding loop (counted as n_loop): a block of 1 to 4 items repeated three times in a row,
or a second pass over the list (three recalls again in the same order).

Greedy decoding is deterministic; --decoding sample draws at --temperature once per seed of
--seeds. Each (model, decoding, seed) is one subject, so every recall analysis applies:
  icl-cmr lag-crp model_recall.csv -o model_crp.nc
--ablate zero-ablates heads (L18.H6,L17.H3) during generation; the ablated recall's subjects
are labelled by the set (model|greedy|0|ablate:L18.H6+L17.H3), never as the intact model.

Paired ablation during recall (--sets-from FITS.nc): the same lists are recalled intact, with
the target set ablated (the top heads of a fits file, chosen as icl-cmr ablate --heads-from
chooses them: --rank-by, --top-fraction or --n-heads) and with --n-random random sets of its
size, drawn uniformly among all heads (or, with --layer-matched, as many heads per layer as
the target). Greedy decoding. Effect = ablated - intact per list, on each recall measure
(correct recalls, lag-CRP +1 and -1, forward share, temporal factor, recall of the first and
last third). The test is by sets: the target's mean effect ranked among the random sets'
(p = (1 + #{random <= target}) / (1 + K), one-sided: the set lowers the measure more than random
sets; K = 19 gives the smallest p 0.05) and z against their mean and sd; a paired t over lists
is printed beside it as secondary. -o is then the llm_recall_ablation dataset (.nc);
--events-out keeps every set's recall, each subject labelled by its set
(model|greedy|0|ablate:top5, ...|ablate:random3).

The output's extension picks the format: .nc (the events dataset), .csv or .parquet (the
psifr long table: subject, list, trial_type, position, item, raw, category, the per-list
counts, prompt, answer and answer_segments). Both keep, per list, the exact prompt, the
answer that was parsed and every segment of it with its category (recall, repeat,
intrusion, filler, loop), and per recall its segment (raw) and category.

Examples:
  icl-cmr recall-lm --n-lists 20 -o smollm2_recall.csv
  icl-cmr recall-lm --task serial --n-lists 20 -o smollm2_serial.nc
  icl-cmr recall-lm --decoding sample --seeds 0,1,2 --ablate L18.H6,L17.H3 -o ablated.nc
  icl-cmr recall-lm --sets-from fits1.nc --n-heads 5 --n-random 19 --n-lists 12 -o recall_ablation.nc
"""


def register(sub):
    import argparse

    from .options import add_device, add_output

    p = sub.add_parser("recall-lm", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="smollm2-135m",
                   help="model name or local directory (default smollm2-135m, embedded)")
    p.add_argument("--pool", default="psifr:peers_notask",
                   help="word pool: a bundled recall data set whose studied items are drawn "
                        "(psifr:peers_notask, default; psifr:Morton2013) or a text file with one word a line")
    p.add_argument("--n-lists", type=int, default=20, help="study lists (default 20)")
    p.add_argument("--list-length", type=int, default=16, help="words per list (default 16, as PEERS)")
    p.add_argument("--task", choices=("free", "serial"), default="free", help="recall instruction (default free)")
    p.add_argument("--decoding", choices=("greedy", "sample"), default="greedy", help="decoding (default greedy)")
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default 0.7)")
    p.add_argument("--seeds", default="0", help="comma-separated seeds of sampled decoding (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the study lists (default 0)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--ablate", metavar="L18.H6,L17.H3", default=None, help="heads zero-ablated during generation")
    which.add_argument("--sets-from", metavar="FITS.nc", default=None,
                       help="profile_fit (or heads) file whose top heads are the target set of a paired ablation "
                            "against random sets (see above)")
    p.add_argument("--rank-by", default="study", metavar="{study,strict} or VARIABLE",
                   help="how --sets-from ranks heads, as icl-cmr ablate --rank-by (default study: smallest CMR distance)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--top-fraction", type=float, default=None, help="target set size as a share of all heads (default 0.1)")
    size.add_argument("--n-heads", type=int, default=None, help="target set size in heads (instead of --top-fraction)")
    p.add_argument("--n-random", type=int, default=19, help="random sets the target is ranked among (default 19)")
    p.add_argument("--layer-matched", action="store_true",
                   help="random sets with the target's count of heads in every layer (default: uniform among all heads)")
    p.add_argument("--events-out", metavar="EVENTS.csv", default=None,
                   help="with --sets-from: every set's recall (.nc events, .csv or .parquet table), subjects labelled by set")
    p.add_argument("--batch-size", type=int, default=16, help="lists generated together (default 16)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="token limit per answer (default 4 x list length + 16)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    add_device(p)
    add_output(p, "RECALL.csv")
    p.set_defaults(func=run, output_args=("output", "events_out"))  # every file it writes


def _pool(text: str):
    """A bundled data set name, or a text file of words."""
    from pathlib import Path

    from cmr.errors import DataSourceError
    from ...adapters.text_corpus import check_text, read_text_file

    if ":" in text and not Path(text).exists():
        return text
    path = Path(text)
    if not path.exists() or path.is_dir():  # a pipe or a device is named by read_text_file
        raise DataSourceError(f"word pool must be a bundled data set (psifr:peers_notask) or a text file; got {text!r}")
    content = check_text([read_text_file(path, what="word pool file")], text)[0]
    words = [line.strip() for line in content.splitlines() if line.strip()]
    if not words:
        raise DataSourceError(f"word pool file {text!r} has no words")
    return words


def run(args) -> int:
    import time

    from cmr.errors import ParameterError
    from cmr.io import result_format, save_dataset, write_table
    from ...adapters.lm.loading import load_model, set_threads
    from ..causal.ablation import check_heads, parse_heads
    from .options import check_counts
    from ..memory.llm_recall import model_recall

    if args.sets_from:
        return run_sets(args)
    for option in ("rank_by", "top_fraction", "n_heads", "layer_matched", "events_out"):
        if getattr(args, option) not in (None, False, "study"):
            raise ParameterError(f"--{option.replace('_', '-')} needs --sets-from FITS.nc")
    suffix = result_format(args.output)
    try:
        seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    except ValueError:
        raise ParameterError(f"--seeds must be comma-separated integers; got {args.seeds!r}") from None
    if not seeds or args.n_lists < 1 or args.list_length < 1:
        raise ParameterError(f"need --seeds, --n-lists >= 1 and --list-length >= 1; got {args.seeds!r}, "
                             f"{args.n_lists}, {args.list_length}")
    check_counts(args, batch_size=1, max_new_tokens=1, seed=0)
    heads = parse_heads(args.ablate) if args.ablate else ()
    pool = _pool(args.pool)
    set_threads(args.threads)
    started = time.perf_counter()
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    check_heads(heads, model.n_layers, model.n_heads)  # as ablate: a head the model lacks is refused before generating
    events, table = model_recall(model, pool=pool, n_lists=args.n_lists, list_length=args.list_length,
                                 task=args.task, decoding=args.decoding, seeds=seeds, temperature=args.temperature,
                                 rng=args.seed, batch_size=args.batch_size, heads=heads,
                                 max_new_tokens=args.max_new_tokens)
    path = save_dataset(events, args.output) if suffix == ".nc" else write_table(table, args.output)
    lists = table.drop_duplicates(["subject", "list"])
    per_list = lists[["n_correct", "n_repeats", "n_intrusions", "n_filler"]].mean()
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s: {events.sizes['trial']} lists of "
          f"{args.list_length} words, {args.task} recall, {args.decoding} decoding"
          + (f", heads {args.ablate} ablated" if heads else ""))
    print(f"per list: {per_list['n_correct']:.1f} correct, {per_list['n_repeats']:.1f} repeats, "
          f"{per_list['n_intrusions']:.1f} intrusions, {per_list['n_filler']:.1f} prose segments")
    return 0


def run_sets(args) -> int:
    """``--sets-from``: the target set ranked among random sets during recall."""
    import time

    import pandas as pd

    from cmr.errors import OutputError, ParameterError
    from cmr.events import from_table, to_table
    from cmr.io import check_output, load_dataset, result_format, save_dataset, write_table
    from ...adapters.head_ranking import ranked_head_set
    from ...adapters.lm.loading import load_model, set_threads
    from ..causal import recall
    from .options import check_counts, check_fraction

    if result_format(args.output) != ".nc":
        raise OutputError(f"with --sets-from, -o is the llm_recall_ablation dataset and must end in .nc; got "
                          f"{args.output!r} (--events-out keeps the recall of every set as a table)")
    if args.events_out:
        result_format(args.events_out)
        check_output(args.events_out)
    if args.decoding != "greedy":
        raise ParameterError("paired ablation during recall runs greedy decoding, so that the lists differ only by "
                             f"the ablation; got --decoding {args.decoding}")
    if args.n_lists < 2 or args.list_length < 1:
        raise ParameterError(f"paired ablation needs --n-lists >= 2 and --list-length >= 1; got {args.n_lists}, "
                             f"{args.list_length}")
    check_counts(args, batch_size=1, max_new_tokens=1, seed=0, n_random=1, n_heads=1)
    fraction = check_fraction(args.top_fraction, "--top-fraction") if args.top_fraction is not None else 0.1
    target, how, notes = ranked_head_set(load_dataset(args.sets_from), rank_by=args.rank_by, fraction=fraction,
                                         n_heads=args.n_heads)
    pool = _pool(args.pool)
    set_threads(args.threads)
    started = time.perf_counter()
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    sets = recall.rank_test_sets(target, model.n_layers, model.n_heads, n_random=args.n_random,
                                 layer_matched=args.layer_matched, rng=args.seed)
    name = next(iter(sets))
    for note in notes:
        print(f"note: {note}", flush=True)
    print(f"target set {name} ({args.sets_from}: {how}): {','.join(f'L{l}.H{h}' for l, h in target)}; "
          f"{args.n_random} {'layer-matched' if args.layer_matched else 'uniform'} random sets of {len(target)} heads "
          f"(seed {args.seed})", flush=True)
    source = dict(sets_from=str(args.sets_from), target_set=f"{name}: {how}", rank_by=str(args.rank_by),
                  random_sets="layer-matched" if args.layer_matched else "uniform among all heads",
                  n_random=int(args.n_random), sets_seed=int(args.seed))
    done = []

    def progress(set_name):
        done.append(set_name)
        print(f"recalled with {'no heads' if set_name == 'none' else set_name} ablated ({len(done)} of {len(sets) + 1}, "
              f"{time.perf_counter() - started:.0f} s)", flush=True)

    result, events = recall.recall_ablation(
        model, sets, pool=pool, n_lists=args.n_lists, list_length=args.list_length, task=args.task, rng=args.seed,
        batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, keep_events=True, info=source,
        progress=progress)
    path = save_dataset(result, args.output)
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s: {args.n_lists} lists of {args.list_length} words, "
          f"intact and with {len(sets)} head sets ablated")
    if args.events_out:
        table = pd.concat([to_table(e) for e in events], ignore_index=True)
        if result_format(args.events_out) == ".nc":
            out = save_dataset(from_table(table, source=f"{model.name} recall with head sets ablated",
                                          max_intrusion_share=1), args.events_out)
        else:
            out = write_table(table, args.events_out)
        print(f"wrote {out}: the recall of every set, subjects labelled by set")
    correct = result["set_effect"].sel(measure="n_correct")
    print(f"correct recalls per list, intact {float(result['measure_value'].sel(head_set='none', measure='n_correct').mean()):.2f}; "
          f"change with {name} {float(correct.sel(head_set=name)):+.2f}")
    for line in recall.rank_lines(result):
        print(line)
    return 0

