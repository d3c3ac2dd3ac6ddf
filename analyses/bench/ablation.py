"""Benchmark: the ablation test per passage, the engine against one bridge pass per condition.

Both sides run SmolLM2-135M on the same passages (506 input tokens: BOS + text up to token
505) and return the same losses at the 22 scored positions for the unablated model and for
every head set zero-ablated: a top set of 27 heads (layers 7-26), ``N_RANDOM`` random sets and
``N_MATCHED`` layer-matched sets. The reference is the per-condition procedure: one unablated pass
with mean capture, then one bridge pass per set (``passage_losses``, logits only at the scored
positions). Ours: :func:`icl_cmr.adapters.lm.ablation_engine.set_losses` (plain SDPA model,
resumed at each set's first ablated layer, conditions batched). Extras: seconds per passage
per condition, and the study size and a 2-hour budget at that rate.
"""
from __future__ import annotations

import time

import numpy as np

from cmr.deprecation import keyword_only

from .timing import median_time
from ...adapters.lm import ablation_engine, interventions
from ...adapters.lm.loading import load_model, set_threads
from ...adapters.text_corpus import load_passages
from ..causal import ablation

TOP = [(18, 6), (18, 7), (18, 8), (24, 2), (17, 4), (26, 5), (17, 5), (23, 2), (14, 3), (17, 3), (23, 7), (23, 8),
       (26, 3), (24, 0), (23, 1), (14, 5), (24, 1), (15, 6), (23, 3), (8, 0), (7, 7), (21, 3), (20, 8), (20, 6),
       (24, 4), (22, 7), (20, 7)]
N_PASSAGES = 1
N_RANDOM = 4
N_MATCHED = 4


@keyword_only
def bench_ablation(*, repeats: int = 3) -> dict:
    start = time.perf_counter()
    model = load_model("smollm2-135m")
    interventions.plain_model(model.bridge)
    load_s = time.perf_counter() - start
    passages = load_passages("wikipedia", model.tokenizer, n_passages=N_PASSAGES, n_tokens=512, rng=0)
    targets = ablation.scored_positions(50, 500, 5, 512)
    sets = ablation.head_sets(30, 9, TOP, n_random=N_RANDOM, n_matched=N_MATCHED, rng=0)[0]

    def ours():
        base, losses, _ = ablation_engine.set_losses(model.bridge, passages, targets, sets, modes=("zero",))
        return np.concatenate([base[None], losses[0]])

    def reference():
        base, _ = interventions.passage_losses(model.bridge, passages, targets, capture_means=True, batch_size=N_PASSAGES)
        rows = [interventions.passage_losses(model.bridge, passages, targets, heads=heads, batch_size=N_PASSAGES)[0]
                for heads in sets]
        return np.concatenate([base[None], np.stack(rows)])

    agree = float(np.abs(ours() - reference()).max())
    times = {"ours": [], "reference": []}
    for _ in range(int(repeats)):  # interleaved, so both sides see the same load
        times["ours"].append(median_time(ours, 1, warmup=0))
        times["reference"].append(median_time(reference, 1, warmup=0))
    ours_s, reference_s = float(np.median(times["ours"])), float(np.median(times["reference"]))
    per_condition = ours_s / N_PASSAGES / (len(sets) + 1)  # the unablated pass and one per set
    return {
        "name": "ablation-forward",
        "ours_s": ours_s,
        "reference": f"one bridge pass per condition x{N_PASSAGES} passages",
        "reference_s": reference_s,
        "ratio": reference_s / ours_s,
        "ours_s_per_passage": ours_s / N_PASSAGES,
        "reference_s_per_passage": reference_s / N_PASSAGES,
        "conditions": len(sets) + 1,
        "ours_s_per_condition": per_condition,
        "study_size_h": 300 * (2 + 2 * 102) * per_condition / 3600,
        "max_abs_diff": agree,
        "threads": set_threads(None),
        "load_s": load_s,
    }
