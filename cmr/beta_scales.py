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
"""
from __future__ import annotations

import numpy as np

from . import _deprecate
from .errors import ParameterError

__all__ = ["context_decay", "textbook_beta", "paper_beta", "PHASES", "MODELS"]

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
        _deprecate.warn("context_decay(model='variant') is deprecated and will be removed in the next release; "
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


def textbook_beta(beta, phase: str = "enc"):
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


def paper_beta(beta, phase: str = "enc"):
    """The paper's variant's beta with the same context decay as textbook CMR's ``beta`` (inverse of :func:`textbook_beta`)."""
    decay = np.asarray(context_decay(beta, "textbook", phase), dtype=np.float64)
    if phase == "enc":
        return _wrap(beta, 1.0 - decay)
    # (1 - b) / sqrt((1 - b)^2 + b^2) = decay  <=>  b = s / (s + decay) with s = sqrt(1 - decay^2)
    s = np.sqrt(np.clip(1.0 - decay**2, 0.0, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return _wrap(beta, np.where(s + decay > 0, s / (s + decay), np.nan))


variant_beta = _deprecate.renamed("variant_beta", paper_beta)
