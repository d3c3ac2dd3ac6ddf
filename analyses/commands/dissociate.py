"""``icl-cmr dissociate``: does CMR-likeness explain causal importance beyond induction?"""
from __future__ import annotations

HELP = "test whether CMR-like heads matter causally beyond induction (stratified sets, single heads, random sets)"

DESCRIPTION = """\
Three experiments on the measures with power (bigram: loss on tokens that complete an earlier
bigram minus loss on the others; repeated_tokens: second-copy minus first-copy loss on random
tokens repeated once; docs/ablation.md). Effect = ablated - intact (> 0: ablation hurts).

  sets         The CMR-like heads that are not induction heads (--induction-threshold), as a set
               and as the subgroups whose lag profile peaks at lag 0 and at lag +1, each ranked
               among --n-sets random sets stratified on layer and induction score (every random
               set has the target's count in every (layer, induction-score bin) cell). Positive
               control: the induction-only heads (induction heads that are not CMR-like), ranked
               among layer-matched sets. Primary statistic: the rank p and z of the set.
  heads        Every head (of --layers) ablated alone (--head-modes, default zero and resample);
               per-head effects regressed on induction, previous-token and duplicate-token scores
               and layer, then with the CMR features (CMR distance, forward asymmetry, fitted
               beta_enc) added: the share of variance they explain beyond the baseline (partial
               R2, adjusted, with a bootstrap interval over heads) and a permutation p (CMR
               features permuted across heads).
  random_sets  With --ablation-from ABLATION.nc (icl-cmr ablate, many random sets): the random
               sets' mean effects regressed on their members' mean induction score, on whether
               --named-head (default L16.H0) is a member and on their count of CMR-like heads.

Each printed test names its Holm family within its experiment: primary (the CMR tests on
--primary-measure, every mode) or all measures. --effects-from reuses the single-head effects
of an earlier dissociation file (no ablation). --time-budget is wall time in seconds for the
whole command: the heads experiment gets half of what is left after loading (all of it when it
runs alone), the sets experiment the rest; within each, no natural-text passage starts after
half of its time, then repeated-token passages run, at most as many as natural-text ones were
done, until the end of its time; a run passes its budget by at most the passage under way. A budget
that the heads experiment spends skips the sets experiment with a note and writes the heads.

Designs (--design; explicit options override a preset):
  cpu    {cpu}
  study  {study}
Examples:
  icl-cmr heads --seed 1 -o heads1.nc && icl-cmr fit heads1.nc --objective lsq -o fits1.nc
  icl-cmr dissociate --heads-from heads1.nc --fits-from fits1.nc --design cpu -o dissociation.nc
  icl-cmr dissociate --heads-from heads1.nc --fits-from fits1.nc --design study --device cuda -o dissociation.nc
"""


def _description():
    from ..causal.dissociation_io import DESIGNS

    text = DESCRIPTION
    for name, preset in DESIGNS.items():
        text = text.replace("{" + name + "}", " ".join(f"--{k.replace('_', '-')} {v}" for k, v in preset.items()))
    return text


def register(sub):
    import argparse

    from .options import add_device, add_output

    p = sub.add_parser("dissociate", help=HELP, description=_description(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", default="smollm2-135m",
                   help="model name or local directory (default smollm2-135m, embedded)")
    p.add_argument("--heads-from", metavar="HEADS.nc", required=True,
                   help="head lag profiles (icl-cmr heads): induction, previous-token and duplicate-token scores")
    p.add_argument("--fits-from", metavar="FITS.nc", required=True,
                   help="CMR fits of those profiles (icl-cmr fit): distance, profile, beta_enc")
    p.add_argument("--null-from", metavar="NULL.nc",
                   help="profile_null (icl-cmr null): CMR-like by its cmr_like_study or cmr_like_strict flag")
    p.add_argument("--definition", choices=("study", "strict"), default="study",
                   help="definition of CMR-like (default study: distance < 0.5, or the null's cmr_like_study)")
    p.add_argument("--experiments", default=None, metavar="E[,E]",
                   help="sets, heads, random_sets (default sets,heads, and random_sets with --ablation-from)")
    p.add_argument("--ablation-from", metavar="ABLATION.nc", help="an icl-cmr ablate result with many random sets")
    p.add_argument("--effects-from", metavar="DISSOCIATION.nc",
                   help="reuse the single-head effects of an earlier icl-cmr dissociate file")
    p.add_argument("--named-head", default="L16.H0", help="head whose membership the random_sets regression tests")
    p.add_argument("--induction-threshold", type=float, default=None,
                   help="induction heads: induction score at or above this (default 0.1)")
    p.add_argument("--n-bins", type=int, default=3, help="induction-score bins of the stratification (default 3)")
    p.add_argument("--layer-terms", choices=("factor", "linear"), default="factor",
                   help="layer in the single-head baseline: a factor (default) or one linear term")
    p.add_argument("--design", choices=("cpu", "study"), default=None, help="a preset of sizes (see above)")
    p.add_argument("--n-passages", type=int, default=None, help="natural-text passages (cpu design 6)")
    p.add_argument("--n-tokens", type=int, default=512, help="tokens per passage (default 512)")
    p.add_argument("--n-sets", type=int, default=None, help="random sets per target set (default 60)")
    p.add_argument("--set-modes", default=None, help="ablation modes of the sets experiment (default zero)")
    p.add_argument("--head-modes", default=None, help="ablation modes of the heads experiment (default zero,resample)")
    p.add_argument("--layers", default=None, metavar="LO:HI",
                   help="layers whose heads the heads experiment ablates, inclusive (default all)")
    p.add_argument("--measures", default="bigram,repeated_tokens", help="bigram, repeated_tokens (default both)")
    p.add_argument("--primary-measure", default="bigram", help="measure of the primary Holm family (default bigram)")
    p.add_argument("--repeat-length", type=int, default=100, help="random tokens repeated once (default 100)")
    p.add_argument("--text", default="wikipedia", help="text source (as icl-cmr ablate; default wikipedia)")
    p.add_argument("--max-per-article", type=int, default=4, help="windows of one article at most (default 4)")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples of the heads (default 2000)")
    p.add_argument("--n-perm", type=int, default=2000, help="permutations of the CMR features (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of passages, random sets and resamples (default 0)")
    p.add_argument("--batch-size", type=int, default=None, help="ablated conditions per forward pass (default 8)")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="wall time of the whole command: no natural-text passage starts after it (see above)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    add_device(p)
    p.set_defaults(dtype=None)
    add_output(p, "DISSOCIATION.nc")
    p.set_defaults(func=run)


def _names(text, allowed, option):
    from cmr.errors import ParameterError

    names = tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise ParameterError(f"{option} must be a comma list of {', '.join(allowed)}; got {text!r}")
    return names


def _layers(text):
    from cmr.errors import ParameterError

    if text is None:
        return None
    try:
        low, _, high = str(text).partition(":")
        low, high = int(low), int(high or low)
    except ValueError:
        raise ParameterError(f"--layers must be LO:HI (inclusive) or one layer; got {text!r}") from None
    if high < low:
        raise ParameterError(f"--layers must be LO:HI with LO <= HI; got {text!r}")
    return list(range(low, high + 1))


def run(args) -> int:
    import time

    from cmr.errors import ParameterError
    from cmr.io import load_dataset, result_format, write_result
    from ..causal import dissociation as dis
    from ..causal.ablation import parse_heads
    from ...adapters.lm.interventions import SET_MODES
    from ..causal.dissociation_io import DEFAULTS, DESIGNS, EXPERIMENTS, combine, experiment_view, summary_lines
    from ..causal.regression import head_regression
    from .options import check_counts

    started = time.monotonic()
    preset = DESIGNS.get(args.design, {})
    for key, default in DEFAULTS.items():
        if getattr(args, key, None) is None:
            setattr(args, key, preset.get(key, default))
    result_format(args.output)
    check_counts(args, n_passages=2, n_tokens=3, n_sets=1, n_bins=2, repeat_length=2, n_boot=0, n_perm=0, seed=0,
                 batch_size=1, max_per_article=0)
    if args.time_budget is not None and not args.time_budget > 0:
        raise ParameterError(f"--time-budget must be a positive number of seconds; got {args.time_budget:g}")
    measures = _names(args.measures, dis.DIS_MEASURES, "--measures")
    if args.primary_measure not in measures:
        raise ParameterError(f"--primary-measure must be one of the measures ({', '.join(measures)}); "
                             f"got {args.primary_measure!r}")
    set_modes, head_modes = _names(args.set_modes, SET_MODES, "--set-modes"), _names(args.head_modes, SET_MODES,
                                                                                       "--head-modes")
    default = ("sets", "heads", "random_sets") if args.ablation_from else ("sets", "heads")
    experiments = _names(args.experiments, EXPERIMENTS, "--experiments") if args.experiments else default
    if "random_sets" in experiments and not args.ablation_from:
        raise ParameterError("the random_sets experiment needs --ablation-from ABLATION.nc (icl-cmr ablate)")
    named = parse_heads(args.named_head)
    if len(named) != 1:
        raise ParameterError(f"--named-head must name one head like L16.H0; got {args.named_head!r}")
    layers = _layers(args.layers)
    threshold = dis.INDUCTION_THRESHOLD if args.induction_threshold is None else args.induction_threshold
    null = load_dataset(args.null_from, "profile_null") if args.null_from else None
    table = dis.head_table(load_dataset(args.heads_from, "lag_profile"), load_dataset(args.fits_from, "profile_fit"),
                           null=null, definition=args.definition, induction_threshold=threshold)
    targets = dis.target_sets(table)
    print(f"CMR-like: {table.attrs['cmr_like_rule']}; induction heads: induction score >= {threshold:g}", flush=True)
    for name, members in targets.items():
        print(f"target {name} ({len(members)} heads): " + (",".join(f"L{l}.H{h}" for l, h in members) or "none"),
              flush=True)
    parts = []
    needs_model = "sets" in experiments or ("heads" in experiments and not args.effects_from)
    deadline = None if args.time_budget is None else started + float(args.time_budget)
    if needs_model:
        from ...adapters.lm.loading import (describe_peak_memory, load_model, measure_peak_memory,
                                                 with_run_record)
        from ...adapters.text_corpus import load_passages

        if args.threads:
            from ...adapters.lm.loading import set_threads

            set_threads(args.threads)
        model = load_model(args.model, device=args.device, dtype=args.dtype)
        passages, articles = load_passages(args.text, model.tokenizer, n_passages=args.n_passages, n_tokens=args.n_tokens, rng=args.seed,
                                           max_per_document=args.max_per_article or None, return_articles=True)
        info = model.provenance()
        info.update(text_source=str(args.text), design=str(args.design or "none"), n_tokens=int(args.n_tokens))
        common = dict(measures=measures, rng=args.seed, batch_size=args.batch_size, repeat_length=args.repeat_length)
        with measure_peak_memory(model.device) as memory:
            if "heads" in experiments and not args.effects_from:
                share = None
                if deadline is not None:
                    share = time.monotonic() + (deadline - time.monotonic()) / (2 if "sets" in experiments else 1)
                effects = dis_effects(model, passages, layers, head_modes, share, info, articles, common)
                parts.append(head_regression(effects, table, layer_terms=args.layer_terms, n_boot=args.n_boot,
                                             n_perm=args.n_perm, rng=args.seed, primary_measure=args.primary_measure))
            if "sets" in experiments:
                from ..causal.head_effects import BudgetSpent

                try:
                    parts.append(dis.set_experiment(model.bridge, passages, table, n_sets=args.n_sets,
                                                    n_bins=args.n_bins, modes=set_modes,
                                                    primary_measure=args.primary_measure, deadline=deadline,
                                                    info=info, **common))
                except BudgetSpent:
                    if not parts:
                        raise
                    print("sets: not run: the time budget ran out after the heads experiment, which is written; "
                          "run --experiments sets with a --time-budget of its own", flush=True)
        parts = [with_run_record(p, **memory) for p in parts]
        print(f"{args.model} on {model.device} in {model.dtype}; {describe_peak_memory(parts[-1].attrs)}", flush=True)
    if "heads" in experiments and args.effects_from:
        earlier = experiment_view(load_dataset(args.effects_from, dis.KIND), "heads")
        parts.append(head_regression(earlier, table, layer_terms=args.layer_terms, n_boot=args.n_boot,
                                     n_perm=args.n_perm, rng=args.seed, primary_measure=args.primary_measure))
    if "random_sets" in experiments:
        parts.append(dis.random_set_regression(load_dataset(args.ablation_from, "ablation"), table, named_head=named[0],
                                               primary_measure=args.primary_measure))
    order = {name: k for k, name in enumerate(EXPERIMENTS)}
    result = combine(sorted(parts, key=lambda p: order[p.attrs["experiments"]]))
    result.attrs["seconds"] = round(time.monotonic() - started, 1)
    path = write_result(result, args.output)
    print(f"wrote {path} in {result.attrs['seconds']:.0f} s")
    for line in summary_lines(result):
        print(line)
    return 0


def dis_effects(model, passages, layers, modes, deadline, info, articles, common):
    """The heads experiment's effects (:func:`~icl_cmr.analyses.causal.head_effects.single_head_effects`)."""
    from ..causal.head_effects import single_head_effects

    return single_head_effects(model.bridge, passages, layers=layers, modes=modes, deadline=deadline, info=info,
                               articles=articles, **common)
