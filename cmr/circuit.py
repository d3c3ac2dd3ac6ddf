"""CMR built as attention: a two-layer circuit over a cache of past (item, context) pairs.

Ji-An et al. (2024, section "CMR as an induction head") map CMR onto a transformer circuit;
:func:`attention_circuit` builds that circuit from its parts and runs it, token by token,
over a studied list and a forced recall sequence:

* the residual stream of a token holds its item vector ``f`` (one-hot) and a context ``t``;
* layer 1, the word-to-context matrix ``M_fc`` as a linear "duplicate token" head: query
  ``f_k``, keys ``f_j`` of the studied tokens, values their contexts (scaled by ``Lfc``, or
  ``gamma`` in the paper's variant); the pre-experimental ``M_fc`` is a fully connected layer
  on ``f`` added to the head's output;
* the context update ``t_k = rho t_{k-1} + beta t_in`` is the residual update (normalised
  input, CMR's ``rho`` keeps the context at unit length);
* layer 2, the context-to-word matrix ``M_cf`` as a linear induction head: query ``t_k``,
  keys the studied contexts (scaled by the primacy gain ``Lcf_j``), values ``f_j``; the
  pre-experimental ``M_cf`` is a fully connected read-out of ``t_k`` added to the scores.

Layer 2's attention score over the studied items is CMR's retrieval support ``a = M_cf t``
and its softmax with inverse temperature ``2/T`` (textbook) or its normalisation (the study's
variant, linear) is CMR's recall probability. The variants differ in which context keys an
item: textbook CMR (cymr) stores ``t_j``, the context *after* item j was studied; the study's
variant stores ``t_{j-1}``, the context *before* it (prefix matching, as an induction head).
CMR does not learn during recall, so the cache holds the studied tokens only. docs/circuit.md
gives the mapping table and the equations; a property test checks the scores against
:func:`cmr.record_states` and the teacher-forced grids to 1e-10.
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .checks import integer
from .errors import ParameterError, RecallDataError
from .paper.simulate import check_parameters
from .schema import provenance_attrs, validate
from .textbook import _kernels as textbook_kernels
from .textbook.parameters import PARAMETER_NAMES, default_parameters, validate_parameters

__all__ = ["CIRCUIT_VARIANTS", "attention_circuit"]

CIRCUIT_VARIANTS = ("textbook", "paper")


def _recall_positions(recalls, n: int) -> np.ndarray:
    """Forced recalls as 0-based positions (default: the study order 1..n); distinct, in range."""
    if recalls is None:
        return np.arange(n, dtype=np.int64)
    arr = np.asarray(recalls)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise RecallDataError(f"recalls must be a non-empty 1-d sequence of serial positions 1..{n}; got {recalls!r}")
    if arr.min() < 1 or arr.max() > n:
        raise RecallDataError(f"recalls must be serial positions 1..{n}; got {arr.tolist()}")
    if np.unique(arr).size != arr.size:
        raise RecallDataError(f"recalls must not repeat a position (CMR scores first recalls); got {arr.tolist()}")
    return arr.astype(np.int64) - 1


def _integrate(t, t_in, beta):
    """CMR's context update ``rho t + beta t_in`` with ``rho`` keeping |t| = 1 (unit t, t_in)."""
    dot = float(t @ t_in)
    rho = np.sqrt(1.0 + beta * beta * (dot * dot - 1.0)) - beta * dot
    return rho * t + beta * t_in


def _unit(x):
    norm = np.sqrt(x @ x)
    return x / norm if norm > 0 else x


def _linear_head(query, keys, values):
    """Linear attention (no softmax): scores ``keys @ query`` and output ``scores @ values``."""
    scores = keys @ query
    return scores, scores @ values


def _textbook_run(p, n, recall_idx):
    """Textbook CMR as the circuit; context units: 0 the start unit, 1..n the items."""
    d = n + 1
    item_embedding = np.eye(n, d, k=1)  # f_i lands on its own context unit through the FC layer
    fc_item_to_context = p["Afc"] * np.eye(n, d, k=1).sum(axis=0)[None, :] + p["Dfc"] * item_embedding
    fc_context_to_item = p["Acf"] * np.eye(n, d, k=1).sum(axis=0)[:, None] + p["Dcf"] * item_embedding.T
    primacy = p["Lcf"] + p["P1"] * np.exp(-p["P2"] * np.arange(n))
    t = np.zeros(d)
    t[0] = 1.0
    keys1, values1, keys2 = np.zeros((n, n)), np.zeros((n, d)), np.zeros((n, d))
    f = np.eye(n)
    for j in range(n):  # study: layer 1 finds no earlier copy, so t_in is the FC layer's output
        _, head_out = _linear_head(f[j], keys1[:j], values1[:j])
        t = _integrate(t, _unit(head_out + f[j] @ fc_item_to_context), p["B_enc"])
        keys1[j], values1[j], keys2[j] = f[j], p["Lfc"] * t, primacy[j] * t  # cache after the update
    start = np.zeros(d)
    start[0] = 1.0
    contexts, head1, scores = [], [], []
    t = _integrate(t, start, p["B_start"])  # the start-of-recall token: its input is the start unit
    cues = [None, *recall_idx]
    for cue in cues:
        if cue is not None:
            _, head_out = _linear_head(f[cue], keys1, values1)
            head1.append(head_out)
            t = _integrate(t, _unit(head_out + f[cue] @ fc_item_to_context), p["B_rec"])
        else:
            head1.append(np.zeros(d))
        layer2, _ = _linear_head(t, keys2, f)
        contexts.append(t.copy())
        scores.append(layer2 + t @ fc_context_to_item)
    units = ["start"] + [f"item_{i}" for i in range(1, n + 1)]
    return np.array(contexts), np.array(head1), np.array(scores), units


def _paper_run(beta_enc, beta_rec, gamma, n, recall_idx):
    """The paper's variant as the circuit; context units are the items (context = item space)."""
    a = 1.0 - beta_enc
    f = np.eye(n)
    t = np.zeros(n)
    keys2 = np.zeros((n, n))
    for j in range(n):  # study: t_j = a t_{j-1} + f_j, so the key of item j is the context before it
        keys2[j] = t
        t = a * t + f[j]
    keys1, values1 = f, keys2  # layer 1: query f_k, keys f_j, values t_{j-1} (= M f_j)
    contexts, head1, scores = [], [], []
    for step, cue in enumerate(recall_idx):
        _, head_out = _linear_head(f[cue], keys1, values1)
        t_in = _unit(gamma * head_out + (1.0 - gamma) * f[cue])
        # the study's start convention: the first cue sets the context to its own item
        t = f[cue].copy() if step == 0 else _unit((1.0 - beta_rec) * t + beta_rec * t_in)
        layer2, _ = _linear_head(t, keys2, f)
        head1.append(head_out)
        contexts.append(t.copy())
        scores.append(layer2)
    units = [f"item_{i}" for i in range(1, n + 1)]
    return np.array(contexts), np.array(head1), np.array(scores), units


def attention_circuit(
    params=None,
    *,
    list_length: int,
    recalls=None,
    variant: str = "textbook",
    exclude_recalled: bool = False,
) -> xr.Dataset:
    """Run CMR built as a two-layer attention circuit over one studied list and forced recalls.

    Parameters
    ----------
    params : mapping, optional
        Textbook: CMR parameters in cymr's names (missing ones from
        :func:`cmr.default_parameters`; ``X1``, ``X2`` are not used). Paper: ``beta_enc``,
        ``beta_rec``, ``gamma`` (required).
    list_length : int
        N, the number of studied items (at least 2).
    recalls : sequence of int, optional
        Forced recall sequence, serial positions 1..N without repeats (default: the study
        order, as in the teacher-forced profiles).
    variant : {"textbook", "paper"}
        Textbook localist CMR with a list-sized context (items keyed by the context after
        them), or the paper's variant (keyed by the context before them).
    exclude_recalled : bool
        Mask the already recalled items out of layer 2's softmax, as CMR's recall rule does
        (default: attention over every studied item, as in the teacher-forced profiles).

    Returns
    -------
    xarray.Dataset
        Kind ``circuit_trace`` with dims ``step`` (cue tokens: textbook ``0`` is the
        start-of-recall token, then one per forced recall; paper one per forced recall, the
        first setting the context to its item), ``study_position`` (1..N) and ``unit``
        (context units): ``score`` (step, study_position), layer 2's linear attention score,
        CMR's support ``a = M_cf t`` before any floor; ``support``, the score floored at
        cymr's 1e-6 (textbook; the paper's variant has no floor); ``probability``,
        ``softmax(2 support / T)`` (textbook) or ``score / sum(score)`` (paper);
        ``context`` (step, unit), the residual stream's context after the cue;
        ``head1_output`` (step, unit), layer 1's output (``Lfc`` or ``gamma`` times the
        cached context of the cue's studied copy); ``cue_position`` (step), the cue's serial
        position (0 for the start token).
    """
    if variant not in CIRCUIT_VARIANTS:
        raise ParameterError(f"variant must be one of {', '.join(CIRCUIT_VARIANTS)}; got {variant!r}")
    n = integer(list_length, "list_length", minimum=2)
    recall_idx = _recall_positions(recalls, n)
    recalled = np.zeros((recall_idx.size + (variant == "textbook"), n), dtype=bool)
    if variant == "textbook":
        p = default_parameters()
        p.update(validate_parameters(dict(params or {}), partial=True))
        p = validate_parameters({name: p[name] for name in PARAMETER_NAMES})
        contexts, head1, scores, units = _textbook_run(p, n, recall_idx)
        support = np.maximum(scores, textbook_kernels.SUPPORT_FLOOR)
        cue_position = np.concatenate([[0], recall_idx + 1])
        for step, cue in enumerate(recall_idx, start=1):
            recalled[step:, cue] = True
        masked = recalled & exclude_recalled
        logits = 2.0 * support / p["T"]
        top = np.where(masked, -np.inf, logits).max(axis=1, keepdims=True)
        weights = np.where(masked, 0.0, np.exp(np.where(masked, 0.0, logits - np.where(np.isfinite(top), top, 0.0))))
        total = weights.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):  # nothing left to recall: NaN
            probability = np.where(total > 0, weights / total, np.nan)
        info = {"parameters": p, "floor": textbook_kernels.SUPPORT_FLOOR}
    else:
        if params is None or not hasattr(params, "keys") or set(params) != {"beta_enc", "beta_rec", "gamma"}:
            raise ParameterError(f"the paper variant needs params beta_enc, beta_rec, gamma; got {params!r}")
        b_enc, b_rec, g = (float(v) for v in check_parameters(params["beta_enc"], params["beta_rec"], params["gamma"]))
        contexts, head1, scores, units = _paper_run(b_enc, b_rec, g, n, recall_idx)
        support = scores
        cue_position = recall_idx + 1
        for step, cue in enumerate(recall_idx):
            recalled[step:, cue] = True
        masked = np.where(recalled & exclude_recalled, 0.0, scores)
        total = masked.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            probability = np.where(total > 0, masked / total, np.nan)
        info = {"parameters": {"beta_enc": b_enc, "beta_rec": b_rec, "gamma": g}, "floor": 0.0}
    ds = xr.Dataset(
        {
            "score": (("step", "study_position"), scores),
            "support": (("step", "study_position"), support),
            "probability": (("step", "study_position"), probability),
            "context": (("step", "unit"), contexts),
            "head1_output": (("step", "unit"), head1),
            "cue_position": ("step", cue_position.astype(np.int64)),
        },
        coords={"step": np.arange(scores.shape[0]), "study_position": np.arange(1, n + 1), "unit": np.array(units)},
        attrs=provenance_attrs("circuit_trace", "cmr.attention_circuit", variant=variant, list_length=n,
                               recalls=(recall_idx + 1).tolist(), exclude_recalled=int(bool(exclude_recalled)), **info),
    )
    ds.attrs["variant"] = variant
    ds.attrs["parameters"] = json.dumps(info["parameters"], sort_keys=True)
    ds["score"].attrs["long_name"] = "layer-2 linear attention score = CMR retrieval support M_cf t (unfloored)"
    return validate(ds, "circuit_trace")
