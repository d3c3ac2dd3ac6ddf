"""Classic memory effects with a language model as the free-recall subject: the study conditions.

:func:`run_battery` gives a language model the lists of five classic free-recall
experiments, in the prompt of :mod:`icl_cmr.adapters.lm.recall_task` (free recall, greedy
decoding), parses its answers with :func:`icl_cmr.adapters.recall_text.parse_recall` and
returns one ``memory_battery`` dataset (docs/schema.md). Its statistics and verdicts are
:mod:`icl_cmr.analyses.memory.effects`.

Conditions (the ``condition`` of each trial):

* ``serial_position``: lists of 16 words from the PEERS pool (as ``psifr:peers_notask``);
* ``length_10`` ... ``length_40``: lists of each length from the same pool (Murdock 1962);
* ``strength_pure_weak``, ``strength_mixed``, ``strength_pure_strong``: the same words
  presented once each, half of them twice, or all twice (a repetition is a second
  presentation later in the list, never next to the first; Tulving & Hastie 1972; Ratcliff,
  Clark & Shiffrin 1990);
* ``drm``: the lists of Roediger & McDermott (1995) (``icl_cmr.data``'s ``drm_lists.csv``),
  in the published order and in shuffled orders; the critical lure is never shown;
* ``semantic``: study lists of Morton & Polyn's experiment (``psifr:Morton2013``), whose items
  have word-vector similarities (:func:`icl_cmr.adapters.item_pools.load_item_patterns`).
"""
from __future__ import annotations

from importlib import resources
import csv
import json
import time

import numpy as np
import pandas as pd
import xarray as xr

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import DataSourceError, ParameterError, SchemaError
from cmr.events import from_table
from cmr.schema import provenance_attrs, register_kind, require_dims, require_variables

from ...adapters.lm.recall_task import generate_answers, generate_answers_with_repeats, study_lists, word_pool
from ...adapters.recall_data import read_recall_table
from ...adapters.recall_text import COUNT_NAMES, normalise, parse_recall

__all__ = ["KIND", "EFFECTS", "STRENGTH_CONDITIONS", "drm_lists", "serial_lists", "strength_lists", "semantic_lists",
           "check_design", "battery_design", "run_battery", "battery_from_answers", "battery_trials", "rescore",
           "combine", "condition_events", "validate_memory_battery"]

KIND = "memory_battery"
#: the effects of the battery, in the order they run and print
EFFECTS = ("serial_position", "list_length", "list_strength", "drm", "semantic")
#: the list-strength conditions: presentations per item (all once, half twice, all twice)
STRENGTH_CONDITIONS = ("strength_pure_weak", "strength_mixed", "strength_pure_strong")
_TRIAL_TEXT = ("condition", "answer", "presented", "lure")


def drm_lists() -> dict[str, list[str]]:
    """The DRM lists of Roediger & McDermott (1995): critical lure -> its 15 associates, in order."""
    try:
        text = resources.files("icl_cmr.data").joinpath("drm_lists.csv").read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise DataSourceError(f"the DRM lists (icl_cmr.data/drm_lists.csv) are not installed: {exc}") from exc
    lists: dict[str, list[str]] = {}
    for row in csv.DictReader(text.splitlines()):  # the file's order of lists
        lists.setdefault(row["lure"], []).append((int(row["position"]), row["word"]))
    return {lure: [word for _, word in sorted(words)] for lure, words in lists.items()}


def _sub(seed, *keys) -> int:
    """An integer seed of its own for each condition, derived from ``seed``."""
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0])


@keyword_only
@renamed_keywords(seed="rng")
def serial_lists(pool, *, n_lists: int, list_length: int, rng) -> list[list[str]]:
    """``n_lists`` lists of ``list_length`` distinct words of ``pool`` (as ``recall_task.study_lists``,
    ``rng`` as there)."""
    return study_lists(pool, n_lists=n_lists, list_length=list_length, rng=rng)


def _spaced(items, twice, rng, tries: int = 200):
    """A presentation order of ``items`` with the ones in ``twice`` shown twice, never back to back,
    whose order of first presentation is ``items``'s order."""
    for _ in range(tries):
        seq = list(items)
        for item in [w for w in items if w in twice]:
            first = seq.index(item)
            seq.insert(int(rng.integers(first + 2, len(seq) + 1)) if first + 2 <= len(seq) else len(seq), item)
        if all(a != b for a, b in zip(seq, seq[1:])):
            return seq
    raise ParameterError(f"could not space the repetitions of {len(twice)} of {len(items)} items")


@keyword_only
@renamed_keywords(seed="rng")
def strength_lists(pool, *, n_lists: int, list_length: int, rng) -> dict[str, list[tuple[list[str], list[str]]]]:
    """The list-strength conditions: each condition -> ``n_lists`` (studied items, presentation order).

    The same words in the same order of first presentation in every condition; in the mixed
    condition a seeded half of them (the strong items) is presented twice, in the pure strong
    condition all of them. ``rng``: an int is the seed; a Generator draws one
    (``int(rng.integers(2**63))``); None draws one from fresh entropy.
    """
    seed = seed_of(rng)
    if int(list_length) < 2:
        raise ParameterError(f"list-strength lists need at least 2 items; got {list_length}")
    rng = np.random.default_rng(_sub(seed, 1))
    out = {name: [] for name in STRENGTH_CONDITIONS}
    for items in serial_lists(pool, n_lists=n_lists, list_length=list_length, rng=seed):
        strong = set(rng.choice(items, size=len(items) // 2, replace=False).tolist())
        out["strength_pure_weak"].append((items, list(items)))
        out["strength_mixed"].append((items, _spaced(items, strong, rng)))
        out["strength_pure_strong"].append((items, _spaced(items, set(items), rng)))
    return out


@keyword_only
@renamed_keywords(seed="rng")
def semantic_lists(*, n_lists: int, rng, source: str = "psifr:Morton2013") -> list[list[str]]:
    """``n_lists`` study lists of ``source`` (distinct lists drawn at random with
    ``numpy.random.default_rng(rng)``; a Generator ``rng`` is used as is), items lower-cased."""
    table = read_recall_table(source)
    study = table[table["trial_type"] == "study"].sort_values(["subject", "list", "position"])
    lists = [[str(w).lower() for w in group["item"]] for _, group in study.groupby(["subject", "list"], sort=True)]
    distinct = list({tuple(items): None for items in lists})
    if int(n_lists) > len(distinct):
        raise ParameterError(f"{source} has {len(distinct)} distinct lists; asked for {n_lists}")
    rng = as_generator(rng)
    return [list(distinct[i]) for i in sorted(rng.choice(len(distinct), size=int(n_lists), replace=False))]


def check_design(*, effects=EFFECTS, lengths=(10, 20, 30, 40), **sizes) -> None:
    """Refuse unknown effects, sizes below 1 and fewer than two list lengths (:class:`ParameterError`)."""
    unknown = [e for e in effects if e not in EFFECTS]
    if unknown or not effects:
        got = ", ".join(map(str, effects)) or "none"
        raise ParameterError(f"effects must be among {', '.join(EFFECTS)}; got {got}")
    for name, value in sizes.items():
        if int(value) < 1:
            raise ParameterError(f"{name} must be >= 1; got {value!r}")
    if "list_length" in effects and (len(set(lengths)) < 2 or any(int(n) < 1 for n in lengths)):
        raise ParameterError("the list-length effect needs at least two distinct list lengths >= 1; got "
                             f"{list(lengths)}")


@renamed_keywords(seed="rng")
def battery_design(*, effects=EFFECTS, pool: str = "psifr:peers_notask", n_lists: int = 20, list_length: int = 16,
                   lengths=(10, 20, 30, 40), n_length_lists: int = 10, strength_length: int = 12,
                   n_strength_lists: int = 10, drm_orders: int = 3, n_semantic_lists: int = 10, rng=0):
    """The trials of the battery: a list of ``(condition, studied items, presentation order, lure)``.

    Sizes as :func:`run_battery`. Every condition draws its lists with its own seed derived from
    the seed ``rng`` (an int; a Generator draws one, ``int(rng.integers(2**63))``), so adding or
    removing an effect leaves the other effects' lists unchanged.
    """
    seed = seed_of(rng)

    check_design(effects=effects, n_lists=n_lists, list_length=list_length, lengths=lengths,
                 n_length_lists=n_length_lists, strength_length=strength_length, n_strength_lists=n_strength_lists,
                 drm_orders=drm_orders, n_semantic_lists=n_semantic_lists)
    words = word_pool(pool) if isinstance(pool, str) else list(pool)
    trials = []
    if "serial_position" in effects:
        trials += [("serial_position", items, items, "")
                   for items in serial_lists(words, n_lists=n_lists, list_length=list_length, rng=seed)]
    if "list_length" in effects:
        for k, length in enumerate(sorted(int(n) for n in lengths)):
            trials += [(f"length_{length}", items, items, "")
                       for items in serial_lists(words, n_lists=n_length_lists, list_length=length,
                                                 rng=_sub(seed, 2, k))]
    if "list_strength" in effects:
        for condition, pairs in strength_lists(words, n_lists=n_strength_lists, list_length=strength_length,
                                                 rng=_sub(seed, 3)).items():
            trials += [(condition, items, shown, "") for items, shown in pairs]
    if "drm" in effects:
        rng = np.random.default_rng(_sub(seed, 4))
        for order in range(int(drm_orders)):
            for lure, items in drm_lists().items():
                shown = list(items) if order == 0 else [items[i] for i in rng.permutation(len(items))]
                trials.append(("drm", shown, shown, lure))
    if "semantic" in effects:
        trials += [("semantic", items, items, "")
                   for items in semantic_lists(n_lists=n_semantic_lists, rng=_sub(seed, 5))]
    return trials


@renamed_keywords(seed="rng")
def run_battery(model, *, batch_size: int = 16, max_new_tokens: int | None = None, progress=None, **sizes):
    """The model's free recall of every condition of the battery: a ``memory_battery`` dataset.

    Parameters
    ----------
    model : LoadedModel
        From :func:`icl_cmr.adapters.lm.loading.load_model`.
    effects : sequence of str
        Among :data:`EFFECTS` (default all).
    pool : str
        Word pool of the serial-position, list-length and list-strength lists (default
        ``psifr:peers_notask``, 1,638 words).
    n_lists, list_length : int
        Serial-position lists (default 20 lists of 16 words, as PEERS).
    lengths, n_length_lists : sequence of int, int
        List lengths of the list-length effect (default 10, 20, 30, 40) and lists per length (10).
    strength_length, n_strength_lists : int
        Items per list-strength list (12) and lists per strength condition (10).
    drm_orders : int
        Presentations of every DRM list: the published order, then shuffled orders (default 3).
    n_semantic_lists : int
        Morton2013 study lists of 24 items for semantic clustering (default 10).
    rng : int, numpy.random.Generator or None
        Seed of every list draw (default 0; a Generator draws one, ``int(rng.integers(2**63))``).
        The seed used is kept in the provenance's settings as ``seed``.
    batch_size, max_new_tokens :
        As :func:`icl_cmr.adapters.lm.recall_task.generate_answers` (greedy decoding).
    progress : callable, optional
        Called as ``progress(condition, n_trials, seconds)`` after each condition.
    """
    if "rng" in sizes:
        sizes["rng"] = seed_of(sizes["rng"])
    trials = battery_design(**sizes)
    answers: list[str] = [""] * len(trials)
    conditions = list(dict.fromkeys(t[0] for t in trials))
    longest = _longest_item(trials)
    for condition in conditions:
        started = time.perf_counter()
        rows = [k for k, t in enumerate(trials) if t[0] == condition]
        shown = [trials[k][2] for k in rows]
        if condition in STRENGTH_CONDITIONS:  # words shown twice, which the loop stop cannot parse: every strength
            # condition generates the same way
            out = generate_answers_with_repeats(model, shown, batch_size=batch_size, max_new_tokens=max_new_tokens)
        else:
            out = generate_answers(model, shown, task="free", batch_size=batch_size, max_new_tokens=max_new_tokens,
                                   max_intrusion_words=longest)
        for k, text in zip(rows, out):
            answers[k] = text
        if progress is not None:
            progress(condition, len(rows), time.perf_counter() - started)
    settings = {("seed" if key == "rng" else key): (list(value) if isinstance(value, (tuple, list)) else value)
                for key, value in sizes.items()}
    return battery_from_answers(trials, answers, model=model.name, settings=settings)


def _longest_item(trials) -> int:
    return max(len(normalise(w).split()) for t in trials for w in t[1]) or 1


def battery_from_answers(trials, answers, *, model: str = "model", settings=None) -> xr.Dataset:
    """The ``memory_battery`` dataset of parsed answers to the trials of :func:`battery_design`."""
    if len(trials) != len(answers) or not trials:
        raise ParameterError(f"need one answer per trial (and at least one trial); got {len(answers)} answers for "
                             f"{len(trials)} trials")
    longest = _longest_item(trials)
    parsed = [parse_recall(text, items, max_intrusion_words=longest) for (_, items, _, _), text in zip(trials, answers)]
    n_trials = len(trials)
    n_study = max(len(t[1]) for t in trials)
    n_out = max([1, *(len(p.items) for p in parsed)])
    study = np.full((n_trials, n_study), "", dtype=object)
    shown = np.zeros((n_trials, n_study), dtype=np.int64)
    recalls = np.zeros((n_trials, n_out), dtype=np.int64)
    recalled = np.full((n_trials, n_out), "", dtype=object)
    lure_recalled = np.zeros(n_trials, dtype=bool)
    for k, ((_, items, order, lure), p) in enumerate(zip(trials, parsed)):
        where = {normalise(w): i + 1 for i, w in enumerate(items)}
        study[k, :len(items)] = items
        for w in order:
            shown[k, where[normalise(w)] - 1] += 1
        for o, item in enumerate(p.items):
            recalls[k, o] = where.get(normalise(item), -1)
            recalled[k, o] = str(item)
        lure_recalled[k] = bool(lure) and normalise(lure) in {normalise(i) for i in p.items}
    conditions = [t[0] for t in trials]
    index = np.zeros(n_trials, dtype=np.int64)
    for name in dict.fromkeys(conditions):
        rows = [k for k, c in enumerate(conditions) if c == name]
        index[rows] = np.arange(len(rows))
    data = {
        "condition": ("trial", np.array(conditions, dtype=object)),
        "list": ("trial", index),
        "list_length": ("trial", np.array([len(t[1]) for t in trials], dtype=np.int64)),
        "study_item": (("trial", "study_position"), study),
        "presentations": (("trial", "study_position"), shown),
        "presented": ("trial", np.array(["\n".join(t[2]) for t in trials], dtype=object)),
        "recalls": (("trial", "output_position"), recalls),
        "recall_item": (("trial", "output_position"), recalled),
        "answer": ("trial", np.array([str(a) for a in answers], dtype=object)),
        "lure": ("trial", np.array([t[3] for t in trials], dtype=object)),
        "lure_recalled": ("trial", lure_recalled.astype(np.int64)),
    }
    for name in COUNT_NAMES:
        data[name] = ("trial", np.array([p.counts()[name] for p in parsed], dtype=np.int64))
    ds = xr.Dataset(data, coords={"trial": np.arange(n_trials), "study_position": np.arange(1, n_study + 1),
                                  "output_position": np.arange(1, n_out + 1)})
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.memory.battery.run_battery", model=str(model),
                                     settings=settings or {}, decoding="greedy", task="free",
                                     max_intrusion_words=int(longest)))
    ds.attrs["model"] = str(model)
    return ds


def battery_trials(ds: xr.Dataset):
    """The trials of a ``memory_battery`` dataset as :func:`battery_design` gives them."""
    validate_memory_battery(ds)
    out = []
    for k in range(ds.sizes["trial"]):
        items = [str(w) for w in ds["study_item"].values[k, :int(ds["list_length"].values[k])]]
        out.append((str(ds["condition"].values[k]), items, str(ds["presented"].values[k]).split("\n"),
                    str(ds["lure"].values[k])))
    return out


def rescore(ds: xr.Dataset) -> xr.Dataset:
    """The dataset's answers parsed again (by the installed :func:`~icl_cmr.adapters.recall_text.parse_recall`)."""
    settings = json.loads(ds.attrs.get("provenance", "{}")).get("settings", {})
    return battery_from_answers(battery_trials(ds), [str(a) for a in ds["answer"].values],
                                model=ds.attrs.get("model", "model"), settings=settings)


def combine(datasets) -> xr.Dataset:
    """One ``memory_battery`` dataset of several (e.g. one run per effect), answers parsed again."""
    datasets = list(datasets)
    if not datasets:
        raise ParameterError("combine needs at least one memory_battery dataset")
    models = {d.attrs.get("model") for d in datasets}
    if len(models) > 1:
        raise ParameterError(f"the datasets come from different models: {', '.join(sorted(map(str, models)))}")
    trials = [t for d in datasets for t in battery_trials(d)]
    answers = [str(a) for d in datasets for a in d["answer"].values]

    parts = [json.loads(d.attrs.get("provenance", "{}")).get("settings", {}) for d in datasets]
    return battery_from_answers(trials, answers, model=models.pop(), settings={"parts": parts})


def condition_events(ds: xr.Dataset, conditions) -> xr.Dataset:
    """An events dataset (:func:`cmr.from_table`) of the trials of ``conditions``, one subject per condition.

    Trials keep their order within each condition; intrusions keep their text.
    """
    conditions = [conditions] if isinstance(conditions, str) else list(conditions)
    names = ds["condition"].values
    missing = [c for c in conditions if c not in set(names)]
    if missing or not conditions:
        raise ParameterError(f"no trials of condition(s) {', '.join(missing) or 'none'}; the file has "
                             f"{', '.join(dict.fromkeys(names))}")
    rows = []
    for k in np.flatnonzero(np.isin(names, conditions)):
        subject, number = str(names[k]), int(ds["list"].values[k]) + 1
        for pos in range(int(ds["list_length"].values[k])):
            rows.append((subject, number, "study", pos + 1, str(ds["study_item"].values[k, pos])))
        for o, item in enumerate(ds["recall_item"].values[k]):
            if int(ds["recalls"].values[k, o]) != 0:
                rows.append((subject, number, "recall", o + 1, str(item)))
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])
    return from_table(table, source=f"{ds.attrs.get('model', 'model')} memory battery", max_intrusion_share=1)


def validate_memory_battery(ds: xr.Dataset) -> None:
    """Check a ``memory_battery`` dataset (see docs/schema.md)."""
    require_variables(ds, ["condition", "list", "list_length", "study_item", "presentations", "recalls",
                           "recall_item", "answer", "lure", "lure_recalled"], KIND)
    require_dims(ds["recalls"], ["trial", "output_position"], KIND, "recalls")
    require_dims(ds["study_item"], ["trial", "study_position"], KIND, "study_item")
    lengths, recalls = ds["list_length"].values, ds["recalls"].values
    if (lengths < 1).any() or (lengths > ds.sizes["study_position"]).any():
        raise SchemaError(f"{KIND} dataset: list_length must lie in 1..{ds.sizes['study_position']}")
    if (recalls < -1).any() or (recalls > lengths[:, None]).any():
        raise SchemaError(f"{KIND} dataset: recalls must be serial positions within the list, -1 (intrusion) or 0")


register_kind(KIND, validate_memory_battery)
