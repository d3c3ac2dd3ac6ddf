"""Benchmarks of the CMR profile grids (``icl-cmr bench tf-grid mc-grid``).

* ``tf-grid``: teacher-forced profiles (probability and log-support) of the paper-sized grid
  (4,620 points, N = 100); target under 5 s. Reference: the plain numpy transcription with the
  explicit 101 x 101 matrix (as the study computed M), :func:`cmr.testing.teacher_forced_reference`,
  the same one the kernel is tested against, timed on a sample of points and scaled.
* ``mc-grid``: the study's Monte Carlo grid at its trial count (500 trials x 20 start
  positions, up to 50 recalls) on all cores; target under 15 minutes on 2 cores. Reference:
  the study's per-point algorithm as its script runs it in numpy (a matrix-vector product,
  cumulative sum and ``np.where`` per recall; a Python loop for the lag histogram), timed on
  a slice of trials in a single-threaded-BLAS subprocess and scaled to one point; ``ratio``
  compares per-point costs (ours on all cores, theirs on one, as their pool ran one point per
  process). Set ``ICL_CMR_BENCH_QUICK=1`` to time a 5%
  sample of the grid and scale it (the full grid takes minutes).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from cmr import deprecation
from cmr.deprecation import keyword_only
from cmr.testing.reference import teacher_forced_reference
from cmr.constants import STUDY_N_TRIALS, STUDY_START_POSITIONS
from cmr.grids import paper_grid_axes, paper_mc_grid, paper_teacher_forced_grid
from .timing import median_time

_QUICK_ENV = "ICL_CMR_BENCH_QUICK"


def _single_thread_reference(call: str, repeats: int) -> float:
    """Median seconds of ``call`` (an expression using this module) in a fresh interpreter with
    single-threaded BLAS, as the study ran one point per process; threaded BLAS on small
    matrices only adds contention (8x slower on 2 busy cores)."""
    code = (
        "import json, statistics, time, numpy as np\n"
        "from cmr.testing.reference import teacher_forced_reference\n"
        "from icl_cmr.analyses.bench.profiles import study_recall_point\n"
        "times = []\n"
        f"for _ in range({max(1, repeats)}):\n"
        "    start = time.perf_counter()\n"
        f"    {call}\n"
        "    times.append(time.perf_counter() - start)\n"
        "print(json.dumps(statistics.median(times)))\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


@keyword_only
def numpy_teacher_forced_point(beta_enc, beta_rec, gamma, *, n=100, max_lag=8):
    """Deprecated alias of :func:`cmr.testing.teacher_forced_reference` (``n`` is its ``list_length``)."""
    deprecation.warn("icl_cmr.analyses.bench.profiles.numpy_teacher_forced_point is deprecated and will be "
                    "removed in the next release; use cmr.testing.teacher_forced_reference")
    return teacher_forced_reference(beta_enc, beta_rec, gamma, list_length=n, max_lag=max_lag)


@keyword_only
def bench_tf_grid(*, repeats: int = 7) -> dict:
    start = time.perf_counter()
    paper_teacher_forced_grid(kind="prob")
    first = time.perf_counter() - start

    def ours():
        paper_teacher_forced_grid(kind="prob")
        paper_teacher_forced_grid(kind="logsupport")

    ours_s = median_time(ours, repeats)
    axes = paper_grid_axes()
    n_points = int(np.prod([a.size for a in axes.values()]))
    # ten points of the grid, single-threaded BLAS in a fresh interpreter, scaled to the grid
    call = "[teacher_forced_reference(be, br, g) for be, br, g in [(0.05, 0.0, 0.0), (0.3, 0.25, 0.5), (0.6, 0.75, 0.3), (0.9, 1.0, 1.0), (1.0, 0.5, 0.1), (0.15, 0.9, 0.7), (0.45, 0.1, 0.9), (0.75, 0.6, 0.2), (0.2, 0.4, 0.4), (0.85, 0.05, 0.6)]]"
    reference_s = _single_thread_reference(call, max(1, min(repeats, 3))) * n_points / 10
    return {
        "name": "tf-grid",
        "ours_s": ours_s,
        "reference": "numpy explicit-matrix transcription (scaled from 10 points)",
        "reference_s": reference_s,
        "ratio": reference_s / ours_s,
        "first_call_s": first,
        "n_points": n_points,
        "list_length": 100,
        "kinds": "prob + logsupport",
        "target_s": 5.0,
    }


@keyword_only
def study_recall_point(beta_enc, beta_rec, gamma, start, n_trials, *, rng, n=100, max_recalls=50, max_lag=8):
    """One start position of the study's simulator, operation for operation in numpy.

    Per recall: support ``M^T t`` by a dense product, ``P = F / sum``, the first index with a
    uniform draw <= cumsum(P), the input ``(1-g) f + g M f`` and the context update with their
    norms; then the lag histogram in a Python loop. Returns the start's lag distribution.
    """
    states = n + 1
    shift = np.eye(states, k=1)
    m = np.linalg.inv(np.identity(states) - (1 - beta_enc) * shift) @ shift
    eye = np.identity(states)
    samples = -np.ones((n_trials, max_recalls), dtype=int)
    for trial in range(n_trials):
        t = eye[:, start]
        count = 0
        while count < max_recalls:
            support = m.T @ t
            prob = support / np.sum(support)
            chosen = np.where(rng.random() <= np.cumsum(prob))[0][0]
            if chosen >= states - 1:
                break
            samples[trial, count] = chosen
            f = eye[:, chosen]
            count += 1
            t_in = (1 - gamma) * f + gamma * (m @ f)
            t_in = t_in / np.linalg.norm(t_in)
            t = (1 - beta_rec) * t + beta_rec * t_in
            t = t / np.linalg.norm(t)
    counts = np.zeros((n_trials, 2 * max_lag + 1))
    totals = np.sum(samples >= 0, axis=1)
    for trial in range(n_trials):
        row = samples[trial]
        for i, item in enumerate(row):
            if item < 0:
                break
            lag = item - (start if i == 0 else row[i - 1])
            if abs(lag) <= max_lag:
                counts[trial, lag + max_lag] += 1
    with np.errstate(invalid="ignore"):
        crp = np.nanmean(counts / totals[:, None], axis=0)
    return crp / crp.sum()


@keyword_only
def bench_mc_grid(*, repeats: int = 1) -> dict:
    quick = os.environ.get(_QUICK_ENV, "") not in ("", "0")
    axes = paper_grid_axes()
    n_points = int(np.prod([a.size for a in axes.values()]))
    start = time.perf_counter()
    paper_mc_grid([0.5], [0.5], [0.5], n_trials=5, progress=False)
    first = time.perf_counter() - start
    if quick:
        # a regular 5 x 5 x 5 sub-grid spread over the whole grid, scaled to 4,620 points
        sub = {"beta_enc": axes["beta_enc"][::4], "beta_rec": axes["beta_rec"][1::4], "gamma": axes["gamma"][1::2]}
        n_run = int(np.prod([a.size for a in sub.values()]))
        elapsed = median_time(lambda: paper_mc_grid(**sub, n_trials=STUDY_N_TRIALS, progress=False), 1, warmup=0)
        ours_s = elapsed * n_points / n_run
    else:
        n_run = n_points
        ours_s = median_time(lambda: paper_mc_grid(n_trials=STUDY_N_TRIALS), 1, warmup=0)
    # reference: the study's algorithm for one point, timed on a slice of trials and scaled
    slice_trials = 20
    call = f"study_recall_point(0.6, 0.75, 0.3, 5, {slice_trials}, rng=np.random.default_rng(0))"
    ref_one = _single_thread_reference(call, max(1, min(repeats, 3)))
    reference_point_s = ref_one * (STUDY_N_TRIALS / slice_trials) * len(STUDY_START_POSITIONS)
    ours_point_s = ours_s / n_points
    return {
        "name": "mc-grid",
        "ours_s": ours_s,
        "reference": "study's simulator algorithm in numpy (1 core, scaled from 20 trials at (0.6, 0.75, 0.3))",
        "reference_s": reference_point_s * n_points,
        "ratio": reference_point_s / ours_point_s,
        "ours_per_point_s": ours_point_s,
        "reference_per_point_s": reference_point_s,
        "first_call_s": first,
        "n_points": n_points,
        "points_timed": n_run,
        "quick": int(quick),
        "n_trials": STUDY_N_TRIALS,
        "threads": int(__import__("numba").config.NUMBA_NUM_THREADS),
        "study_reported_cpu_hours": "60-90 (about 50-70 s per point)",
        "target_s": 900.0,
    }
