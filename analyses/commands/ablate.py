"""``icl-cmr ablate``: the causal test of CMR-like heads on in-context learning."""
from __future__ import annotations

HELP = "ablate the most CMR-like heads vs. random head sets and measure the in-context learning score"

DESCRIPTION = """\
Causal test (Ji-An et al., NeurIPS 2024, after Olsson et al. 2022): are the heads whose
attention looks like human free recall (CMR-like heads) needed for in-context learning?

ICL score of a passage = loss at token 500 minus loss at token 50 (each averaged over +-5
tokens): negative when the model predicts better late in a passage. It is measured on natural
text passages (default: 300 passages of 512 tokens from the Wikipedia sample inside the gensim
wheel, offline), first unablated, then with the top heads ablated and with --n-random random
head sets of the same size (seeded; --layer-matched draws them from the same layers). A head
is ablated at its output before the output projection: set to zero, or to its mean output over
the same passages. Per passage, effect = ablated - unablated score (> 0: ablation hurts ICL).

Statistics per mode: top set vs. no ablation and vs. the mean of the random sets (paired
t-test, Wilcoxon signed-rank, Cohen's d_z), and the empirical p-value of the top set's mean
effect among the random sets' mean effects.

The top heads: --heads-from FITS.nc (from icl-cmr fit: the --top-fraction of heads with the
smallest CMR distance; or a heads file from icl-cmr heads ranked by --rank-by induction_score),
or an explicit --heads L18.H6,L17.H3.

Cost: one forward pass per passage per condition (1 + modes x (1 + n_random)); on 2 CPU cores
SmolLM2-135M needs about 1-2 s per passage, so the full size takes hours. A demo:
  icl-cmr ablate --heads L18.H6,L17.H3,L17.H4 --n-passages 12 --n-random 5 --mode zero -o abl.nc
Full size:
  icl-cmr ablate --heads-from fits.nc --n-random 20 --mode both -o ablation.nc
A 7-8B model on a 24 GB GPU (passages run in bfloat16, losses in float64 on the host):
  icl-cmr ablate ./Meta-Llama-3-8B --device cuda --dtype bfloat16 --heads-from fits.nc -o abl.nc
The peak memory (GPU, or the process on the CPU) is printed and stored in the file's attrs.
"""


def register(sub):
    import argparse

    from icl_cmr.analyses.commands.options import add_device, add_output

    p = sub.add_parser("ablate", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="smollm2-135m",
                   help="model name or local directory (default smollm2-135m, embedded)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--heads-from", metavar="FITS.nc", help="profile_fit (or heads lag_profile) file ranking the heads")
    which.add_argument("--heads", metavar="L18.H6,L17.H3", help="explicit top heads")
    p.add_argument("--rank-by", default="distance",
                   help="variable of --heads-from to rank by (default distance, smallest first; "
                        "induction_score and other *_score variables: largest first)")
    p.add_argument("--top-fraction", type=float, default=0.1, help="share of all heads in the top set (default 0.1)")
    p.add_argument("--n-random", type=int, default=20, help="random head sets (default 20)")
    p.add_argument("--layer-matched", action="store_true", help="random sets with the top set's heads per layer")
    p.add_argument("--mode", choices=("zero", "mean", "both"), default="both", help="ablation (default both)")
    p.add_argument("--n-passages", type=int, default=300, help="text passages (default 300)")
    p.add_argument("--n-tokens", type=int, default=512, help="tokens per passage (default 512)")
    p.add_argument("--text", default="wikipedia",
                   help="text source: wikipedia (default), kjv, a text file, a directory or a MediaWiki dump")
    p.add_argument("--early", type=int, default=50, help="early token (default 50)")
    p.add_argument("--late", type=int, default=500, help="late token (default 500)")
    p.add_argument("--window", type=int, default=5, help="half-window of tokens averaged (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the passages and the random sets (default 0)")
    p.add_argument("--batch-size", type=int, default=4, help="passages per forward pass (default 4)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    add_device(p)
    add_output(p, "ABLATION.nc")
    p.set_defaults(func=run)


def run(args) -> int:
    import time

    from icl_cmr.adapters.text_corpus import load_passages
    from icl_cmr.adapters.transformer_lens import (
        describe_peak_memory,
        load_model,
        measure_peak_memory,
        with_run_record,
    )
    from icl_cmr.analyses import ablation
    from cmr.errors import ParameterError
    from cmr.io import load_dataset, result_format, write_result

    result_format(args.output)
    if args.n_random < 1 or args.n_passages < 2:
        raise ParameterError(f"--n-random must be >= 1 and --n-passages >= 2; got {args.n_random}, {args.n_passages}")
    if args.threads:
        from icl_cmr.adapters.transformer_lens import set_threads

        set_threads(args.threads)
    started = time.perf_counter()
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    if args.heads:
        top, source = ablation.parse_heads(args.heads), "explicit list"
    else:
        ranked = load_dataset(args.heads_from)
        largest = args.rank_by.endswith("_score")
        top = ablation.top_heads_from_fits(ranked, args.top_fraction, args.rank_by, largest=largest)
        source = f"{args.heads_from}: {'largest' if largest else 'smallest'} {args.rank_by}, top {args.top_fraction:g}"
    passages = load_passages(args.text, model.tokenizer, args.n_passages, args.n_tokens, seed=args.seed)
    modes = ("zero", "mean") if args.mode == "both" else (args.mode,)
    info = model.provenance()
    info.update(text_source=str(args.text), top_heads_source=source,
                top_heads=",".join(f"L{l}.H{h}" for l, h in top), n_passages=int(args.n_passages))
    with measure_peak_memory(model.device) as memory:
        result = ablation.run_ablation(
            model.bridge, passages, top, n_random=args.n_random, seed=args.seed, layer_matched=args.layer_matched,
            modes=modes, early=args.early, late=args.late, window=args.window, batch_size=args.batch_size, info=info)
    result = with_run_record(result, **memory)
    path = write_result(result, args.output)
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s; top set {info['top_heads']}")
    print(f"{args.model} on {model.device} in {model.dtype}; {describe_peak_memory(result.attrs)}")
    print(f"unablated ICL score {float(result['baseline_icl_score'].mean()):+.3f} nats "
          f"({result.sizes['passage']} passages)")
    for mode in modes:
        row = result.sel(mode=mode)
        vs_none = row.sel(comparison="top_vs_none")
        vs_random = row.sel(comparison="top_vs_random")
        print(f"{mode} ablation: top effect {float(vs_none['mean_difference']):+.3f} "
              f"(d_z {float(vs_none['cohens_dz']):+.2f}, t-test p {float(vs_none['t_pvalue']):.2g}); "
              f"top - random {float(vs_random['mean_difference']):+.3f} "
              f"(d_z {float(vs_random['cohens_dz']):+.2f}, t-test p {float(vs_random['t_pvalue']):.2g}, "
              f"Wilcoxon p {float(vs_random['wilcoxon_pvalue']):.2g}); "
              f"empirical p {float(row['empirical_pvalue']):.3f} among {result.sizes['head_set'] - 1} random sets")
    return 0
