"""``icl-cmr recall-battery``: classic memory effects with a language model as the subject."""
from __future__ import annotations

HELP = "classic free-recall effects of a language model, each with its human reference, a statistic and a verdict"

DESCRIPTION = """\
A language model takes the lists of five classic free-recall experiments (the prompt of
recall-lm: free recall, greedy decoding) and each effect is scored with its human reference:

  serial position  primacy, recency and the first recall, against PEERS (psifr:peers_notask)
  list length      lists of 10 to 40 words: the number recalled rises, the probability falls (Murdock 1962)
  list strength    the same words once, half of them twice, all twice (Ratcliff, Clark & Shiffrin 1990)
  DRM              false recall of the critical lure (Roediger & McDermott 1995 lists)
  semantic         semantic rank of transitions (Morton2013 lists and word-vector similarities)
                   against a null that shuffles each list's recall order

Each statistic gets a 95% bootstrap interval over lists and a verdict: present, reversed,
absent (inside an equivalence band) or not detected (too few lists to tell). Human-likeness
per measure is 1 - W1 between the model's per-list scores and people's per-subject scores,
beside the same number for people's own single lists. CMR is fitted to the serial-position
lists with the human fitting code (cmr.fit_recall).

Generation takes seconds per list on a CPU and the defaults hold 124 lists (20 + 4x10 + 3x10
+ 8x3 + 10); progress is printed per condition. --from FILE scores a saved battery again (its
answers parsed again) without generating.

Examples:
  icl-cmr recall-battery smollm2-135m -o battery.nc
  icl-cmr recall-battery smollm2-135m --effects drm,semantic --drm-orders 2 -o drm.nc
  icl-cmr recall-battery --from battery.nc -o rescored.nc
"""


def register(sub):
    import argparse

    from .options import add_device, add_output

    p = sub.add_parser("recall-battery", help=HELP, description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="smollm2-135m",
                   help="model name or local directory (default smollm2-135m, embedded)")
    p.add_argument("--from", dest="source", nargs="+", metavar="BATTERY.nc", default=None,
                   help="score saved memory_battery file(s) instead of generating (several are combined)")
    p.add_argument("--effects", default="serial_position,list_length,list_strength,drm,semantic",
                   help="comma-separated effects (default all)")
    p.add_argument("--n-lists", type=int, default=20, help="serial-position lists of 16 PEERS words (default 20)")
    p.add_argument("--list-length", type=int, default=16, help="words per serial-position list (default 16)")
    p.add_argument("--lengths", default="10,20,30,40", 
                   help="list lengths of the list-length effect (default 10,20,30,40)")
    p.add_argument("--n-length-lists", type=int, default=10, help="lists per list length (default 10)")
    p.add_argument("--strength-length", type=int, default=12, help="words per list-strength list (default 12)")
    p.add_argument("--n-strength-lists", type=int, default=10, help="lists per strength condition (default 10)")
    p.add_argument("--drm-orders", type=int, default=3,
                   help="presentations of each of the 8 DRM lists: published order, then shuffled (default 3)")
    p.add_argument("--n-semantic-lists", type=int, default=10, 
                   help="Morton2013 lists for semantic clustering (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the lists, bootstrap and null (default 0)")
    p.add_argument("--n-perm", type=int, default=1000, help="shuffles of the semantic null (default 1000)")
    p.add_argument("--no-fit", action="store_true", help="skip the CMR fit of the serial-position lists")
    p.add_argument("--batch-size", type=int, default=16, help="lists generated together (default 16)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="token limit per answer (default 4 x presented words + 16)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    add_device(p)
    add_output(p, "BATTERY.nc")
    p.set_defaults(func=run)


def run(args) -> int:
    import sys
    import time

    from cmr.errors import ParameterError
    from cmr.io import load_dataset, save_dataset
    from ..memory import battery as memory_battery
    from ..memory import effects as memory_effects
    from .options import check_counts

    if not str(args.output).endswith(".nc"):
        raise ParameterError(f"-o must name a .nc file (a memory_battery dataset); got {args.output!r}")
    check_counts(args, n_lists=1, list_length=1, n_length_lists=1, strength_length=2, n_strength_lists=1,
                 drm_orders=1, n_semantic_lists=1, n_perm=1, batch_size=1, max_new_tokens=1, seed=0)
    effects = [e.strip() for e in str(args.effects).split(",") if e.strip()]
    try:
        lengths = [int(n) for n in str(args.lengths).split(",") if n.strip()]
    except ValueError:
        raise ParameterError(f"--lengths must be comma-separated integers; got {args.lengths!r}") from None
    started = time.perf_counter()
    if args.source:
        battery = memory_battery.combine([load_dataset(path, kind=memory_battery.KIND) for path in args.source])
    else:
        from ...adapters.lm.loading import load_model, set_threads

        sizes = dict(effects=effects, n_lists=args.n_lists, list_length=args.list_length, lengths=lengths,
                     n_length_lists=args.n_length_lists, strength_length=args.strength_length,
                     n_strength_lists=args.n_strength_lists, drm_orders=args.drm_orders,
                     n_semantic_lists=args.n_semantic_lists, rng=args.seed)
        memory_battery.check_design(**{k: v for k, v in sizes.items() if k != "rng"})
        set_threads(args.threads)
        model = load_model(args.model, device=args.device, dtype=args.dtype)

        def progress(condition, n, seconds):
            print(f"  {condition}: {n} lists in {seconds:.0f} s", file=sys.stderr, flush=True)

        print(f"recalling the battery's lists with {model.name} ...", file=sys.stderr, flush=True)
        battery = memory_battery.run_battery(model, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
                                             progress=progress, **sizes)
    print("scoring ...", file=sys.stderr, flush=True)
    result = memory_effects.battery_effects(battery, n_perm=args.n_perm, fit=not args.no_fit, rng=args.seed)
    path = save_dataset(result, args.output)
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s: {result.sizes['trial']} lists of "
          f"{result.attrs.get('model', 'the model')}")
    for line in memory_effects.verdict_lines(result):
        print(line)
    return 0
