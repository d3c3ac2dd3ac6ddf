"""The paper's simplified CMR (Ji-An, Zhou, Benna & Mattar, NeurIPS 2024): simulation.

One-hot items plus an absorbing end-of-list state; context->item weights
``M[i, j] = (1 - beta_enc)**(j-i-1)`` for ``j > i``; retrieval ``P = M^T t / sum`` (linear, no
temperature); after recalling item j the input ``t_in = (1-g) f_j + g M f_j`` (normalised)
moves context ``t <- (1-beta_rec) t + beta_rec t_in`` (normalised). Recall starts from the
context of study position s0, repeats are allowed, and a trial ends at the absorbing state or
after ``max_recalls`` recalls. See docs/equations.md, "The paper's variant".

The study's "CRP" of one parameter point is a distribution over lags -8..+8: per trial, the
share of its transitions (the first one from s0 to the first recall) at each lag, transitions
beyond +-8 counting only in the denominator; averaged over trials, renormalised over the lags,
then averaged over s0 = 1..20. The settings that reproduce the saved grid are
``n_trials=500`` and ``max_recalls=50`` per start position (their script says 1000 and 100;
the saved grid says otherwise, see docs/equations.md). At (beta_rec, gamma) = (1, 0) and
(0, 0) the study used closed forms instead of simulation; ``closed_forms=True`` does the same.
"""
from __future__ import annotations

import concurrent.futures
import os

import numpy as np
import pandas as pd

from ..checks import as_generator, integer, is_integer, seed_of, shown
from ..checks import n_jobs as check_n_jobs
from ..constants import STUDY_LIST_LENGTH, STUDY_MAX_LAG, STUDY_MAX_RECALLS, STUDY_N_TRIALS, STUDY_START_POSITIONS
from ..errors import ParameterError, RecallDataError
from .. import deprecation
from ..events import from_recall_matrix, to_table
from . import _kernels

__all__ = [
    "check_parameters",
    "simulate_paper_recalls",
    "simulate_paper_free_recall",
    "paper_lag_statistics",
    "closed_form_lag_distribution",
    "point_seeds",
    "point_generator",
]

_BOUNDS = {"beta_enc": (0.0, 1.0, "(0, 1]"), "beta_rec": (0.0, 1.0, "[0, 1]"), "gamma": (0.0, 1.0, "[0, 1]")}


def check_parameters(beta_enc, beta_rec, gamma) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Broadcast the three parameters to float64 arrays of one shape; ParameterError if invalid."""
    arrays = {}
    for name, value in (("beta_enc", beta_enc), ("beta_rec", beta_rec), ("gamma", gamma)):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be a number or an array of numbers; got {value!r}") from None
        low, high, text = _BOUNDS[name]
        bad = ~np.isfinite(arr) | (arr < low) | (arr > high) | ((arr == low) & (name == "beta_enc"))
        if bad.any():
            raise ParameterError(f"{name} must lie in {text}; got {float(arr[bad].flat[0])}")
        arrays[name] = arr
    try:
        out = np.broadcast_arrays(arrays["beta_enc"], arrays["beta_rec"], arrays["gamma"])
    except ValueError:
        shapes = {k: v.shape for k, v in arrays.items()}
        raise ParameterError(f"beta_enc, beta_rec and gamma must broadcast to one shape; got {shapes}") from None
    return tuple(np.array(x, dtype=np.float64, order="C") for x in out)  # keeps 0-d as 0-d


def _start_indices(start_positions, list_length: int) -> np.ndarray:
    """1-based start positions -> 0-based int64 indices, validated against the list length."""
    if start_positions is None:
        start_positions = STUDY_START_POSITIONS
    starts = np.atleast_1d(np.asarray(start_positions))
    if starts.ndim != 1 or starts.size == 0 or starts.dtype.kind not in "iu":
        raise RecallDataError(f"start_positions must be 1-based integer serial positions; got {start_positions!r}")
    if (starts < 1).any() or (starts > list_length).any():
        raise RecallDataError(
            f"start_positions must be serial positions 1..list_length ({list_length}); got {starts.min()}..{starts.max()}"
        )
    return np.ascontiguousarray(starts - 1, dtype=np.int64)


def simulate_paper_recalls(
    beta_enc: float,
    beta_rec: float,
    gamma: float,
    *,
    list_length: int = STUDY_LIST_LENGTH,
    start_positions=None,
    n_trials: int = STUDY_N_TRIALS,
    max_recalls: int = STUDY_MAX_RECALLS,
    rng=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Recall matrix of the paper's variant: ``n_trials`` trials from each start position.

    Parameters
    ----------
    beta_enc : float in (0, 1]
    beta_rec, gamma : float in [0, 1]
    list_length : int
        Studied items (the study: 100).
    start_positions : sequence of int, optional
        1-based serial positions whose one-hot context starts recall (default 1..20, the
        study's s0 = 0..19).
    n_trials, max_recalls : int
        Trials per start position and the cap on recalls per trial.
    rng : numpy.random.Generator or int or None
        Source of randomness (an int is a seed).

    Returns
    -------
    recalls : int64 (len(start_positions) * n_trials, max_recalls)
        1-based serial positions in output order (repeats allowed), 0 padding; rows are
        start-major.
    start_position : int64 (len(start_positions) * n_trials,)
        The 1-based start position of each row.
    """
    values = check_parameters(beta_enc, beta_rec, gamma)
    if values[0].ndim != 0:
        raise ParameterError(f"simulation takes one parameter point; got arrays of shape {values[0].shape}")
    b_enc, b_rec, g = (float(x) for x in values)
    n = integer(list_length, "list_length")
    starts = _start_indices(start_positions, n)
    trials = integer(n_trials, "n_trials")
    cap = integer(max_recalls, "max_recalls")
    recalls = _kernels.simulate_recalls(as_generator(rng), 1.0 - b_enc, b_rec, g, n, starts, trials, cap)
    return recalls + 1, np.repeat(starts + 1, trials)


def simulate_paper_free_recall(
    beta_enc: float,
    beta_rec: float,
    gamma: float,
    *,
    list_length: int = STUDY_LIST_LENGTH,
    start_positions=None,
    n_trials: int = STUDY_N_TRIALS,
    max_recalls: int = STUDY_MAX_RECALLS,
    rng=None,
) -> pd.DataFrame:
    """Simulate the paper's variant as a psifr-format long table (see :func:`simulate_paper_recalls`).

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item, start_position``: one subject
        (1), lists 1..len(start_positions)*n_trials in start-major order, items named by
        serial position (``"1"``, ``"2"``, ...), recall rows' ``position`` = output position,
        ``start_position`` = the 1-based study position whose context started the list.
    """
    recalls, start = simulate_paper_recalls(
        beta_enc, beta_rec, gamma, list_length=list_length, start_positions=start_positions,
        n_trials=n_trials, max_recalls=max_recalls, rng=rng,
    )
    lists = np.arange(1, recalls.shape[0] + 1)
    events = from_recall_matrix(
        recalls, int(list_length), list=lists, source="cmr.simulate_paper_free_recall"
    )
    table = to_table(events)
    table["start_position"] = start[table["list"].to_numpy(dtype=np.int64) - 1]
    return table


def closed_form_lag_distribution(beta_enc: float, beta_rec: float, start: int, list_length: int, max_lag: int) -> np.ndarray:
    """The study's closed-form lag distribution at (beta_rec, gamma) = (1, 0) or (0, 0).

    ``start`` is 0-based. For beta_rec = 1 (context = the last recalled item), lag d > 0 gets
    ``sum_i P1(i) M[i, i+d] / sum_j M[i, j]`` with ``P1 = (M^d)[start] / sum``; for
    beta_rec = 0 (context stays at the start state, recalls are i.i.d. from
    ``P1 = M[start] / sum``), lag d gets ``sum_i P1(i) P1(i+d)``. Both renormalised over
    -max_lag..max_lag, exactly as the study's ``getCRP`` (including its choice of P1).
    Returns float64 (2*max_lag+1,).
    """
    n_states = list_length + 1
    decay = 1.0 - beta_enc
    offset = np.arange(n_states)[None, :] - np.arange(n_states)[:, None]
    weights = np.where(offset > 0, decay ** np.maximum(offset - 1, 0), 0.0)
    crp = np.zeros(2 * max_lag + 1)
    if beta_rec == 1.0:
        power = np.identity(n_states)
        row_sums = weights.sum(axis=1)
        for d in range(1, max_lag + 1):
            power = power @ weights
            p1 = power[start] / power[start].sum()
            step = np.zeros(n_states)
            step[: n_states - d] = np.diagonal(weights, offset=d)
            with np.errstate(invalid="ignore", divide="ignore"):
                p2 = step / row_sums  # the absorbing row has no mass: NaN, dropped by nansum as the study did
            crp[d + max_lag] = np.nansum(p1 * p2)
    elif beta_rec == 0.0:
        p1 = weights[start] / weights[start].sum()
        crp[max_lag] = np.square(p1).sum()
        for d in range(1, min(list_length, max_lag + 1)):
            crp[max_lag + d] = (p1[:-d] * p1[d:]).sum()
            crp[max_lag - d] = (p1[d:] * p1[:-d]).sum()
    else:
        raise ParameterError(f"closed forms exist only for beta_rec 0 or 1 (with gamma 0); got beta_rec={shown(beta_rec)}")
    return crp / crp.sum()


closed_form_crp = deprecation.renamed("closed_form_crp", closed_form_lag_distribution, module="cmr.paper")


def _closed_form_applies(beta_rec: float, gamma: float) -> bool:
    return gamma == 0.0 and beta_rec in (0.0, 1.0)


@deprecation.renamed_keywords(seed="rng")
def point_seeds(rng, beta_enc, beta_rec, gamma) -> np.ndarray:
    """One 32-bit seed per parameter point, from the base seed ``rng`` and the exact parameter values.

    A point gets the same stream in any grid, so a subset of a grid equals those points of
    the full grid. ``rng``: an int is the base seed; a Generator draws one
    (``int(rng.integers(2**63))``); None draws one from fresh entropy.
    """
    seed = seed_of(rng)
    bits = np.stack([np.asarray(x, dtype=np.float64).view(np.uint64) for x in (beta_enc, beta_rec, gamma)], axis=-1)
    out = np.empty(bits.shape[0], dtype=np.int64)
    for p, row in enumerate(bits):
        words = [int(seed)] + [int(w) for v in row for w in (v & 0xFFFFFFFF, v >> 32)]
        out[p] = int(np.random.SeedSequence(words).generate_state(1)[0])
    return out


@deprecation.renamed_keywords(seed="rng")
def point_generator(rng) -> np.random.Generator:
    """The generator of one grid point: MT19937 seeded from ``rng`` as ``numpy.random.seed`` does.

    ``rng``: an int is the point's 32-bit seed (:func:`point_seeds`); a Generator draws one
    (``int(rng.integers(2**32))``); None draws one from fresh entropy. The seeding (not numpy's
    newer SeedSequence seeding of MT19937) keeps every grid made with a given seed identical
    across versions of the toolkit.
    """
    seed = int(rng) if is_integer(rng) else int(as_generator(rng).integers(2**32))
    bit_generator = np.random.MT19937()
    bit_generator.state = np.random.RandomState(int(seed)).get_state(legacy=False)
    return np.random.Generator(bit_generator)


def paper_lag_statistics(
    beta_enc,
    beta_rec,
    gamma,
    *,
    list_length: int = STUDY_LIST_LENGTH,
    start_positions=None,
    n_trials: int = STUDY_N_TRIALS,
    max_recalls: int = STUDY_MAX_RECALLS,
    max_lag: int = STUDY_MAX_LAG,
    rng=0,
    closed_forms: bool = True,
    n_jobs: int | None = None,
    progress: bool | None = None,
) -> dict:
    """Per-start Monte Carlo lag distributions of many parameter points (array layer).

    Parameters
    ----------
    beta_enc, beta_rec, gamma : array_like, broadcastable, shape (n_points,) after broadcasting
    list_length, start_positions, n_trials, max_recalls : see :func:`simulate_paper_recalls`
    max_lag : int
        Lags -max_lag..max_lag are histogrammed; farther transitions count only in the
        per-trial denominator (the study: 8).
    rng : int or numpy.random.Generator
        Base seed (a Generator draws one); each point's stream comes from the seed and the
        point's parameter values (:func:`point_seeds`, :func:`point_generator`), so any
        sub-grid reproduces the same points of a larger grid exactly.
    closed_forms : bool
        Use the study's closed forms at (beta_rec, gamma) = (1, 0) and (0, 0).
    n_jobs : int, optional
        Worker threads (default: numba's thread count, i.e. NUMBA_NUM_THREADS or all cores).
    progress : bool, optional
        tqdm progress bar (default: on for more than 200 points).

    Returns
    -------
    dict
        ``per_start`` float64 (n_points, n_starts, 2*max_lag+1): each start's distribution;
        ``per_start_var`` the same shape: its Monte Carlo variance (0 for closed forms);
        ``closed_form`` bool (n_points,); ``seeds`` int64 (n_points,).
    """
    b_enc, b_rec, g = (np.ravel(x) for x in check_parameters(beta_enc, beta_rec, gamma))
    n = integer(list_length, "list_length")
    starts = _start_indices(start_positions, n)
    trials = integer(n_trials, "n_trials")
    cap = integer(max_recalls, "max_recalls")
    lag_cap = integer(max_lag, "max_lag")
    seed = seed_of(rng)
    n_points, n_lags = b_enc.size, 2 * lag_cap + 1
    per_start = np.full((n_points, starts.size, n_lags), np.nan)
    per_start_var = np.full_like(per_start, np.nan)
    closed = np.array([closed_forms and _closed_form_applies(r, c) for r, c in zip(b_rec, g)], dtype=bool)
    for p in np.flatnonzero(closed):
        for s, start in enumerate(starts):
            per_start[p, s] = closed_form_lag_distribution(b_enc[p], b_rec[p], int(start), n, lag_cap)
        per_start_var[p] = 0.0
    seeds = point_seeds(seed, b_enc, b_rec, g)
    todo = np.flatnonzero(~closed)
    if todo.size:
        _run_points(todo, 1.0 - b_enc, b_rec, g, n, starts, trials, cap, lag_cap, seeds, per_start, per_start_var,
                    n_jobs, progress)
    return {"per_start": per_start, "per_start_var": per_start_var, "closed_form": closed, "seeds": seeds}


def _run_points(todo, a, b_rec, g, n, starts, trials, cap, lag_cap, seeds, per_start, per_start_var, n_jobs, progress):
    """Simulate the points ``todo`` in chunks on worker threads (the kernel releases the GIL)."""
    if n_jobs is None:
        import numba

        n_jobs = int(numba.config.NUMBA_NUM_THREADS)
    threads = max(1, min(check_n_jobs(n_jobs), os.cpu_count() or 1))
    chunk = max(1, min(16, todo.size // (4 * threads) or 1))
    chunks = [todo[i : i + chunk] for i in range(0, todo.size, chunk)]

    def work(idx):
        crp = np.empty((idx.size, starts.size, 2 * lag_cap + 1))
        var = np.empty_like(crp)
        for k, p in enumerate(idx):
            _kernels.lag_stats_one_point(
                point_generator(seeds[p]), a[p], b_rec[p], g[p], n, starts, trials, cap, lag_cap, crp[k], var[k]
            )
        return idx, crp, var

    show = todo.size > 200 if progress is None else bool(progress)
    from tqdm.auto import tqdm

    with tqdm(total=int(todo.size), disable=not show, desc="CMR Monte Carlo grid", unit="point") as bar:
        if threads == 1:
            results = map(work, chunks)
            for idx, crp, var in results:
                per_start[idx], per_start_var[idx] = crp, var
                bar.update(idx.size)
        else:
            with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
                for idx, crp, var in pool.map(work, chunks):
                    per_start[idx], per_start_var[idx] = crp, var
                    bar.update(idx.size)
