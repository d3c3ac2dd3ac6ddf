"""Benchmark: the ablation forward pass (logits only at the scored positions) vs a full forward.

Both sides run SmolLM2-135M with the same three heads zero-ablated at ``hook_z`` on the same
passages (506 input tokens: BOS + text up to token 505) and return the same 22 losses; the
reference is the plain TransformerLens way, ``bridge.run_with_hooks`` with full logits.
Extras: passage forward passes per second, and the time the study's full size (300 passages x
(1 + 2 modes x 21 sets)) and the demo size would take at that rate.
"""
from __future__ import annotations

import time

import numpy as np

HEADS = [(18, 6), (17, 3), (17, 4)]
N_PASSAGES = 2


def bench_ablation(repeats: int = 3) -> dict:
    from icl_cmr.adapters import interventions
    from icl_cmr.adapters.text_corpus import load_passages
    from icl_cmr.adapters.transformer_lens import load_model, set_threads
    from icl_cmr.analyses import ablation
    from icl_cmr.analyses.bench import median_time

    start = time.perf_counter()
    model = load_model("smollm2-135m")
    load_s = time.perf_counter() - start
    passages = load_passages("wikipedia", model.tokenizer, N_PASSAGES, 512, seed=0)
    targets = ablation.scored_positions(50, 500, 5, 512)

    def ours():
        return interventions.passage_losses(model.bridge, passages, targets, heads=HEADS, batch_size=N_PASSAGES)[0]

    def reference():
        return interventions.full_logit_losses(model.bridge, passages, targets, heads=HEADS)

    start = time.perf_counter()
    agree = float(np.abs(ours() - reference()).max())
    first_s = time.perf_counter() - start
    ours_s = median_time(ours, repeats, warmup=0)
    reference_s = median_time(reference, repeats, warmup=0)
    per_pass = ours_s / N_PASSAGES
    return {
        "name": "ablation-forward",
        "ours_s": ours_s,
        "reference": f"run_with_hooks full logits x{N_PASSAGES}",
        "reference_s": reference_s,
        "ratio": reference_s / ours_s,
        "passes_per_s": 1.0 / per_pass,
        "full_size_h": 300 * (1 + 2 * 21) * per_pass / 3600,
        "demo_size_s": 8 * (1 + 1 * 6) * per_pass,
        "max_abs_diff": agree,
        "threads": set_threads(None),
        "first_call_s": first_s,
        "load_s": load_s,
    }
