"""One scale for beta: the paper's variant and textbook CMR, matched on context decay.

The two models call different things beta. Textbook CMR (Polyn, Norman & Kahana 2009; cymr)
updates ``c <- rho c + beta c_in`` with unit norm, so for an input orthogonal to the context the
old content decays by ``rho = sqrt(1 - beta^2)`` per update. The paper's variant (Ji-An et al.
2024) stores item ``i`` in the context of item ``j`` with weight ``(1 - beta_enc)^(j-i-1)``: a
decay of ``1 - beta_enc`` per studied item; at recall it updates
``t <- ((1 - beta_rec) t + beta_rec t_in) / norm``, so for an orthogonal input the old content
decays by ``(1 - beta_rec) / sqrt((1 - beta_rec)^2 + beta_rec^2)`` per recall.

Matched on that decay (the trace of an earlier item shrinks by the same factor per step):

    beta_enc (textbook) = sqrt(1 - (1 - beta_enc)^2)
    beta_rec (textbook) = beta_rec / sqrt(beta_rec^2 + (1 - beta_rec)^2)

Both maps are increasing bijections of [0, 1] with 0 -> 0 and 1 -> 1. Compare fitted heads
(the paper's variant) and human fits (textbook) only on one scale; see docs/fitting.md.

The recall map assumes ``t_in`` orthogonal to ``t``; in the variant it is not (``t_in`` carries
``gamma`` of the recalled item's preceding contexts, which the context still holds).
:func:`textbook_beta_rec` is the exact map. For unit ``t`` and ``t_in`` with overlap
``x = t . t_in`` both updates give a unit vector in the plane of ``t`` and ``t_in``, and they give
the same vector exactly when

    beta (textbook) = beta_rec / sqrt((1 - beta_rec)^2 + beta_rec^2 + 2 beta_rec (1 - beta_rec) x)

(``x = 0`` is the orthogonal formula above). ``x`` changes from recall to recall, so one
textbook beta_rec cannot match every step; :func:`textbook_beta_rec` gives the one whose
context drift ``1 - c_k . c_(k-1)``, averaged over the recalls of a teacher-forced list (study
order, as for the teacher-forced profiles), equals the variant's, both driven by the variant's
inputs ``t_in``; :func:`recall_drift` gives the per-recall overlaps.
"""
from __future__ import annotations

import numpy as np

from . import deprecation
from .checks import integer
from .deprecation import keyword_only
from .errors import ParameterError

__all__ = ["context_decay", "textbook_beta", "paper_beta", "textbook_beta_rec", "recall_drift", "PHASES", "MODELS"]

#: which update a beta drives: study (encoding) or recall (retrieval)
PHASES = ("enc", "rec")
#: the models whose beta scales are matched
MODELS = ("paper", "textbook")


def _check(beta, phase):
    if phase not in PHASES:
        raise ParameterError(f"phase must be 'enc' or 'rec'; got {phase!r}")
    values = np.asarray(beta, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if ((finite < 0.0) | (finite > 1.0)).any():
        raise ParameterError(f"beta must lie in [0, 1] (NaN passes through); got values from {finite.min()} to {finite.max()}")
    return values


def _wrap(like, values):
    """Same type as the input: a scalar for a scalar, an array for an array (xarray keeps its coords)."""
    if hasattr(like, "copy") and hasattr(like, "dims"):
        out = like.copy(data=values)
        return out
    return float(values) if np.ndim(values) == 0 else values


def context_decay(beta, model: str = "paper", phase: str = "enc"):
    """Factor by which the context's earlier content shrinks per update (orthogonal input).

    ``model="textbook"``: ``sqrt(1 - beta^2)`` in both phases. ``model="paper"`` (the paper's
    CMR, Ji-An et al. 2024): ``1 - beta`` at study, ``(1 - beta) / sqrt((1 - beta)^2 + beta^2)``
    at recall. The old name ``model="variant"`` still works, with a DeprecationWarning.
    """
    if model == "variant":
        deprecation.warn("context_decay(model='variant') is deprecated and will be removed in the next release; "
                        "use model='paper'")
        model = "paper"
    values = _check(beta, phase)
    if model == "textbook":
        return _wrap(beta, np.sqrt(1.0 - values**2))
    if model != "paper":
        raise ParameterError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    if phase == "enc":
        return _wrap(beta, 1.0 - values)
    return _wrap(beta, (1.0 - values) / np.sqrt((1.0 - values) ** 2 + values**2))


@keyword_only
def textbook_beta(beta, *, phase: str = "enc"):
    """Textbook CMR's beta with the same context decay as the paper's variant's ``beta``.

    Parameters
    ----------
    beta : float, array or xarray.DataArray in [0, 1]
        ``beta_enc`` (``phase="enc"``) or ``beta_rec`` (``phase="rec"``) of the paper's variant.

    Returns
    -------
    The decay-matched textbook value, same shape and type (NaN stays NaN).
    """
    decay = np.asarray(context_decay(beta, "paper", phase), dtype=np.float64)
    return _wrap(beta, np.sqrt(np.clip(1.0 - decay**2, 0.0, 1.0)))


@keyword_only
def paper_beta(beta, *, phase: str = "enc"):
    """The paper's variant's beta with the same context decay as textbook CMR's ``beta`` (inverse of :func:`textbook_beta`)."""
    decay = np.asarray(context_decay(beta, "textbook", phase), dtype=np.float64)
    if phase == "enc":
        return _wrap(beta, 1.0 - decay)
    # (1 - b) / sqrt((1 - b)^2 + b^2) = decay  <=>  b = s / (s + decay) with s = sqrt(1 - decay^2)
    s = np.sqrt(np.clip(1.0 - decay**2, 0.0, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return _wrap(beta, np.where(s + decay > 0, s / (s + decay), np.nan))


def recall_drift(beta_enc, beta_rec, gamma, *, n_items: int = 20, model: str = "paper"):
    """Overlaps ``c_k . c_(k-1)`` of the context across the recalls of a teacher-forced list.

    The list of ``n_items`` is recalled in study order (items 1..n_items-1 after a start
    context one-hot at item 0, as the teacher-forced profiles do); recalling item k gives the
    paper's variant's input ``t_in = ((1 - gamma) f_k + gamma M f_k) / norm`` with
    ``(M f_k)[i] = (1 - beta_enc)^(k-1-i)`` for ``i < k``. ``model="paper"``: the variant's update
    ``t <- ((1 - beta_rec) t + beta_rec t_in) / norm``. ``model="textbook"``: textbook CMR's
    update ``c <- rho c + beta_rec t_in`` (unit norm) with the same inputs; ``beta_rec`` is then
    on the textbook scale.

    Parameters
    ----------
    beta_enc, beta_rec, gamma : float or array in [0, 1]
        Broadcast against each other.
    n_items : int
        List length (at least 2; the study's lists have 20 items).

    Returns
    -------
    overlap, input_overlap : numpy arrays of shape ``broadcast + (n_items - 1,)``
        ``c_k . c_(k-1)`` and ``c_(k-1) . t_in,k`` at recalls k = 1..n_items-1.
    """
    if model not in MODELS:
        raise ParameterError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    a, b, g, shape, n_items = _recall_arguments(beta_enc, beta_rec, gamma, n_items)
    drift, x = _drift(a, b, g, n_items, model)
    return (1.0 - drift).reshape(shape + (n_items - 1,)), x.reshape(shape + (n_items - 1,))


def textbook_beta_rec(beta_enc, beta_rec, gamma, *, n_items: int = 20):
    """Textbook CMR's beta_rec with the same context drift at recall as the paper's variant.

    "Same": the mean over recalls k = 1..n_items-1 of ``1 - c_k . c_(k-1)`` for a teacher-forced
    list (:func:`recall_drift`) is equal for the variant at ``(beta_enc, beta_rec, gamma)`` and
    for the textbook update with the returned beta_rec, both fed the variant's inputs. Found by
    bisection (the textbook drift rises with its beta_rec) to 1e-15 in beta, vectorised
    over the broadcast parameters. At ``gamma = 0`` and ``beta_enc = 1`` the input is orthogonal
    to the context and the map equals :func:`textbook_beta` (``phase="rec"``).

    Returns
    -------
    float or numpy array (the broadcast shape) in [0, 1].
    """
    a, b, g, shape, n_items = _recall_arguments(beta_enc, beta_rec, gamma, n_items)
    target = _drift(a, b, g, n_items, "paper")[0].mean(axis=1)
    low, high = np.zeros_like(b), np.ones_like(b)
    # the bracket halves each round: 1e-15 within 50 rounds
    for _ in range(60):
        if np.all(high - low <= 1e-15):
            break
        middle = 0.5 * (low + high)
        above = _drift(a, middle, g, n_items, "textbook")[0].mean(axis=1) > target
        high = np.where(above, middle, high)
        low = np.where(above, low, middle)
    out = np.where(b <= 0.0, 0.0, np.where(b >= 1.0, 1.0, 0.5 * (low + high)))  # both ends exact
    out = np.where(np.isnan(b) | np.isnan(a) | np.isnan(g), np.nan, out).reshape(shape)
    return float(out) if out.ndim == 0 else out


def _recall_arguments(beta_enc, beta_rec, gamma, n_items):
    n_items = integer(n_items, "n_items", minimum=2)
    values = []
    for name, value in (("beta_enc", beta_enc), ("beta_rec", beta_rec), ("gamma", gamma)):
        try:
            value = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be a number or an array of numbers in [0, 1]; got {value!r}") from None
        finite = value[np.isfinite(value)]
        if ((finite < 0.0) | (finite > 1.0)).any():
            raise ParameterError(f"{name} must lie in [0, 1] (NaN passes through); got values from {finite.min()} to "
                                 f"{finite.max()}")
        values.append(value)
    try:
        enc, rec, gam = np.broadcast_arrays(*values)
    except ValueError:
        raise ParameterError(f"beta_enc, beta_rec and gamma must broadcast together; got shapes "
                             f"{', '.join(str(np.shape(v)) for v in values)}") from None
    shape = enc.shape
    return 1.0 - enc.ravel(), rec.ravel().copy(), gam.ravel().copy(), shape, n_items


def _drift(a, beta, gamma, n_items, model):
    """Per-recall drift ``1 - c_k . c_(k-1)`` and input overlap ``x``, shape (n_points, n_items - 1).

    The drift is computed as ``B^2 (1 - x^2) / (N (N + (1 - B) + B x))`` (paper) or
    ``beta^2 (1 - x^2) / (1 + sqrt(1 - beta^2 (1 - x^2)))`` (textbook), not as one minus an
    overlap near 1, so small betas keep their precision.
    """
    n_points = a.size
    context = np.zeros((n_points, n_items))
    context[:, 0] = 1.0
    back = np.zeros((n_points, n_items))  # M f_k: a^(k-1-i) at i < k
    drift = np.empty((n_points, n_items - 1))
    overlap_in = np.empty((n_points, n_items - 1))
    for k in range(1, n_items):
        back[:, :k] *= a[:, None]
        back[:, k - 1] = 1.0
        raw = gamma[:, None] * back
        raw[:, k] += 1.0 - gamma
        t_in = raw / np.sqrt((raw**2).sum(axis=1))[:, None]
        x = np.clip((context * t_in).sum(axis=1), 0.0, 1.0)  # both non-negative unit vectors
        if model == "paper":
            norm = np.sqrt((1.0 - beta) ** 2 + beta**2 + 2.0 * beta * (1.0 - beta) * x)
            keep, take = (1.0 - beta) / norm, beta / norm
            step = beta**2 * (1.0 - x**2) / (norm * (norm + 1.0 - beta + beta * x))  # norm >= sqrt(1/2)
        else:
            root = np.sqrt(1.0 - beta**2 * (1.0 - x**2))
            keep, take = root - beta * x, beta
            step = beta**2 * (1.0 - x**2) / (1.0 + root)
        context = keep[:, None] * context + take[:, None] * t_in
        drift[:, k - 1] = step
        overlap_in[:, k - 1] = x
    return drift, overlap_in


variant_beta = deprecation.renamed("variant_beta", paper_beta)
