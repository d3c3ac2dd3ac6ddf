"""Array layer of population-level CMR fits: one subject's posterior mode and curvature, and the
expectation-maximisation loop over subjects (:func:`expectation_maximisation`).

A subject's free parameters live on an unbounded scale: ``z = logit((x - low) / (high - low))``
per free parameter, with ``(low, high)`` its search bounds. Under a population prior
``z ~ N(mean, diag(sd**2))`` the subject's log posterior is its CMR log-likelihood (scored by
the population kernel of ``cmr.textbook._lanes``, many parameter sets per call; CMR2's by its
sessions kernel) plus the log prior. :func:`subject_mode` finds its maximum by L-BFGS
(central-difference gradients, all 2k + 1 points in one kernel call) and the Hessian there by
central second differences, so the Laplace approximation ``N(mode, inv(H))`` of the posterior
is known. It is a module-level function of picklable arguments: it runs unchanged in a thread,
a process or on a dask worker. :func:`e_step` runs it for every subject (one task each, in
threads or on an executor), :func:`m_step` sets the population from the modes and their Laplace
variances, and :func:`expectation_maximisation` alternates them until the population settles.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .errors import ParameterError
from .textbook import _lanes
from .textbook._optimize import ModelSpec, run_tasks, single_threaded_blas
from .textbook._trials import TrialArrays
from .textbook.fit import unit_seeds

__all__ = ["to_natural", "to_latent", "subject_mode", "log_posterior_terms", "first_starts", "e_step", "m_step",
           "expectation_maximisation", "Z_LIMIT", "INITIAL_SD", "SD_FLOOR"]

#: sd of the first population prior on the latent scale: the logistic distribution's (pi / sqrt 3),
#: so the first prior is close to uniform over the search bounds
INITIAL_SD = math.pi / math.sqrt(3.0)
#: smallest population sd on the latent scale (the M-step never sets a spread of exactly 0)
SD_FLOOR = 1e-3
#: |z| is kept below this in the search (expit(15) is 1 - 3e-7 of the range: at a bound in effect)
Z_LIMIT = 15.0
#: step of the central-difference gradient on the latent scale
GRADIENT_STEP = 1e-5
#: step of the central second differences of the Hessian on the latent scale
HESSIAN_STEP = 1e-3
#: Newton's search stops when its decrement (twice the expected gain in log posterior) is below this
NEWTON_TOLERANCE = 1e-8


def to_natural(z: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Natural values of latent ``z`` (..., k): ``low + (high - low) * expit(z)``."""
    return low + (high - low) / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def to_latent(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Latent values of natural ``x`` (..., k), clipped to ``±Z_LIMIT`` (a value at a bound)."""
    with np.errstate(divide="ignore"):
        share = (np.asarray(x, dtype=np.float64) - low) / (high - low)
        z = np.log(share) - np.log1p(-share)
    return np.clip(z, -Z_LIMIT, Z_LIMIT)


class SubjectPosterior:
    """Log-likelihood and log prior of one subject's trials on the latent scale, vectorised.

    ``arrays`` is the subject's textbook trials (scored by the lanes kernel) or an objective of
    another model that scores full parameter sets itself, ``arrays.totals(sets) -> logl`` (CMR2's
    sessions: :func:`cmr.cmr2.fit.session_objective`).
    """

    def __init__(self, spec: ModelSpec, arrays, mean: np.ndarray, sd: np.ndarray):
        self.spec = spec
        self.arrays = arrays
        if isinstance(arrays, TrialArrays):
            self.order = arrays.order(np.zeros(arrays.n_trials, dtype=np.int64))
            self.groups = arrays.kernel_groups()
            self.totals = self._lanes_totals
        else:
            self.totals = arrays.totals
        self.low = np.array([b[0] for b in spec.bounds])
        self.high = np.array([b[1] for b in spec.bounds])
        self.mean = np.asarray(mean, dtype=np.float64)
        self.precision = 1.0 / np.asarray(sd, dtype=np.float64) ** 2
        self.nfev = 0
        self.n_nan = 0
        self.n_invalid = 0

    def log_likelihood(self, z: np.ndarray) -> np.ndarray:
        """CMR log-likelihood of each row of ``z`` (S, k); -inf where inadmissible or NaN (counted)."""
        sets, ok = self.spec.vectors(to_natural(z, self.low, self.high))
        out = np.full(sets.shape[0], -np.inf)
        if ok.any():
            totals = self.totals(np.ascontiguousarray(sets[ok]))
            nan = np.isnan(totals)
            self.n_nan += int(nan.sum())  # reported in the fit, never hidden
            out[ok] = np.where(nan, -np.inf, totals)
        self.n_invalid += int((~ok).sum())
        self.nfev += sets.shape[0]
        return out

    def _lanes_totals(self, good: np.ndarray) -> np.ndarray:
        """Textbook log-likelihood of each row of ``good`` (S, 19), one lanes kernel call per ``LANES`` rows."""
        return np.concatenate([
            _lanes.population_totals(np.ascontiguousarray(good[a:a + _lanes.LANES]), self.arrays, self.order)
            for a in range(0, good.shape[0], _lanes.LANES)
        ])

    def log_prior(self, z: np.ndarray) -> np.ndarray:
        """Log density of the population prior at each row of ``z`` (S, k), up to its constant."""
        return -0.5 * np.sum((z - self.mean) ** 2 * self.precision, axis=-1)

    def negative_and_gradient(self, z: np.ndarray):
        """-log posterior at ``z`` (k,) and its central-difference gradient (one kernel call)."""
        k = z.size
        h = GRADIENT_STEP
        points = np.repeat(z[None, :], 2 * k + 1, axis=0)
        points[1 + np.arange(k), np.arange(k)] += h
        points[1 + k + np.arange(k), np.arange(k)] -= h
        values = self.log_likelihood(points) + self.log_prior(points)
        base, up, down = values[0], values[1:1 + k], values[1 + k:]
        if not np.isfinite(base):
            return np.inf, np.zeros(k)
        gradient = np.where(np.isfinite(up) & np.isfinite(down), (up - down) / (2 * h),
                            np.where(np.isfinite(up), (up - base) / h,
                                     np.where(np.isfinite(down), (base - down) / h, 0.0)))
        return -float(base), -gradient

    def likelihood_hessian(self, z: np.ndarray) -> np.ndarray:
        """Hessian (k, k) of the log-likelihood at ``z`` by central second differences.

        Off the diagonal ``(f(z+hi+hj) + f(z-hi-hj) - f(z±hi) - f(z±hj) + 2 f(z)) / (2 h**2)``,
        exact to O(h**2) like the four-point formula with two points per pair instead of four:
        1 + k**2 points in all (101 for ten free parameters).
        """
        k = z.size
        h = HESSIAN_STEP
        eye = np.eye(k) * h
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
        points = [z] + [z + eye[i] for i in range(k)] + [z - eye[i] for i in range(k)]
        for i, j in pairs:
            points += [z + eye[i] + eye[j], z - eye[i] - eye[j]]
        values = self.log_likelihood(np.array(points))
        base, up, down = values[0], values[1:1 + k], values[1 + k:1 + 2 * k]
        hessian = np.zeros((k, k))
        hessian[np.arange(k), np.arange(k)] = (up - 2 * base + down) / h ** 2
        corners = values[1 + 2 * k:].reshape(-1, 2)
        for (i, j), (pp, mm) in zip(pairs, corners):
            axes = up[i] + down[i] + up[j] + down[j]
            hessian[i, j] = hessian[j, i] = (pp + mm - axes + 2 * base) / (2 * h * h)
        return np.where(np.isfinite(hessian), hessian, 0.0)


def log_posterior_terms(spec: ModelSpec, arrays, z: np.ndarray, mean, sd) -> tuple[float, float]:
    """Log-likelihood and log prior (up to its constant) of one subject at latent ``z`` (k,)."""
    post = SubjectPosterior(spec, arrays, mean, sd)
    z = np.asarray(z, dtype=np.float64)[None, :]
    return float(post.log_likelihood(z)[0]), float(post.log_prior(z)[0])


def _newton(post: SubjectPosterior, z: np.ndarray, curvature: np.ndarray, max_steps: int = 50):
    """Newton's method on the log posterior from ``z`` with a fixed curvature (the last mode's).

    The prior's precision is exact, the likelihood's curvature is the previous iteration's: the
    prior moved a little, so a few steps reach the new mode. Backtracking keeps every step an
    ascent; returns ``(z, steps, converged)``, not converged when no step ascends.
    """
    precision = curvature + np.diag(post.precision)
    value, gradient = post.negative_and_gradient(z)
    if not np.isfinite(value):
        return z, 0, False
    for steps in range(max_steps):
        step = -np.linalg.solve(precision, gradient)
        decrement = float(-gradient @ step)  # Newton decrement squared: the expected gain is half of it
        if decrement < NEWTON_TOLERANCE:
            return z, steps, True
        size = 1.0
        while size >= 1e-4:
            trial = np.clip(z + size * step, -Z_LIMIT, Z_LIMIT)
            trial_value, trial_gradient = post.negative_and_gradient(trial)
            if trial_value <= value - 1e-4 * size * decrement:
                break
            size *= 0.5
        else:
            return z, steps, False
        z, value, gradient = trial, trial_value, trial_gradient
    return z, max_steps, False


def subject_mode(spec: ModelSpec, arrays, mean: np.ndarray, sd: np.ndarray, starts: np.ndarray,
                 curvature: np.ndarray | None = None) -> dict:
    """Posterior mode of one subject under the prior ``N(mean, sd**2)`` and its Laplace approximation.

    Parameters
    ----------
    spec, arrays
        The model and the subject's trials (textbook ``TrialArrays``), or CMR2's model and the
        subject's session objective.
    mean, sd : ndarray, shape (k,)
        The population prior on the latent scale.
    starts : ndarray, shape (n_starts, k)
        Latent starting points; the mode with the highest posterior is kept.
    curvature : ndarray, shape (k, k), optional
        The likelihood's curvature at a nearby earlier mode (one start only): Newton steps with
        it find the mode; without it (or when they stall) L-BFGS does, from every start.

    Returns
    -------
    dict
        ``z`` (k,) the mode; ``covariance`` (k, k) the Laplace posterior covariance ``inv(H)``,
        with ``H`` the likelihood's negative Hessian (eigenvalues below 0 set to 0: a direction
        the likelihood does not curve is left to the prior; ``curvature``) plus the prior
        precision; ``n_clipped`` the eigenvalues set to 0; ``logl``, ``log_prior``, ``log_det``
        (of H); ``nit``, ``success``, ``message`` of the search; ``nfev``, ``n_nan``,
        ``n_invalid``, ``seconds``.
    """
    from scipy import optimize

    start_time = time.perf_counter()
    post = SubjectPosterior(spec, arrays, mean, sd)
    bounds = [(-Z_LIMIT, Z_LIMIT)] * len(mean)
    z, nit, success, message = None, 0, False, ""
    if curvature is not None:
        found, nit, success = _newton(post, np.atleast_2d(starts)[0].astype(np.float64), curvature)
        if success:
            z, message = found, "Newton steps converged"
        else:
            starts = found[None, :]
    if z is None:
        best = None
        with single_threaded_blas():
            for start in np.atleast_2d(starts):
                result = optimize.minimize(post.negative_and_gradient, np.clip(start, -Z_LIMIT, Z_LIMIT), jac=True,
                                           method="L-BFGS-B", bounds=bounds, options=dict(maxiter=500))
                if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
                    best = result
        if best is None:
            return dict(z=None, nfev=post.nfev, n_nan=post.n_nan, n_invalid=post.n_invalid,
                        seconds=time.perf_counter() - start_time)
        z, nit, success, message = np.asarray(best.x, dtype=np.float64), nit + int(best.nit), bool(best.success), \
            str(best.message)
    hessian = -post.likelihood_hessian(z)
    values, vectors = np.linalg.eigh(0.5 * (hessian + hessian.T))
    clipped = int((values < 0).sum())
    curvature = (vectors * np.maximum(values, 0.0)) @ vectors.T
    precision = curvature + np.diag(post.precision)
    covariance = np.linalg.inv(precision)
    logl, prior = log_posterior_terms(spec, arrays, z, mean, sd)
    return dict(
        z=z, covariance=0.5 * (covariance + covariance.T), curvature=curvature, n_clipped=clipped, logl=logl,
        log_prior=prior, log_det=float(np.linalg.slogdet(precision)[1]), nit=nit, success=success,
        message=message, nfev=post.nfev, n_nan=post.n_nan, n_invalid=post.n_invalid,
        seconds=time.perf_counter() - start_time,
    )


#: where a start on a bound is placed on the latent scale (a share of 0.0025 of the range from the
#: bound): L-BFGS from ``Z_LIMIT`` would see a flat prior-free gradient
START_Z = 6.0


def individual_starts(model: ModelSpec, start, labels, all_names) -> tuple[list[np.ndarray], list[str]]:
    """Each subject's latent start from ``start`` (a recall_fit dataset of individual fits of the
    same subjects, e.g. :func:`cmr.fit_recall`'s) and the subjects whose start did not converge."""
    import xarray as xr

    from .textbook.fit import start_points

    if not isinstance(start, xr.Dataset):
        raise ParameterError(f"start must be a recall_fit dataset of individual fits of the same subjects "
                             f"(cmr.fit_recall's); got {type(start).__name__}")
    if "subject" not in start.dims:
        raise ParameterError("start must be a fit per subject (cmr.fit_recall with by='subject'); got a pooled fit")
    points = start_points(model, start, labels, all_names)
    low = np.array([b[0] for b in model.bounds])
    high = np.array([b[1] for b in model.bounds])
    latent = [np.clip(to_latent(x, low, high), -START_Z, START_Z) for x in points]
    unconverged = []
    if "converged" in start:
        verdict = {str(s): bool(c) for s, c in zip(start["subject"].values, start["converged"].values)}
        unconverged = [str(label) for label in labels if not verdict.get(str(label), True)]
    return latent, unconverged


#: latent |mean| beyond which a population mean moving outward is reported as running toward a bound
#: (a median within 5% of the range from it)
BOUND_Z = 3.0

#: what to do, per way a parameter kept moving
NOT_CONVERGED_ADVICE = {
    "bound": "a population mean running toward a bound says most subjects' maxima lie on or near it, at the end "
             "of a ridge the data do not close: fix that parameter at the bound (e.g. fixed={'T': 0.01}) or widen "
             "the bound",
    "shrinking": "a population sd shrinking toward 0 says the data do not separate the subjects on that parameter: "
                 "fix it at the population median (or tie it), or stop earlier with a larger tol",
    "oscillating": "a mean or sd going back and forth says a subject's mode flips between two nearby maxima from "
                   "one iteration to the next: the population is settled to that amplitude; stop with a tol above it",
    "moving": "raise max_iter, or start from converged individual fits (start=cmr.fit_recall(...))",
}


def unconverged_parameters(names, mean_history, sd_history, tol: float, low, high) -> tuple[list[str], list[str]]:
    """The parameters whose population mean or sd still moved by ``tol`` or more in the last iteration,
    each with how it moved, and the kinds of :data:`NOT_CONVERGED_ADVICE` that apply, in that order."""
    if len(mean_history) < 2:
        return [], []
    mean, sd = np.asarray(mean_history[-1]), np.asarray(sd_history[-1])
    mean_step = mean - np.asarray(mean_history[-2])
    sd_step = sd - np.asarray(sd_history[-2])
    recent_mean = np.asarray(mean_history[-5:], dtype=np.float64)
    recent_sd = np.asarray(sd_history[-5:], dtype=np.float64)
    lines, kinds = [], set()
    for i, name in enumerate(names):
        if max(abs(mean_step[i]), abs(sd_step[i])) < tol:
            continue
        median = float(to_natural(mean[i], low[i], high[i]))
        is_sd = abs(sd_step[i]) >= abs(mean_step[i])
        recent = (recent_sd if is_sd else recent_mean)[:, i]
        steps = np.diff(recent)
        if steps.size >= 3 and (steps >= tol).any() and (steps <= -tol).any():
            kinds.add("oscillating")
            what = "sd" if is_sd else "mean (latent)"
            lines.append(f"{name} (population {what} going back and forth between {recent.min():.3g} and "
                         f"{recent.max():.3g} over the last {steps.size} iterations)")
        elif not is_sd and abs(mean[i]) > BOUND_Z and mean_step[i] * mean[i] > 0:
            side, bound = ("lower", low[i]) if mean[i] < 0 else ("upper", high[i])
            kinds.add("bound")
            lines.append(f"{name} (population median {median:.3g}, running toward its {side} bound {bound:g} by "
                         f"{abs(mean_step[i]):.2g} per iteration on the latent scale)")
        elif is_sd:
            direction = "shrinking" if sd_step[i] < 0 else "growing"
            if sd_step[i] < 0 and sd[i] < 0.25:
                kinds.add("shrinking")
            else:
                kinds.add("moving")
            lines.append(f"{name} (population sd {sd[i]:.3g}, {direction} by {abs(sd_step[i]):.2g} per iteration)")
        else:
            kinds.add("moving")
            lines.append(f"{name} (population median {median:.3g}, moving by {abs(mean_step[i]):.2g} per iteration "
                         f"on the latent scale)")
    return lines, [kind for kind in NOT_CONVERGED_ADVICE if kind in kinds]


def first_starts(seed: int, labels, k: int, n_starts: int) -> list[np.ndarray]:
    """Each subject's starts of the first E-step: the first prior's mean, then ``n_starts - 1`` draws from it."""
    mean, sd = np.zeros(k), np.full(k, INITIAL_SD)
    starts = []
    for unit_seed in unit_seeds(seed, list(labels), 1):
        draws = np.random.default_rng(unit_seed[0]).normal(mean, sd, size=(n_starts - 1, k))
        starts.append(np.vstack([mean[None, :], draws]))
    return starts


def e_step(model, labels, subsets, mean, sd, starts, curvatures, *, n_jobs, executor) -> list[dict]:
    """Each subject's posterior mode and Laplace approximation under the prior ``N(mean, sd**2)``."""
    tasks = [(subject_mode, (model, subset, mean, sd, start, curve))
             for subset, start, curve in zip(subsets, starts, curvatures)]
    modes = run_tasks(tasks, n_jobs=n_jobs, executor=executor)
    failed = [str(labels[i]) for i, mode in enumerate(modes) if mode["z"] is None]
    if failed:
        raise ParameterError(f"fit_population: no admissible parameter set found for subject(s) "
                             f"{', '.join(failed[:5])} (every start scored impossible; check ties and bounds)")
    return modes


def m_step(modes, sd) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """The population of the modes: mean, sd (with the Laplace variances, at least ``SD_FLOOR``), the
    modes ``z`` and variances, and the Laplace log marginal likelihood under the prior of sd ``sd``."""
    z = np.array([m["z"] for m in modes])
    variance = np.array([np.diag(m["covariance"]) for m in modes])
    marginal = sum(m["logl"] + m["log_prior"] - np.log(sd).sum() - 0.5 * m["log_det"] for m in modes)
    new_mean = z.mean(axis=0)
    new_sd = np.maximum(np.sqrt(np.mean((z - new_mean) ** 2 + variance, axis=0)), SD_FLOOR)
    return new_mean, new_sd, z, variance, float(marginal)


def expectation_maximisation(model, labels, subsets, starts, *, max_iter, tol, n_jobs, executor, progress) -> dict:
    """E- and M-steps until neither mean nor sd moves by ``tol`` (or ``max_iter``): the last state and the history."""
    from tqdm.auto import tqdm

    mean, sd = np.zeros(model.k), np.full(model.k, INITIAL_SD)
    curvatures = [None] * len(subsets)  # the first iteration searches by L-BFGS from every start
    history = dict(mean=[], sd=[], change=[], marginal=[])
    totals = np.zeros((len(subsets), 4))  # nfev, n_nan, n_invalid, seconds over all iterations
    converged = False
    with tqdm(total=max_iter, desc="fit-population", unit="iteration", disable=not progress) as bar:
        for _ in range(max_iter):
            modes = e_step(model, labels, subsets, mean, sd, starts, curvatures, n_jobs=n_jobs, executor=executor)
            totals += [[m["nfev"], m["n_nan"], m["n_invalid"], m["seconds"]] for m in modes]
            new_mean, new_sd, z, variance, marginal = m_step(modes, sd)
            change = float(max(np.abs(new_mean - mean).max(), np.abs(new_sd - sd).max()))
            history["mean"].append(new_mean)
            history["sd"].append(new_sd)
            history["change"].append(change)
            history["marginal"].append(marginal)
            mean, sd = new_mean, new_sd
            starts = [mode["z"][None, :] for mode in modes]
            curvatures = [mode["curvature"] for mode in modes]
            bar.update(1)
            bar.set_postfix(change=f"{change:.2g}")
            if change < tol:
                converged = True
                break
    return dict(mean=mean, sd=sd, modes=modes, z=z, variance=variance, totals=totals, history=history,
                converged=converged)
