"""Benchmark: the model as a free-recall subject, 100 lists of 16 PEERS words with SmolLM2-135M.

Ours: :func:`icl_cmr.analyses.memory.llm_recall.model_recall` (batches of 16 lists, left padding, one
key-value cache per batch, loop stop), greedy. Reference: the same code one list at a time
(``batch_size=1``) on the first ``N_REFERENCE`` lists, the unbatched way. Both sides give the
same parsed recalls on the shared lists up to batch-padding effects on greedy ties, which the
result counts (``same_recalls``). The ratio compares seconds per list.
"""
from __future__ import annotations

import os
import time

from cmr.deprecation import keyword_only

from ...adapters.lm.loading import load_model, set_threads
from ..memory.llm_recall import model_recall

N_LISTS = 100
LIST_LENGTH = 16
N_REFERENCE = 8


@keyword_only
def bench_llm_recall(*, repeats: int = 1) -> dict:
    threads = set_threads(1)  # one thread: two spin-waiting threads on a busy 2-core machine are far slower
    model = load_model("smollm2-135m")
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    events, _ = model_recall(model, n_lists=N_LISTS, list_length=LIST_LENGTH, rng=0, batch_size=16)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    single, _ = model_recall(model, n_lists=N_REFERENCE, list_length=LIST_LENGTH, rng=0, batch_size=1)
    reference_s = time.perf_counter() - start
    same = int((events["recalls"].isel(trial=slice(0, N_REFERENCE)).values[:, :single.sizes["output_position"]]
                == single["recalls"].values[:, :events.sizes["output_position"]]).all(axis=1).sum())
    per_list, per_list_ref = ours_s / N_LISTS, reference_s / N_REFERENCE
    return {
        "name": "llm-recall",
        "ours_s": ours_s,
        "reference": f"batch_size=1 on {N_REFERENCE} lists, per list x{N_LISTS}",
        "reference_s": per_list_ref * N_LISTS,
        "ratio": per_list_ref / per_list,
        "lists": N_LISTS,
        "seconds_per_list": per_list,
        "same_recalls": f"{same}/{N_REFERENCE}",
        "threads": threads,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
    }
