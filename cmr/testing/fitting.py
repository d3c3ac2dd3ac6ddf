"""Invariants of maximum-likelihood fitters: properties any fit of recall data must have.

:func:`check_fitter` runs a fitter (a callable ``fitter(events, spec, start=None) ->
recall_fit``, e.g. :func:`cmr.fit_recall` with its search options bound) on some events and
raises one ``AssertionError`` that reports every failure of:

``restarts``
    A unit's maximum is its best restart: ``logl`` is at least every ``restart_logl``,
    ``best_restart`` points at the best one and ``value`` is that restart's.
``verdict``
    ``converged`` is exactly "the best two restarts lie within ``convergence_tolerance``"
    (``logl_gap``), and is False for a unit of one restart.
``start``
    Searched from another fit's estimates (``start=``), the fit is never below the likelihood
    there, e.g. a population fit's shrunk estimates (:func:`cmr.fit_population`).
``nested``
    A model fitted from the estimates of a model nested in it (its extra parameters at the
    values the nested one fixes: semantic CMR with ``Scf = Sff = 0`` is textbook CMR) is
    never fitted worse than the nested model.

The checks read only the fits, so they apply to any fitter that writes a ``recall_fit``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FIT_CHECKS", "check_fit", "check_not_below", "check_fitter", "LOGL_SLACK"]

FIT_CHECKS = ("restarts", "verdict", "start", "nested")

#: log-likelihoods compared across fits may differ by rounding of the likelihood sums
LOGL_SLACK = 1e-6


def _per_unit(fits, name) -> np.ndarray:
    return np.atleast_1d(np.asarray(fits[name].values, dtype=np.float64))


def _labels(fits) -> list[str]:
    return [str(s) for s in fits["subject"].values] if "subject" in fits.dims else ["pooled"]


def check_fit(fits) -> list[str]:
    """Failures of the ``restarts`` and ``verdict`` checks of one recall_fit (empty: none)."""
    failures = []
    logl = _per_unit(fits, "logl")
    restart = np.atleast_2d(np.asarray(fits["restart_logl"].values, dtype=np.float64))
    finite = np.where(np.isfinite(restart), restart, -np.inf)
    labels = _labels(fits)
    best = np.atleast_1d(np.asarray(fits["best_restart"].values))
    for i, label in enumerate(labels):
        if logl[i] < finite[i].max() - LOGL_SLACK:
            failures.append(f"[restarts] unit {label}: logl {logl[i]:.6f} below its best restart {finite[i].max():.6f}")
        if finite[i, best[i]] < finite[i].max() - LOGL_SLACK:
            failures.append(f"[restarts] unit {label}: best_restart {best[i]} is not the best restart")
    value = np.asarray(fits["value"].values, dtype=np.float64).reshape(len(labels), -1)
    chosen = np.asarray(fits["restart_value"].values, dtype=np.float64).reshape(len(labels), restart.shape[1], -1)
    for i, label in enumerate(labels):
        if not np.allclose(value[i], chosen[i, best[i]], equal_nan=True):
            failures.append(f"[restarts] unit {label}: value is not its best restart's")
    if "converged" in fits:
        tolerance = float(fits.attrs["convergence_tolerance"])
        converged = np.atleast_1d(np.asarray(fits["converged"].values, dtype=bool))
        gap = _per_unit(fits, "logl_gap")
        for i, label in enumerate(labels):
            ordered = np.sort(finite[i][np.isfinite(finite[i])])
            expected_gap = ordered[-1] - ordered[-2] if ordered.size >= 2 else np.nan
            if not (np.isclose(gap[i], expected_gap) or (np.isnan(gap[i]) and np.isnan(expected_gap))):
                failures.append(f"[verdict] unit {label}: logl_gap {gap[i]} is not best minus second best "
                                f"({expected_gap})")
            expected = bool(np.isfinite(expected_gap) and expected_gap <= tolerance)
            if converged[i] != expected:
                failures.append(f"[verdict] unit {label}: converged {bool(converged[i])} with logl_gap {gap[i]:.4g} "
                                f"and tolerance {tolerance:g}")
    return failures


def check_not_below(fits, reference, check: str) -> list[str]:
    """Failures of ``fits`` scoring below ``reference`` (another fit of the same units) per unit."""
    logl, other = _per_unit(fits, "logl"), _per_unit(reference, "logl")
    return [f"[{check}] unit {label}: logl {a:.6f} below the {check} fit's {b:.6f}"
            for label, a, b in zip(_labels(fits), logl, other) if a < b - LOGL_SLACK]


def check_fitter(fitter, events, spec, *, nested_spec=None, start=None) -> None:
    """Run ``fitter`` and check every invariant that applies; one AssertionError reports all failures.

    Parameters
    ----------
    fitter : callable
        ``fitter(events, spec, start=None) -> recall_fit`` dataset (e.g. ``functools.partial(
        cmr.fit_recall, progress=False)``).
    events : events dataset or table
    spec : FitSpec or CMR2FitSpec
        The model fitted.
    nested_spec : optional
        A model nested in ``spec`` (``spec``'s extra free parameters fixed at the values that
        make the two equal): fitted first, its fit is ``spec``'s start (``nested``).
    start : recall_fit dataset, optional
        Other estimates of the same units (e.g. :func:`cmr.fit_population`'s): ``spec`` is
        fitted from them too and must not score below the likelihood there (``start``).
    """
    failures = []
    fits = fitter(events, spec)
    failures += check_fit(fits)
    if start is not None:
        from_start = fitter(events, spec, start=start)
        failures += check_fit(from_start) + check_not_below(from_start, start, "start")
    if nested_spec is not None:
        nested = fitter(events, nested_spec)
        larger = fitter(events, spec, start=nested)
        failures += check_fit(nested) + check_fit(larger) + check_not_below(larger, nested, "nested")
    if failures:
        raise AssertionError(f"{len(failures)} fitter invariant(s) failed:\n  " + "\n  ".join(failures))
