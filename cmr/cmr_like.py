"""What "CMR-like" means: the study's definition and a strict one beside it.

The study calls a unit CMR-like when its CMR distance ``d`` is below 0.5
(:data:`cmr.constants.CMR_LIKE_DISTANCE`); :func:`cmr.null_models.cmr_like_null` adds that ``d``
must beat both structureless nulls (``p_value <= alpha``). That is the **study's** definition
here. The distance divides by the unit's own variance, so it is blind to amplitude and to
direction: a head that hardly attends to the list, a symmetric peak at lag 0 (a duplicate-token
head) and a 3% forward lean all pass it. The **strict** definition adds three criteria:

1. **attention mass**: the head's attention probability mass on lags -5..5 (post-softmax
   probabilities, never pre-softmax scores) is at least :data:`cmr.constants.STRICT_MASS_RATIO`
   times the mass uniform attention over the visible keys would put there
   (:func:`uniform_attention_prob`). Recall lag-CRPs have no attention: the criterion is *not
   applicable* to them, and is recorded so; a head dataset without probabilities (the study's
   published profiles hold scores only) leaves it *not available*, also recorded.
2. **forward effect**: ``(y(+1) - y(-1)) / (max y - min y)`` over the fitting window
   (:func:`forward_effect`, free of offset and gain like the fit) is at least
   :data:`cmr.constants.STRICT_FORWARD_EFFECT`, and, where the unit has a ``sem``, lag +1 is
   above lag -1 beyond the unit's sampling error (``p_asymmetry <= alpha``).
3. **mirror**: the profile with its lags reversed is *not* CMR-like beyond chance, while the
   profile is. The mirrored profile has the unit's values and roughness, so the unit's own
   permuted-lag and smooth null profiles are its nulls too; its ``p_mirror`` (the larger of its
   two p-values, as ``p_value``) must exceed ``alpha``. So ``d`` lies below both nulls' alpha
   quantiles and the mirror's distance above at least one of them. A symmetric profile is its own mirror and fails.

See docs/null-models.md for the rules, constants and the shares under both definitions.
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .constants import PAPER_LAGS
from .deprecation import keyword_only
from .errors import ParameterError

__all__ = [
    "MASS_APPLIED",
    "uniform_attention_prob",
    "attention_mass",
    "profile_amplitude",
    "forward_effect",
    "mirror_order",
    "mirrored_profiles",
]

#: ``mass_criterion`` attr of a null when the attention-mass floor was applied
MASS_APPLIED = "applied"

#: profile kinds that are attention: the mass criterion applies to them
_ATTENTION_KINDS = ("attention_score", "attention_prob", "soft_lag_crp")


@keyword_only
def uniform_attention_prob(n_words: int, *, lags=PAPER_LAGS, n_prefix: int = 1) -> np.ndarray:
    """Probability uniform attention gives one key at each lag of a repeated-list head profile.

    The prompt is ``n_prefix`` tokens (a BOS), a list of ``n_words`` words and the same list
    again (docs/heads.md). The query at second-copy index ``k`` (0-based) sits at position
    ``n_prefix + n_words + k`` and sees ``n_prefix + n_words + k + 1`` keys, itself included;
    the profile at lag ``l`` averages over the queries whose key ``k + l`` lies in the first
    copy, ``0 <= k + l < n_words``. So the uniform level at lag ``l`` is the mean of
    ``1 / (n_prefix + n_words + k + 1)`` over those ``k``; summed over lags -5..5 it is about
    0.075 for 100 words.

    Parameters
    ----------
    n_words : int
        Words per list (at least 1).
    lags : sequence of int
        Lags, each with ``|lag| < n_words``.
    n_prefix : int
        Tokens before the first copy (1: the BOS).

    Returns
    -------
    numpy.ndarray of float64, (len(lags),)
    """
    from .checks import integer

    n_words = integer(n_words, "n_words", minimum=1)
    n_prefix = integer(n_prefix, "n_prefix", minimum=0)
    lags = np.asarray(lags, dtype=np.int64).ravel()
    if lags.size and np.abs(lags).max() >= n_words:
        raise ParameterError(f"every lag must satisfy |lag| < n_words = {n_words}; got lags {lags.tolist()}")
    k = np.arange(n_words)
    level = 1.0 / (n_prefix + n_words + k + 1.0)
    out = np.empty(lags.size)
    for i, lag in enumerate(lags.tolist()):
        out[i] = level[max(0, -lag):min(n_words, n_words - lag)].mean()
    return out


def _n_words(profiles: xr.Dataset):
    """Words per list recorded in the attrs or the provenance of a head dataset, or None."""
    value = profiles.attrs.get("n_words")
    if value is None:
        try:
            value = json.loads(profiles.attrs.get("provenance", "{}")).get("n_words")
        except (ValueError, TypeError, AttributeError):
            value = None
    try:
        return int(value) if value is not None and int(value) == float(value) and int(value) > 0 else None
    except (TypeError, ValueError):
        return None


def _is_attention(profiles: xr.Dataset) -> bool:
    kind = str(profiles.attrs.get("profile_kind", ""))
    return (kind in _ATTENTION_KINDS or profiles.attrs.get("unit_kind") == "heads"
            or {"layer", "head"} <= set(profiles.dims))


@keyword_only
def attention_mass(profiles: xr.Dataset, *, lags=PAPER_LAGS):
    """Attention probability mass on ``lags`` of every head, and the uniform level of that mass.

    Parameters
    ----------
    profiles : xarray.Dataset
        A ``lag_profile`` dataset. Read, in this order: head-only variables ``attention_mass``
        and ``uniform_mass`` (as :func:`icl_cmr.adapters.head_profiles.head_profile_dataset`
        writes them); else ``prob_profile`` (or ``profile`` when ``profile_kind`` is
        ``attention_prob``) summed over ``lags``, with the uniform level from the list length
        ``n_words`` in the attrs or provenance (:func:`uniform_attention_prob`).
    lags : sequence of int
        The mass window (the study's -5..5).

    Returns
    -------
    (mass, uniform, status)
        ``mass`` and ``uniform``: xarray.DataArray over the unit dims (None when the criterion
        does not apply); ``status``: :data:`MASS_APPLIED`, or a sentence starting with
        ``"not applicable"`` (recall data: no attention) or ``"not available"`` (attention without
        probabilities, or without the list length).
    """
    if "attention_mass" in profiles and "uniform_mass" in profiles:
        return profiles["attention_mass"], profiles["uniform_mass"], MASS_APPLIED
    if not _is_attention(profiles):
        return None, None, "not applicable: recall lag-CRPs have no attention probabilities"
    if "prob_profile" in profiles:
        name = "prob_profile"
    elif profiles.attrs.get("profile_kind") == "attention_prob" and "profile" in profiles:
        name = "profile"
    else:
        return None, None, "not available: the head profiles hold no attention probabilities (prob_profile)"
    lags = [int(v) for v in lags]
    present = set(np.asarray(profiles[name]["lag"].values).tolist())
    if not set(lags) <= present:
        return None, None, f"not available: {name} does not cover lags {lags[0]}..{lags[-1]}"
    n_words = _n_words(profiles)
    if n_words is None:
        return None, None, "not available: the list length n_words is not recorded in the head dataset"
    mass = profiles[name].sel(lag=lags).sum("lag", skipna=False)
    uniform = xr.full_like(mass, float(uniform_attention_prob(n_words, lags=lags).sum()))
    return mass, uniform, MASS_APPLIED


def profile_amplitude(values) -> np.ndarray:
    """Range ``max - min`` of profiles along the last axis (the amplitude the CMR distance ignores)."""
    values = np.asarray(values, dtype=np.float64)
    return values.max(axis=-1) - values.min(axis=-1)


def forward_effect(values, lags) -> np.ndarray:
    """Forward asymmetry as an effect size: ``(y(+1) - y(-1)) / (max y - min y)`` along the last axis.

    ``lags`` label the last axis and must include -1 and +1. Free of offset and gain (so it reads
    the profile as the fit's affine map does); between -1 and 1; NaN for a constant profile.
    """
    lags = [int(v) for v in np.asarray(lags).ravel()]
    if 1 not in lags or -1 not in lags:
        raise ParameterError(f"the forward effect needs lags -1 and +1; got lags {lags}")
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (values[..., lags.index(1)] - values[..., lags.index(-1)]) / profile_amplitude(values)


def mirror_order(lags):
    """Column order that reverses a profile's lags (``y_mirrored(l) = y(-l)``), or None.

    None when the lags are not symmetric about 0 (the mirror of the profile would leave the
    window).
    """
    lags = [int(v) for v in np.asarray(lags).ravel()]
    if sorted(-lag for lag in lags) != sorted(lags):
        return None
    return np.array([lags.index(-lag) for lag in lags], dtype=np.int64)


def mirrored_profiles(profiles: xr.Dataset) -> xr.Dataset:
    """A copy of a lag-profile dataset with every lag reversed: ``y_mirrored(l) = y(-l)``.

    Variables along ``lag`` (profile, sem, counts) move with their lag; the rest and the attrs
    are kept. The lags come out increasing, as the schema wants. Mirroring twice gives the
    dataset back.
    """
    if "lag" not in profiles.coords:
        raise ParameterError("mirrored_profiles needs a dataset with a lag coordinate")
    return profiles.assign_coords(lag=-profiles["lag"]).sortby("lag")
