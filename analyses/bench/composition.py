"""Benchmark: Q-, K- and V-composition of every head pair of SmolLM2-135M (30 layers x 9 heads).

Ours: :func:`icl_cmr.adapters.lm.composition.composition_scores` (d_head-sized products only, one
float32 product per layer, the 200-sample random baseline included). Reference: the full-matrix
definition of Elhage et al. (2021), ``||W_OV^e W_QK^l||_F / (||W_OV^e||_F ||W_QK^l||_F)`` and its
K and V forms with the d_model x d_model matrices formed for each pair, in float64 on the same
norm-folded factors, timed on ``N_REFERENCE_PAIRS`` random pairs and scaled to all pairs. Both
sides run with one BLAS thread.
"""
from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from cmr.deprecation import keyword_only

from .timing import median_time
from ...adapters.lm import composition
from ...adapters.lm.loading import load_model

N_REFERENCE_PAIRS = 24
N_BASELINE = 200


def _full_matrix_scores(weights: dict, pairs) -> np.ndarray:
    """Scores of ``pairs`` (later layer, later head, source layer, source head) by the definition, (pair, 3)."""
    w_q, w_k, w_v, w_o, kv = (weights[k] for k in ("W_Q", "W_K", "W_V", "W_O", "kv_of_head"))
    fro = np.linalg.norm
    out = np.empty((len(pairs), 3))
    for row, (layer, head, source_layer, source_head) in enumerate(pairs):
        qk = w_q[layer, head] @ w_k[layer, kv[head]].T
        ov_later = w_v[layer, kv[head]] @ w_o[layer, head]
        ov = w_v[source_layer, kv[source_head]] @ w_o[source_layer, source_head]
        out[row] = (fro(ov @ qk) / (fro(ov) * fro(qk)), fro(ov @ qk.T) / (fro(ov) * fro(qk)),
                    fro(ov @ ov_later) / (fro(ov) * fro(ov_later)))
    return out


@keyword_only
def bench_composition(*, repeats: int = 3) -> dict:
    """All 35,235 (earlier head, later head) pairs of smollm2-135m, Q, K and V: ours vs the definition.

    ``ours_s``: ``composition_scores(model, n_baseline=200)`` after loading (wall time; median
    of ``repeats`` runs after a warm-up), ``ours_cpu_s`` its process CPU time. ``reference_s``:
    seconds per pair of the full-matrix definition on ``N_REFERENCE_PAIRS`` random pairs, times
    the number of pairs. ``max_rel_diff``: the largest relative difference of the two on those
    pairs (ours computes the large product in float32).
    """
    start = time.perf_counter()
    model = load_model("smollm2-135m", device="cpu")
    load_s = time.perf_counter() - start

    scores = composition.composition_scores(model, n_baseline=N_BASELINE)  # warm-up
    wall, cpu = [], []
    for _ in range(max(1, int(repeats))):
        cpu_start = time.process_time()
        wall.append(median_time(lambda: composition.composition_scores(model, n_baseline=N_BASELINE), 1, warmup=0))
        cpu.append(time.process_time() - cpu_start)

    weights = composition.head_weights(model)
    n_layers, n_heads = model.n_layers, model.n_heads
    every_pair = [(layer, head, source_layer, source_head) for layer in range(n_layers) for head in range(n_heads)
                  for source_layer in range(layer) for source_head in range(n_heads)]
    rng = np.random.default_rng(0)
    pairs = [every_pair[i] for i in rng.choice(len(every_pair), N_REFERENCE_PAIRS, replace=False)]
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.perf_counter()
        reference = _full_matrix_scores(weights, pairs)
        per_pair = (time.perf_counter() - start) / len(pairs)
    ours = np.array([scores["score"].values[:, layer, head, source_layer, source_head]
                     for layer, head, source_layer, source_head in pairs])
    ours_s = float(np.median(wall))
    reference_s = per_pair * len(every_pair)
    return {
        "name": "composition",
        "ours_s": ours_s,
        "reference": f"full-matrix definition, {N_REFERENCE_PAIRS} pairs scaled",
        "reference_s": reference_s,
        "ratio": reference_s / ours_s,
        "ours_cpu_s": float(np.median(cpu)),
        "pairs": len(every_pair),
        "reference_s_per_pair": per_pair,
        "max_rel_diff": float(np.max(np.abs(ours - reference) / np.abs(reference))),
        "n_baseline": N_BASELINE,
        "load_s": load_s,
        "repeats": max(1, int(repeats)),
    }
