"""Effects of head sets of any size on the measures with power, and every head ablated alone.

:func:`set_effects` runs :func:`icl_cmr.adapters.lm.ablation_engine.set_losses` on natural-text
passages (losses at every text position ``1 .. n_tokens - 1``, for the ``bigram`` measure) and
on repeated-token passages (``repeated_tokens``), and returns per-passage effects, ablated
minus intact, with the conventions of :mod:`icl_cmr.analyses.causal.measures`. Unlike
:func:`icl_cmr.analyses.causal.ablation.run_ablation` the sets need not share a size.
:func:`single_head_effects` ablates every head alone (a set of one head per head).
"""
from __future__ import annotations

import time

import numpy as np
from tqdm.auto import tqdm
import xarray as xr

from cmr.checks import seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError
from cmr.schema import provenance_attrs

from ...adapters.lm.ablation_engine import donor_passages, set_losses
from ...adapters.lm.interventions import bos_id, geometry
from .dissociation_io import KIND
from .measures import measure_scores, repeated_positions, repeated_token_passages

__all__ = ["BudgetSpent", "set_effects", "single_head_effects"]


class BudgetSpent(ParameterError):
    """The time budget ran out before the first passage of an experiment (nothing of it was measured)."""


def _repeated(bridge, n_passages, repeat_length, seed):
    tokenizer = getattr(bridge, "tokenizer", None)
    special = set(getattr(tokenizer, "all_special_ids", []) or []) | {bos_id(bridge)} - {None}
    n_vocab = int(bridge.cfg.d_vocab) if tokenizer is None else min(int(bridge.cfg.d_vocab), len(tokenizer))
    return repeated_token_passages(n_vocab, special, n_passages=n_passages, repeat_length=repeat_length, rng=seed)


@keyword_only
@renamed_keywords(seed="rng")
def set_effects(bridge, passages, sets, *, modes=("zero",), measures=("bigram", "repeated_tokens"), rng=0,
                batch_size: int = 8, repeat_length: int = 100, deadline=None, progress=True,
                desc: str = "head sets") -> tuple[np.ndarray, int]:
    """Per-passage effects of every head set: (effects (measure, mode, set, passage), passages done).

    Parameters
    ----------
    bridge : TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
        Natural-text passages (``bigram``).
    sets : sequence of sequences of (layer, head)
    modes : sequence of {"zero", "mean", "resample"}
        ``resample`` takes each ablated head's output from another passage at the same positions
        (:func:`~icl_cmr.adapters.lm.ablation_engine.donor_passages`, seed ``seed + 3``).
    measures : sequence of {"bigram", "repeated_tokens"}
    rng : int, numpy.random.Generator or None
        The seed (default 0): ``repeated_tokens`` passages come from ``seed + 2`` (as in
        ``icl-cmr ablate``). A Generator draws one seed (``int(rng.integers(2**63))``); None
        draws one from fresh entropy.
    deadline : float, optional
        A ``time.monotonic()`` value after which no passage starts. With both measures the
        natural-text passages stop starting at half the time left, then repeated-token passages
        run, at most as many as natural-text passages were done, until the deadline; each
        measure keeps the passages both finished. So the deadline is wall time, passed by at
        most the passage that was running when it came.
    """
    seed = seed_of(rng)
    measures, modes = tuple(measures), tuple(modes)
    unknown = sorted(set(measures) - {"bigram", "repeated_tokens"})
    if unknown or not measures:
        raise ParameterError(f"measures must be among bigram, repeated_tokens; got {', '.join(unknown) or 'none'}")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    if passages.ndim != 2 or passages.shape[0] < 2 or passages.shape[1] < 3:
        raise ParameterError(f"passages must be (n_passage >= 2, n_token >= 3); got shape {passages.shape}")
    n, last = passages.shape[0], passages.shape[1] - 1
    rows = {}
    done = n
    natural_deadline = deadline
    if deadline is not None and len(measures) == 2:  # the repeated-token passages get the second half
        natural_deadline = time.monotonic() + 0.5 * (deadline - time.monotonic())
    if "bigram" in measures:
        positions = np.arange(1, last + 1, dtype=np.int64)
        donors = donor_passages(n, rng=seed + 3) if "resample" in modes else None
        with tqdm(total=n, desc=f"{desc}: natural text", unit="passage", disable=not progress) as bar:
            _, _, _, extra = set_losses(bridge, passages, np.array([last]), sets, modes=modes, batch_size=batch_size,
                                        progress=bar, deadline=natural_deadline, donors=donors,
                                        extra_targets=positions)
        done = extra["losses"].shape[2]
        kw = dict(passages=passages[:done], last=last)
        rows["bigram"] = (measure_scores("bigram", extra["losses"], positions, **kw)
                          - measure_scores("bigram", extra["base"], positions, **kw)[None, None, :])
    if "repeated_tokens" in measures and done > 0:
        # resample ablation needs a donor: with one natural-text passage done, two repeated-token ones run
        n_repeated = max(done, 2) if "resample" in modes else done
        repeated = _repeated(bridge, n_repeated, repeat_length, seed + 2)
        scored = repeated_positions(repeat_length)
        donors = donor_passages(n_repeated, rng=seed + 3) if "resample" in modes else None
        with tqdm(total=n_repeated, desc=f"{desc}: repeated tokens", unit="passage", disable=not progress) as bar:
            base, losses, _ = set_losses(bridge, repeated, scored, sets, modes=modes, batch_size=batch_size, progress=bar,
                                         donors=donors, deadline=deadline)
        rows["repeated_tokens"] = (measure_scores("repeated_tokens", losses, scored, repeat_length=repeat_length)
                                   - measure_scores("repeated_tokens", base, scored,
                                                    repeat_length=repeat_length)[None, None, :])
        done = min(losses.shape[2], done)
    if done < 1:
        raise BudgetSpent("the time budget ran out before the first passage; give a longer budget")
    return np.stack([rows[m][..., :done] for m in measures]), int(done)


@renamed_keywords(seed="rng")
def single_head_effects(bridge, passages, *, layers=None, modes=("zero", "resample"),
                        measures=("bigram", "repeated_tokens"), rng=0, batch_size: int = 8,
                        repeat_length: int = 100, deadline=None, progress=True, info=None,
                        articles=None) -> xr.Dataset:
    """Every head of ``layers`` (default all) ablated alone: a ``dissociation`` dataset of experiment
    ``heads`` holding ``head_effect`` (measure, mode, layer, head, passage), ablated - intact, NaN
    for the layers left out, and ``head_mean_effect`` (its mean over passages).

    The passages, modes, measures and deadline are as for :func:`set_effects`; ``articles`` (one per
    passage) is kept as a coordinate; ``rng`` as there (the seed used is the ``seed`` attribute)."""
    started = time.monotonic()
    seed = seed_of(rng)
    n_layers, n_heads = geometry(bridge)
    chosen = list(range(n_layers)) if layers is None else sorted({int(l) for l in layers})
    if not chosen or any(not 0 <= l < n_layers for l in chosen):
        raise ParameterError(f"layers must lie in 0..{n_layers - 1}; got {layers}")
    sets = [[(l, h)] for l in chosen for h in range(n_heads)]
    effects, done = set_effects(bridge, passages, sets, modes=modes, measures=measures, rng=seed, batch_size=batch_size,
                                repeat_length=repeat_length, deadline=deadline, progress=progress,
                                desc=f"single heads ({len(sets)} x {len(modes)} modes)")
    full = np.full((len(measures), len(modes), n_layers, n_heads, done), np.nan)
    full[:, :, chosen] = effects.reshape(len(measures), len(modes), len(chosen), n_heads, done)
    coords = {"measure": list(measures), "mode": list(modes), "layer": np.arange(n_layers, dtype=np.int64),
              "head": np.arange(n_heads, dtype=np.int64), "passage": np.arange(done, dtype=np.int64)}
    if articles is not None:
        coords["article"] = ("passage", np.asarray(articles, dtype=np.int64)[:done])
    ds = xr.Dataset(coords=coords)
    ds["head_effect"] = (("measure", "mode", "layer", "head", "passage"), full)
    finite = np.isfinite(full)
    counts = finite.sum(axis=-1)
    mean = np.divide(np.where(finite, full, 0.0).sum(axis=-1), counts, out=np.full(counts.shape, np.nan),
                     where=counts > 0)
    ds["head_mean_effect"] = (("measure", "mode", "layer", "head"), mean)
    ds["head_mean_effect"].attrs["long_name"] = "head_effect averaged over the passages where it is defined"
    ds["head_effect"].attrs["long_name"] = "per-passage effect of ablating the head alone (ablated - intact, nats)"
    details = dict(layers=",".join(map(str, chosen)), n_passages_requested=int(np.asarray(passages).shape[0]),
                   n_passages_done=int(done), seed=int(seed), repeat_length=int(repeat_length),
                   seconds=round(time.monotonic() - started, 1), **(info or {}))
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.head_effects.single_head_effects", **details))
    ds.attrs.update({k: v for k, v in details.items() if isinstance(v, (int, float, str))})
    ds.attrs["experiments"] = "heads"
    return ds
