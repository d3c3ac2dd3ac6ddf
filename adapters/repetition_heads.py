"""Attention heads on study lists with repeated words, read through the repetition lag-CRP (no torch here).

A prompt is ``BOS + study list + recall pass``:

* the study list (positions ``1..L``) holds single-token words, some presented twice in a row
  (massed), some twice with ``min_spacing..max_spacing`` positions between the presentations
  (spaced) and some three times (spaced), the rest once (Lohnas & Kahana 2014's mixed lists);
* the recall pass (positions ``L+1..L+M``) holds each of the M distinct study words once, in a
  random order: a forced free-recall sequence, so no presentation's order is favoured.

Each prompt is a trial in the events contract: ``presentation`` (L,) holds, for each study
position, the serial position of that word's first presentation (``presentation_item``), and
``recalls`` (M,) the first positions of the recall-pass words in order. A query is a recall-pass
word; its attention over the study positions is a distribution over "what comes next", put
through the repetition lag-CRP of people (:func:`cmr.rep_crp`, after Lohnas & Kahana 2014 and
jaxcmr's ``repcrp``): a lag-CRP centred on each presentation of the queried word, counted only for
words whose first two presentations lie more than ``min_lag`` positions apart. The soft counts are
those of :func:`icl_cmr.adapters.head_profiles.soft_lag_counts` (attention renormalised over the
study positions still available), one call per presentation. With one-hot "attention" on the next
recall and the ``teacher_forced`` rule they equal :func:`cmr.rep_crp`'s counts (a unit test checks
this); a next word presented twice gets half the weight at each presentation where
:func:`cmr.rep_crp` counts one at each.

First-presentation bias of a head: the repetition CRP at lag +1 from the first presentation
minus that from the second (:func:`cmr.first_presentation_bias` for people), i.e. how much more the
head's attention goes to the word that followed the first presentation than to the word that
followed the second. Its null is a
within-head sign test over prompts, and a positional control: the same contrast read from the
attention of a once-presented recall-pass word (the nearest one), which keys the same study
positions without being the repeated word (a head that simply prefers earlier positions has
it too). See docs/repetition.md, "Heads".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from cmr.checks import integer, is_integer, seed_of
from cmr.constants import HEAD_DIMS
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import SchemaError
from cmr.schema import provenance_attrs, require_variables

from .errors import PromptError
from .head_profiles import soft_lag_counts

__all__ = [
    "LAYOUT",
    "RULES",
    "RepetitionPrompts",
    "build_repetition_prompts",
    "study_positions",
    "tabulated_queries",
    "unavailable_positions",
    "occurrence_attention",
    "repetition_summary",
    "pool_repetition",
    "first_bias",
    "sign_test",
    "repetition_heads_dataset",
    "validate_repetition_heads",
]

LAYOUT = ("BOS (position 0) + study list (1..L, some words repeated) + recall pass (L+1..L+M: each distinct "
          "study word once, in a random order)")
RULES = {
    "query_only": "only the queried word's own study positions are unavailable",
    "teacher_forced": "the positions of every recall-pass word up to and including the query are unavailable "
                      "(the recall pass read as a recall sequence, as for people)",
}
#: repeat kinds of the occurrence attention, and the neighbour offsets read around each occurrence
KINDS = ("massed", "spaced", "thrice")
OFFSETS = (-1, 0, 1)
MAX_PRESENTATIONS = 3


@dataclass(frozen=True)
class RepetitionPrompts:
    """Token ids of repeated-word prompts and how they were made.

    Attributes
    ----------
    tokens : int64 (n_prompts, 1 + L + M)
    presentation : int64 (n_prompts, L)
        First serial position (1-based) of the word at each study position.
    recalls : int64 (n_prompts, M)
        First serial positions of the recall-pass words, in order.
    kind : int64 (n_prompts, L)
        Repeat kind of the word at each study position: -1 once, else an index into ``KINDS``.
    word_ids, words : the word pool (ids and decoded words)
    seed : int
    settings : dict
    """

    tokens: np.ndarray
    presentation: np.ndarray
    recalls: np.ndarray
    kind: np.ndarray
    word_ids: np.ndarray
    words: tuple
    seed: int
    settings: dict = field(default_factory=dict)

    @property
    def list_length(self) -> int:
        return int(self.presentation.shape[1])

    @property
    def n_recalls(self) -> int:
        return int(self.recalls.shape[1])


def _place(rng, list_length, spans, tries=200):
    """Start positions (0-based) for items whose presentations sit at ``start + offsets``; None if none fit."""
    for _ in range(tries):
        taken = np.zeros(list_length, dtype=bool)
        starts = []
        for offsets in spans:
            free = [p for p in range(list_length - offsets[-1]) if not taken[p + offsets].any()]
            if not free:
                break
            start = int(rng.choice(free))
            taken[start + offsets] = True
            starts.append(start)
        else:
            return starts
    return None


@renamed_keywords(seed="rng")
def build_repetition_prompts(word_ids, words, *, n_prompts: int = 40, rng=0, bos_id: int, n_ctx: int,
                             list_length: int = 40, n_massed: int = 4, n_spaced: int = 8, n_thrice: int = 2,
                             min_spacing: int = 6, max_spacing: int = 15) -> RepetitionPrompts:
    """Prompts of a study list with massed, spaced and thrice-presented words, then a recall pass.

    Each prompt draws its distinct words from the pool ``word_ids`` at random, the placement of the
    repeats (spacings uniform in ``min_spacing..max_spacing``, the distance between presentation
    positions) and the recall-pass order, all from ``numpy.random.default_rng(seed)``. ``rng``
    (default 0): an int is the seed; a Generator draws one (``int(rng.integers(2**63))``); None
    draws one from fresh entropy. The seed used is the result's ``seed``.

    Raises
    ------
    PromptError
        Counts that do not fit the list, a pool smaller than the distinct words of a list, a
        prompt longer than ``n_ctx``, or a placement that cannot be found.
    """
    list_length = integer(list_length, "list_length", minimum=2, error=PromptError)
    n_prompts = integer(n_prompts, "n_prompts", error=PromptError)
    n_massed, n_spaced, n_thrice = (integer(v, name, minimum=0, error=PromptError) for v, name in
                                    ((n_massed, "n_massed"), (n_spaced, "n_spaced"), (n_thrice, "n_thrice")))
    min_spacing = integer(min_spacing, "min_spacing", minimum=2, error=PromptError)
    max_spacing = integer(max_spacing, "max_spacing", minimum=min_spacing, error=PromptError)
    used = 2 * n_massed + 2 * n_spaced + 3 * n_thrice
    if used > list_length:
        raise PromptError(f"{n_massed} massed + {n_spaced} spaced words (2 presentations each) and {n_thrice} "
                          f"thrice-presented words need {used} study positions; list_length is {list_length}")
    n_distinct = list_length - n_massed - n_spaced - 2 * n_thrice
    word_ids = np.ascontiguousarray(word_ids, dtype=np.int64)
    if word_ids.size < n_distinct:
        raise PromptError(f"a list of {list_length} positions with these repeats has {n_distinct} distinct words; "
                          f"the word pool has only {word_ids.size}")
    length = 1 + list_length + n_distinct
    if length > int(n_ctx):
        raise PromptError(f"a prompt of BOS + {list_length} study + {n_distinct} recall tokens = {length} is longer "
                          f"than the model's context of {int(n_ctx)} tokens")
    seed = seed_of(rng)
    rng = np.random.default_rng(seed)
    kinds = [0] * n_massed + [1] * n_spaced + [2] * n_thrice
    tokens, presentation, recalls, kind_of = [], [], [], []
    for _ in range(n_prompts):
        gaps = [[1] if k == 0 else rng.integers(min_spacing, max_spacing + 1, size=k).tolist() for k in kinds]
        spans = [np.concatenate([[0], np.cumsum(g)]).astype(np.int64) for g in gaps]
        order = np.argsort([-s[-1] for s in spans], kind="stable")  # the widest first
        starts = _place(rng, list_length, [spans[i] for i in order])
        if starts is None:
            raise PromptError(f"cannot place {n_spaced} spaced and {n_thrice} thrice-presented words with spacings "
                              f"{min_spacing}..{max_spacing} in a list of {list_length}; use a longer list or "
                              "narrower spacings")
        item = np.full(list_length, -1, dtype=np.int64)  # index of the distinct word at each position
        kind = np.full(list_length, -1, dtype=np.int64)
        for n, (i, start) in enumerate(zip(order, starts)):
            item[start + spans[i]] = n
            kind[start + spans[i]] = kinds[i]
        free = np.flatnonzero(item < 0)
        item[free] = len(kinds) + rng.permutation(free.size)
        chosen = word_ids[rng.choice(word_ids.size, size=n_distinct, replace=False)]
        first = np.array([np.flatnonzero(item == n)[0] + 1 for n in range(n_distinct)], dtype=np.int64)
        recall_order = rng.permutation(n_distinct)
        tokens.append(np.concatenate([[bos_id], chosen[item], chosen[recall_order]]))
        presentation.append(first[item])
        recalls.append(first[recall_order])
        kind_of.append(kind)
    settings = dict(n_prompts=n_prompts, seed=int(seed), list_length=list_length, n_massed=n_massed,
                    n_spaced=n_spaced, n_thrice=n_thrice, min_spacing=min_spacing, max_spacing=max_spacing,
                    n_words=int(word_ids.size))
    return RepetitionPrompts(np.stack(tokens).astype(np.int64), np.stack(presentation), np.stack(recalls),
                             np.stack(kind_of), word_ids, tuple(words), int(seed), settings)


def study_positions(presentation, item: int) -> np.ndarray:
    """The study positions (1-based, increasing) of the word whose first presentation is ``item``."""
    return np.flatnonzero(np.asarray(presentation) == int(item)) + 1


@keyword_only
def tabulated_queries(presentation, recalls, *, min_lag: int = 4) -> np.ndarray:
    """Recall-pass steps whose word counts in the repetition CRP: its first two presentations lie > ``min_lag`` apart.

    The rule of :func:`cmr.rep_crp` (jaxcmr's ``repcrp``): a word presented once or massed is
    not tabulated.
    """
    keep = []
    for s, item in enumerate(np.asarray(recalls).tolist()):
        pos = study_positions(presentation, item)
        if pos.size > 1 and pos[1] - pos[0] > min_lag:
            keep.append(s)
    return np.asarray(keep, dtype=np.int64)


@keyword_only
def unavailable_positions(presentation, recalls, *, rule: str = "query_only") -> np.ndarray:
    """bool (M, L): the study positions a recall-pass step may not transition to (see ``RULES``)."""
    if rule not in RULES:
        raise PromptError(f"repetition CRP rule must be one of {', '.join(RULES)}; got {rule!r}")
    presentation = np.asarray(presentation)
    recalls = np.asarray(recalls)
    mine = presentation[None, :] == recalls[:, None]
    return np.logical_or.accumulate(mine, axis=0) if rule == "teacher_forced" else mine


def _from_positions(presentation, recalls, steps):
    """int64 (3, n_steps): study position of presentation r of each step's word (0 where it has none)."""
    out = np.zeros((MAX_PRESENTATIONS, len(steps)), dtype=np.int64)
    for n, s in enumerate(steps):
        pos = study_positions(presentation, recalls[s])[:MAX_PRESENTATIONS]
        out[:pos.size, n] = pos
    return out


def _control_steps(presentation, recalls, steps):
    """For each tabulated step, the nearest recall-pass step whose word was presented once (earlier on ties)."""
    once = np.array([study_positions(presentation, item).size == 1 for item in recalls])
    candidates = np.flatnonzero(once)
    if candidates.size == 0:
        raise PromptError("the positional control needs at least one once-presented word in each list")
    return np.array([candidates[np.argmin(np.abs(candidates - s) * 2 + (candidates > s))] for s in steps],
                    dtype=np.int64)


def occurrence_attention(probs, presentation, recalls, kind):
    """Attention of each recall-pass query on its word's presentations and their neighbours.

    Parameters
    ----------
    probs : float (layer, head, M, L)
        Attention probabilities of the recall-pass queries on the study positions.
    presentation, recalls, kind : one prompt's rows of :class:`RepetitionPrompts`

    Returns
    -------
    total, count : float64 (layer, head, 3 kinds, 3 occurrences, 3 offsets), int64 (same shape)
        Sum and number of the probabilities at study position ``p_r + offset`` for repeated
        words of each kind (massed, spaced, thrice); a neighbour outside the list is not counted.
    """
    probs = np.asarray(probs, dtype=np.float64)
    length = probs.shape[-1]
    total = np.zeros(probs.shape[:2] + (len(KINDS), MAX_PRESENTATIONS, len(OFFSETS)))
    count = np.zeros(total.shape, dtype=np.int64)
    for s, item in enumerate(np.asarray(recalls).tolist()):
        pos = study_positions(presentation, item)
        if pos.size < 2:
            continue
        k = int(kind[pos[0] - 1])
        for r, p in enumerate(pos[:MAX_PRESENTATIONS]):
            for o, offset in enumerate(OFFSETS):
                if 1 <= p + offset <= length:
                    total[:, :, k, r, o] += probs[:, :, s, p + offset - 1]
                    count[:, :, k, r, o] += 1
    return total, count


def _repcrp_counts(probs, presentation, recalls, steps, unavailable, query_steps):
    """Soft repetition-CRP counts (layer, head, 3, 2L-1) from the attention of ``query_steps``."""
    length = probs.shape[-1]
    from_pos = _from_positions(presentation, recalls, steps)
    weights = probs[:, :, query_steps, :]
    parts = [soft_lag_counts(from_pos[r], weights, unavailable[steps], length - 1)[1:] for r in range(MAX_PRESENTATIONS)]
    return np.stack([a for a, _ in parts], axis=2), np.stack([p for _, p in parts], axis=2)


def repetition_summary(probs, presentation, recalls, kind, *, min_lag: int = 4, rule: str = "query_only") -> dict:
    """Per-head statistics of one prompt, from the recall-pass attention on the study list.

    Parameters
    ----------
    probs : float (layer, head, M, L)
    presentation : int (L,), recalls : int (M,), kind : int (L,)
        One prompt's rows of :class:`RepetitionPrompts`.
    min_lag : int
        Presentations must lie more than this apart to be tabulated (jaxcmr's default 4).
    rule : str, key of ``RULES``

    Returns
    -------
    dict: ``actual``/``possible`` (layer, head, 3, 2L-1) and ``control_actual``/``control_possible``
    (the positional control) of the repetition CRP, ``occurrence`` (total, count) of
    :func:`occurrence_attention`, ``n_tabulated`` (int).
    """
    probs = np.asarray(probs, dtype=np.float64)
    presentation = np.asarray(presentation, dtype=np.int64)
    recalls = np.asarray(recalls, dtype=np.int64)
    if probs.ndim != 4 or probs.shape[2:] != (recalls.size, presentation.size):
        raise PromptError(f"recall-pass attention must have shape (layer, head, M={recalls.size}, L={presentation.size}); "
                          f"got {probs.shape}")
    unavailable = unavailable_positions(presentation, recalls, rule=rule)
    steps = tabulated_queries(presentation, recalls, min_lag=min_lag)
    controls = _control_steps(presentation, recalls, steps)
    control_unavailable = unavailable.copy()
    control_unavailable[steps] |= presentation[None, :] == recalls[controls][:, None]
    actual, possible = _repcrp_counts(probs, presentation, recalls, steps, unavailable, steps)
    c_actual, c_possible = _repcrp_counts(probs, presentation, recalls, steps, control_unavailable, controls)
    return {"actual": actual, "possible": possible, "control_actual": c_actual, "control_possible": c_possible,
            "occurrence": occurrence_attention(probs, presentation, recalls, kind), "n_tabulated": int(steps.size)}


@keyword_only
def first_bias(actual, possible, *, lag: int = 1):
    """CRP at ``lag`` from the first presentation minus that from the second, over the last axes (3, 2L-1)."""
    actual = np.asarray(actual, dtype=np.float64)
    possible = np.asarray(possible)
    centre = (actual.shape[-1] - 1) // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        crp = np.where(possible > 0, actual / np.maximum(possible, 1), np.nan)
    return crp[..., 0, centre + lag] - crp[..., 1, centre + lag]


def pool_repetition(summaries) -> dict:
    """Sum per-prompt summaries; keep each prompt's first-presentation bias and its control's."""
    summaries = list(summaries)
    if not summaries:
        raise PromptError("no prompts to pool (n_prompts must be >= 1)")
    pooled = {name: sum(s[name] for s in summaries) for name in ("actual", "possible", "control_actual",
                                                                   "control_possible", "n_tabulated")}
    pooled["occurrence"] = tuple(sum(s["occurrence"][i] for s in summaries) for i in range(2))
    pooled["prompt_bias"] = np.stack([first_bias(s["actual"], s["possible"]) for s in summaries])
    pooled["prompt_control"] = np.stack([first_bias(s["control_actual"], s["control_possible"]) for s in summaries])
    return pooled


@keyword_only
def sign_test(differences, *, axis: int = 0):
    """Two-sided exact sign test along ``axis``: (n_positive, n_nonzero, p); NaN and zero differences left out."""
    from scipy.stats import binom

    d = np.asarray(differences, dtype=np.float64)
    positive = np.sum(d > 0, axis=axis)
    nonzero = np.sum((d != 0) & np.isfinite(d), axis=axis)
    smaller = np.minimum(positive, nonzero - positive)
    p = np.where(nonzero > 0, np.minimum(1.0, 2 * binom.cdf(smaller, np.maximum(nonzero, 1), 0.5)), np.nan)
    return positive.astype(np.int64), nonzero.astype(np.int64), p



def repetition_heads_dataset(pooled: dict, *, list_length: int, model: str, checkpoint: int = -1, max_lag: int = 5,
                             min_lag: int = 4, rule: str = "query_only", provenance: dict | None = None) -> xr.Dataset:
    """The repetition-CRP dataset of every head (kind ``repetition_heads``, see docs/repetition.md).

    Parameters
    ----------
    pooled : dict from :func:`pool_repetition`
    list_length : int, L
    model : str
    checkpoint : int, -1 for the released model
    max_lag : int, lags -max_lag..max_lag of the stored CRPs (within L-1)
    min_lag, rule : the tabulation settings (recorded)
    provenance : dict, JSON-serialisable

    Returns
    -------
    xarray.Dataset with dims (model, checkpoint, layer, head) and ``presentation`` (1..3), ``lag``,
    ``repeat_kind``/``occurrence``/``offset`` and ``prompt``: ``repcrp`` (with ``repcrp_actual``,
    ``repcrp_possible``), ``control_repcrp`` (the positional control), ``occurrence_attention``
    (with ``occurrence_count``), ``first_bias``, ``control_bias``, ``prompt_bias``,
    ``prompt_control_bias`` and the sign tests ``n_first``/``n_informative``/``first_p`` (bias
    against 0) and ``n_beyond_control``/``n_informative_control``/``control_p`` (bias against its
    control).
    """
    max_lag = integer(max_lag, "max_lag", minimum=1, maximum=int(list_length) - 1, error=PromptError)
    actual, possible = pooled["actual"], pooled["possible"]
    n_layers, n_heads = actual.shape[:2]
    centre = int(list_length) - 1
    cut = slice(centre - max_lag, centre + max_lag + 1)
    pre = (1, 1)

    def head(values, dims=()):
        values = np.asarray(values)
        return (HEAD_DIMS + dims, values.reshape(pre + values.shape))

    def crp(a, p):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(p > 0, a / np.maximum(p, 1), np.nan)

    total, count = pooled["occurrence"]
    with np.errstate(invalid="ignore", divide="ignore"):
        occurrence = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    prompt_bias = np.moveaxis(pooled["prompt_bias"], 0, -1)
    prompt_control = np.moveaxis(pooled["prompt_control"], 0, -1)
    n_first, n_informative, first_p = sign_test(prompt_bias, axis=-1)
    n_beyond, n_informative_c, control_p = sign_test(prompt_bias - prompt_control, axis=-1)
    crp_dims = ("presentation", "lag")
    data = {
        "repcrp": head(crp(actual, possible)[..., cut], crp_dims),
        "repcrp_actual": head(actual[..., cut], crp_dims),
        "repcrp_possible": head(possible[..., cut].astype(np.int64), crp_dims),
        "control_repcrp": head(crp(pooled["control_actual"], pooled["control_possible"])[..., cut], crp_dims),
        "occurrence_attention": head(occurrence, ("repeat_kind", "occurrence", "offset")),
        "occurrence_count": (("repeat_kind", "occurrence", "offset"), count[0, 0].astype(np.int64)),
        "first_bias": head(first_bias(actual, possible)),
        "control_bias": head(first_bias(pooled["control_actual"], pooled["control_possible"])),
        "prompt_bias": head(prompt_bias, ("prompt",)),
        "prompt_control_bias": head(prompt_control, ("prompt",)),
        "n_first": head(n_first),
        "n_informative": head(n_informative),
        "first_p": head(first_p),
        "n_beyond_control": head(n_beyond),
        "n_informative_control": head(n_informative_c),
        "control_p": head(control_p),
    }
    coords = {
        "model": np.array([str(model)], dtype=object),
        "checkpoint": np.array([int(checkpoint)], dtype=np.int64),
        "layer": np.arange(n_layers, dtype=np.int64),
        "head": np.arange(n_heads, dtype=np.int64),
        "presentation": np.arange(1, MAX_PRESENTATIONS + 1, dtype=np.int64),
        "lag": np.arange(-max_lag, max_lag + 1, dtype=np.int64),
        "repeat_kind": np.array(KINDS, dtype=object),
        "occurrence": np.arange(1, MAX_PRESENTATIONS + 1, dtype=np.int64),
        "offset": np.array(OFFSETS, dtype=np.int64),
        "prompt": np.arange(prompt_bias.shape[-1], dtype=np.int64),
    }
    info = dict(provenance or {})
    info.update(list_length=int(list_length), min_lag=int(min_lag), rule=rule, max_lag=max_lag,
                n_tabulated=int(pooled["n_tabulated"]), layout=LAYOUT)
    attrs = provenance_attrs("repetition_heads", "icl_cmr.adapters.repetition_heads.repetition_heads_dataset", **info)
    attrs.update(unit_kind="heads", rule=RULES[rule], min_lag=int(min_lag), list_length=int(list_length))
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    for name, text in _DESCRIPTIONS.items():
        ds[name].attrs["description"] = text
    validate_repetition_heads(ds)
    return ds


_DESCRIPTIONS = {
    "repcrp": "soft repetition lag-CRP centred on each presentation of the queried word (actual / possible)",
    "repcrp_actual": "sum of attention renormalised over the available study positions, by lag from presentation r",
    "repcrp_possible": "number of tabulated queries for which the lag from presentation r was available",
    "control_repcrp": "the same counts read from the attention of the nearest once-presented recall-pass word",
    "occurrence_attention": "mean attention probability on study position p_r + offset of the queried repeated word",
    "occurrence_count": "number of (prompt, query) samples of occurrence_attention",
    "first_bias": "repcrp at lag +1 from the first presentation minus from the second (pooled over prompts)",
    "control_bias": "first_bias of the positional control",
    "prompt_bias": "first_bias within one prompt",
    "prompt_control_bias": "control_bias within one prompt",
    "n_first": "prompts with prompt_bias > 0",
    "n_informative": "prompts with a finite, non-zero prompt_bias",
    "first_p": "two-sided exact sign test of prompt_bias against 0 over prompts",
    "n_beyond_control": "prompts with prompt_bias > prompt_control_bias",
    "n_informative_control": "prompts with a finite, non-zero prompt_bias - prompt_control_bias",
    "control_p": "two-sided exact sign test of prompt_bias - prompt_control_bias over prompts",
}


def validate_repetition_heads(ds: xr.Dataset) -> None:
    """Check a ``repetition_heads`` dataset (see docs/repetition.md)."""
    kind = "repetition_heads"
    require_variables(ds, ["repcrp", "repcrp_actual", "repcrp_possible", "first_bias", "first_p", "prompt_bias"], kind)
    for name in ("repcrp", "repcrp_actual", "repcrp_possible", "control_repcrp"):
        if name in ds and tuple(ds[name].dims) != HEAD_DIMS + ("presentation", "lag"):
            raise SchemaError(f"{kind} dataset: {name!r} must have dims {HEAD_DIMS + ('presentation', 'lag')}; "
                              f"got {ds[name].dims}")
    for name in ("repcrp", "control_repcrp", "first_p", "control_p"):
        values = ds[name].values if name in ds else np.zeros(0)
        finite = values[np.isfinite(values)]
        if finite.size and (finite.min() < -1e-9 or finite.max() > 1 + 1e-6):
            raise SchemaError(f"{kind} dataset: {name!r} must lie in [0, 1]; got {finite.min()}..{finite.max()}")
    if (ds["repcrp_actual"].values > ds["repcrp_possible"].values + 1e-9).any():
        raise SchemaError(f"{kind} dataset: 'repcrp_actual' exceeds 'repcrp_possible'")
    for name in ("list_length", "min_lag"):
        if not is_integer(ds.attrs.get(name)):
            raise SchemaError(f"{kind} dataset needs integer attr {name!r}; got {ds.attrs.get(name)!r}")
