"""What not to trust silently in a recall fit: estimates at a bound, units with few scored
events, units whose restarts did not converge. One line for a warning or a command's summary.

The convergence verdict is made here for every family's fitter (textbook CMR, CMR2, networks,
population fits): :func:`convergence_variables` turns each unit's restarts into ``n_restarts``,
``logl_gap``, ``logl_spread`` and ``converged``; :func:`convergence_summary` names the units
that did not converge; :func:`warn_fit` warns the line as a :class:`~cmr.errors.FitWarning`."""
from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from ..constants import CONVERGENCE_TOLERANCE, MIN_EVENTS_PER_PARAMETER
from ..errors import FitWarning
from ..schema import require_variables
from ._optimize import has_converged, logl_gap

__all__ = ["flag_summary", "convergence_summary", "convergence_variables", "warn_fit", "listed"]


#: subjects named in a flag line before "and N more"
_SHOWN = 5


def listed(items: list[str]) -> str:
    """The first few items, comma separated, then "and N more"."""
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def flag_summary(fits: xr.Dataset) -> str:
    """One line on the estimates of a recall fit not to trust silently; ``""`` when none is flagged.

    Names the estimates at a search bound (``at_bound``: parameter, which bound, which subjects),
    the units with fewer scored events per free parameter than the fit's
    ``min_events_per_parameter`` (``few_events``: events and free parameters) and the units
    whose best two restarts differ by more than the fit's ``convergence_tolerance``
    (``converged``; a fit of one restart per unit is not checked), e.g. ``"3 of 110 estimates
    at a bound (T at its lower bound 0.01 for subjects 4, 9, 17); 1 subject with fewer than 10
    scored events per free parameter (subject 2: 41 events, 10 free); 1 of 11 subjects not
    converged: best two restarts more than 0.1 log units apart (subject 3: 7.61 apart after 8
    restarts)"``.
    """
    require_variables(fits, ["value", "n", "free", "lower", "upper", "at_bound", "few_events"], "recall_fit")
    pooled = "subject" not in fits["value"].dims
    order = ("parameter",) if pooled else ("subject", "parameter")
    n_params = fits.sizes["parameter"]
    at_bound = np.asarray(fits["at_bound"].transpose(*order).values, dtype=bool).reshape(-1, n_params)
    value = fits["value"].transpose(*order).values.reshape(-1, n_params)
    labels = ["pooled"] if pooled else [str(label) for label in fits["subject"].values]
    k = int(np.asarray(fits["free"].values).sum())
    parts = []
    if at_bound.any():
        groups = []
        for j, name in enumerate(str(p) for p in fits["parameter"].values):
            lower, upper = float(fits["lower"].values[j]), float(fits["upper"].values[j])
            nearer_lower = value[:, j] - lower <= upper - value[:, j]
            for side, bound, hit in (("lower", lower, at_bound[:, j] & nearer_lower),
                                     ("upper", upper, at_bound[:, j] & ~nearer_lower)):
                if hit.any():
                    named = [label for label, h in zip(labels, hit) if h]
                    where = "" if pooled else f" for {'subject' if len(named) == 1 else 'subjects'} {listed(named)}"
                    groups.append(f"{name} at its {side} bound {bound:g}{where}")
        parts.append(f"{int(at_bound.sum())} of {_plural(k * len(labels), 'estimate')} at a bound "
                     f"({'; '.join(groups)})")
    few = np.atleast_1d(np.asarray(fits["few_events"].values, dtype=bool))
    if few.any():
        floor = int(fits.attrs.get("min_events_per_parameter", MIN_EVENTS_PER_PARAMETER))
        events = np.atleast_1d(np.asarray(fits["n"].values))
        if pooled:
            parts.append(f"the pooled fit has fewer than {floor} scored events per free parameter "
                         f"({int(events[0])} events, {k} free)")
        else:
            named = [f"subject {label}: {int(count)} events" for label, count, f in zip(labels, events, few) if f]
            parts.append(f"{_plural(len(named), 'subject')} with fewer than {floor} scored events per free "
                         f"parameter ({listed(named)}, {k} free)")
    verdict = convergence_summary(fits)
    if verdict:
        parts.append(verdict)
    return "; ".join(parts)


def convergence_variables(logls, *, tolerance: float = CONVERGENCE_TOLERANCE) -> dict[str, np.ndarray]:
    """The convergence verdict of each unit from its restarts' log-likelihoods (``logls``: one list per unit).

    Returns ``n_restarts`` (int64), ``logl_gap`` (best minus second-best restart, NaN with fewer
    than two), ``logl_spread`` (best minus worst finite restart, NaN with fewer than two) and
    ``converged`` (``logl_gap`` within ``tolerance``; False with one restart), one value per unit.
    """
    logls = [list(unit) for unit in logls]
    finite = [[v for v in unit if np.isfinite(v)] for unit in logls]
    return {
        "n_restarts": np.array([len(unit) for unit in logls], dtype=np.int64),
        "logl_gap": np.array([logl_gap(unit) for unit in logls], dtype=np.float64),
        "logl_spread": np.array([max(u) - min(u) if len(u) >= 2 else np.nan for u in finite], dtype=np.float64),
        "converged": np.array([has_converged(unit, tolerance) for unit in logls], dtype=bool),
    }


def warn_fit(caller: str, summary: str, see: str, *, stacklevel: int = 2) -> None:
    """Warn ``"{caller}: {summary}; {see}"`` as a FitWarning at the fitter's caller, when ``summary`` says anything.

    ``stacklevel`` counts as :func:`warnings.warn`'s does from the fitter (2: the fitter's caller).
    """
    if summary:
        warnings.warn(f"{caller}: {summary}; {see}", FitWarning, stacklevel=stacklevel + 1)


def convergence_summary(fits: xr.Dataset) -> str:
    """The units whose best two restarts differ by more than the fit's ``convergence_tolerance``; ``""`` when none.

    Units of a single restart are not named (nothing to compare), nor are fits without the
    ``converged`` variable (written before it existed). The units are the ``converged``
    variable's dim (``subject``, or a network fit's ``unit``); none, or attrs ``by="pooled"``: the
    pooled fit.
    """
    if not {"converged", "logl_gap", "n_restarts"} <= set(fits.data_vars):
        return ""
    converged = np.atleast_1d(np.asarray(fits["converged"].values, dtype=bool))
    ran = np.atleast_1d(np.asarray(fits["n_restarts"].values))
    gap = np.atleast_1d(np.asarray(fits["logl_gap"].values, dtype=np.float64))
    failed = ~converged & (ran >= 2)
    if not failed.any():
        return ""
    tolerance = float(fits.attrs.get("convergence_tolerance", CONVERGENCE_TOLERANCE))
    dims = fits["converged"].dims  # ("subject",), a network fit's ("unit",), or () when pooled
    if not dims or fits.attrs.get("by") == "pooled":
        return (f"the pooled fit did not converge: best two restarts {gap[0]:.3g} log units apart after "
                f"{int(ran[0])} restarts (tolerance {tolerance:g})")
    labels = [str(label) for label in fits[dims[0]].values]
    named = [f"subject {label}: {g:.3g} apart after {int(r)} restarts"
             for label, g, r, f in zip(labels, gap, ran, failed) if f]
    return (f"{int(failed.sum())} of {_plural(len(labels), 'subject')} not converged: best two restarts more than "
            f"{tolerance:g} log units apart ({listed(named)})")
