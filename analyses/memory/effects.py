"""Classic memory effects of a ``memory_battery`` dataset: statistics, verdicts, human-likeness.

:func:`battery_effects` scores every effect whose conditions the dataset holds
(:mod:`icl_cmr.analyses.memory.battery`) and adds to it

* one row per statistic (dim ``statistic``): the estimate, its 95% bootstrap interval over
  lists, a p-value where a test fits, the human reference and a verdict: ``present`` (the
  interval excludes 0 in the human direction), ``reversed`` (it excludes 0 the other way),
  ``absent`` (the interval lies inside ``±margin``, an equivalence band) or ``not detected``
  (neither: the test lacks power at this size); a level with no test (the DRM lists' studied
  recall, the raw semantic rank) is ``descriptive``; an effect whose lists' recall probability
  is below :data:`FLOOR` (5%) is ``not detected`` whatever its interval (column ``floor``): a
  subject that recalls nothing shows no primacy trivially;
* human-likeness per measure (dim ``measure``): 1 - W1, the Wasserstein-1 distance between the
  model's per-list scores and the per-subject scores of people (``psifr:peers_notask``; the
  semantic rank against ``psifr:Morton2013``), next to the same number for people's own single
  lists (random draws of as many human lists as the model has), so that a model below the 2.5th
  percentile of people's lists ``goes against human-likeness``;
* CMR fitted to the model's serial-position lists by :func:`cmr.fit_recall`, the human fitting
  code (dim ``parameter``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError
from cmr.crp import lag_crp
import cmr

from ...adapters.item_pools import load_item_patterns
from ...adapters.recall_data import load_recall_data
from ...adapters.recall_text import normalise
from .battery import condition_events, validate_memory_battery
from .llm_recall import recall_measures

__all__ = ["FLOOR", "LIKENESS_MEASURES", "REFERENCES", "hits", "position_scores", "semantic_ranks", "bootstrap_ci",
           "verdict", "human_semantic_scores",
           "serial_position_rows", "list_length_rows", "list_strength_rows", "drm_rows", "semantic_rows",
           "human_scores", "human_likeness", "battery_effects", "verdict_lines"]

#: measures compared with people's per-subject distributions (1 - W1)
LIKENESS_MEASURES = ("p_recall", "primacy", "recency", "crp_forward", "crp_backward", "semantic_rank")
#: the published human result behind each effect
REFERENCES = {
    "serial_position": "PEERS (psifr:peers_notask), 126 subjects, 16-word lists",
    "list_length": "Murdock (1962): for lists of 10 to 40 words the number recalled rises and the recall "
                   "probability falls",
    "list_strength": "Tulving & Hastie (1972); Ratcliff, Clark & Shiffrin (1990): in free recall strong items of a "
                     "mixed list are recalled better than its weak items and the weak items worse than in a pure "
                     "weak list (ratio of ratios > 1)",
    "drm": "Roediger & McDermott (1995): critical lures recalled on 40% (Exp. 1) and 55% (Exp. 2) of lists",
    "semantic": "Morton & Polyn (psifr:Morton2013): people's semantic rank per subject",
}
STRENGTH = ("strength_pure_weak", "strength_mixed", "strength_pure_strong")
_TOL = 1e-9
#: below this recall probability of an effect's lists, no verdict is drawn on it ("not detected")
FLOOR = 0.05
_ENDS = 3  # serial positions at each end of the list for primacy and recency


def hits(recalls, list_length) -> np.ndarray:
    """(trial, max length) bool: the studied position was recalled (repeats and intrusions ignored)."""
    recalls, lengths = np.asarray(recalls), np.asarray(list_length)
    n_study = int(lengths.max())
    out = np.zeros((recalls.shape[0], n_study + 1), dtype=bool)
    rows = np.repeat(np.arange(recalls.shape[0]), recalls.shape[1])
    out[rows, np.clip(recalls.ravel(), 0, None)] = True
    return out[:, 1:] & (np.arange(1, n_study + 1)[None, :] <= lengths[:, None])


def _first(recalls) -> np.ndarray:
    """Serial position of each list's first recall (0 when it is an intrusion or there is none)."""
    first = np.asarray(recalls)[:, 0] if np.asarray(recalls).shape[1] else np.zeros(len(recalls), dtype=int)
    return np.where(first > 0, first, 0)


def position_scores(recalls, list_length) -> pd.DataFrame:
    """Per-list ``p_recall``, ``primacy`` and ``recency`` (recall of the first / last 3 positions
    minus the middle ones; NaN for lists under 7 items) and ``pfr_end_minus_start`` (first recall
    from the last position minus from the first: +1, 0 or -1)."""
    hit, lengths = hits(recalls, list_length), np.asarray(list_length)
    rows = []
    for t, length in enumerate(lengths):
        h = hit[t, :length].astype(float)
        middle = h[_ENDS:length - _ENDS].mean() if length > 2 * _ENDS else np.nan
        rows.append((h.mean(), h[:_ENDS].mean() - middle, h[length - _ENDS:].mean() - middle))
    frame = pd.DataFrame(rows, columns=["p_recall", "primacy", "recency"])
    first = _first(recalls)
    frame["pfr_end_minus_start"] = (first == lengths).astype(float) - (first == 1).astype(float)
    return frame


def semantic_ranks(recalls, study_items, similarity, index_of) -> tuple[np.ndarray, np.ndarray]:
    """Per-list mean semantic rank of transitions and their number (psifr's distance rank).

    A transition between two correct first recalls (intrusions and repeats break the chain)
    scores the share of the items still available whose similarity to the previous item is
    below the chosen one's (ties count half): 1 = the most similar item, 0.5 = chance.
    """
    recalls = np.asarray(recalls)
    means, counts = np.full(len(recalls), np.nan), np.zeros(len(recalls), dtype=np.int64)
    for t, row in enumerate(recalls):
        items = [str(w) for w in study_items[t] if str(w)]
        index = np.array([index_of[w.casefold()] for w in items])
        available = np.ones(len(items), dtype=bool)
        prev, ranks = None, []
        for r in row:
            if r <= 0 or not available[r - 1]:
                prev = None if r != 0 else prev
                if r == 0:
                    break
                continue
            if prev is not None and available.sum() > 1:
                sims = similarity[index[prev], index[available]]
                chosen = similarity[index[prev], index[r - 1]]
                ranks.append(((sims < chosen).sum() + 0.5 * ((sims == chosen).sum() - 1)) / (available.sum() - 1))
            available[r - 1], prev = False, r - 1
        if ranks:
            means[t], counts[t] = np.mean(ranks), len(ranks)
    return means, counts


def _nanmean(values, axis=None):
    """Mean over the finite values (NaN where there are none), without numpy's empty-slice warning."""
    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x)
    n = finite.sum(axis=axis)
    total = np.where(finite, x, 0.0).sum(axis=axis)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


@renamed_keywords(seed="rng")
def bootstrap_ci(values, *, n_boot: int = 2000, rng=0, level: float = 0.95):
    """(mean, low, high) of ``values`` (NaNs dropped), a percentile bootstrap over them, drawn with
    ``numpy.random.default_rng(rng)`` (a Generator ``rng`` is used as is)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return np.nan, np.nan, np.nan
    draws = as_generator(rng).choice(x, size=(int(n_boot), x.size)).mean(axis=1)
    a = (1 - level) / 2
    return float(x.mean()), float(np.quantile(draws, a)), float(np.quantile(draws, 1 - a))


def verdict(estimate, low, high, *, direction: int = 1, margin: float = 0.0) -> str:
    """``present`` / ``reversed`` / ``absent`` / ``not detected`` (see the module docstring)."""
    if not np.isfinite(low) or not np.isfinite(high):
        return "not detected"
    if low > _TOL or high < -_TOL:  # an interval of rounding errors around 0 is 0
        return "present" if np.sign(estimate) == np.sign(direction) else "reversed"
    return "absent" if -margin < low and high < margin else "not detected"


def _row(effect, statistic, values_or_ci, *, direction=1, margin=0.05, p=np.nan, n=None, human=np.nan, seed=0):
    est, low, high = (bootstrap_ci(values_or_ci, rng=seed) if not isinstance(values_or_ci, tuple)
                      else values_or_ci)
    n = int(np.isfinite(np.asarray(values_or_ci, dtype=float)).sum()) if n is None else int(n)
    return dict(effect=effect, statistic=statistic, estimate=est, ci_low=low, ci_high=high, p_value=float(p), n=n,
                verdict=verdict(est, low, high, direction=direction, margin=margin) if direction else "descriptive",
                human=float(human))


def _trials(ds, condition):
    return np.flatnonzero(ds["condition"].values == condition)


@keyword_only
def serial_position_rows(ds, *, human: pd.DataFrame | None = None) -> list[dict]:
    """Primacy, recency and the first recall (end minus start) of the ``serial_position`` lists."""
    rows = _trials(ds, "serial_position")
    scores = position_scores(ds["recalls"].values[rows], ds["list_length"].values[rows])
    ref = human.mean() if human is not None else pd.Series(dtype=float)
    return [_row("serial_position", name, scores[name].to_numpy(), human=ref.get(name, np.nan))
            for name in ("primacy", "recency", "pfr_end_minus_start")]


def _slope_ci(x, y, *, n_boot=2000, seed=0):
    """Least-squares slope of y on x per 10 units, bootstrap resampling lists within each x."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    groups = [np.flatnonzero(x == v) for v in np.unique(x)]
    slope = lambda idx: np.polyfit(x[idx], y[idx], 1)[0] * 10  # noqa: E731
    rng = np.random.default_rng(seed)
    draws = [slope(np.concatenate([rng.choice(g, size=g.size) for g in groups])) for _ in range(int(n_boot))]
    return float(slope(np.arange(x.size))), float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))


def list_length_rows(ds) -> list[dict]:
    """Slopes per 10 words of the number recalled (expected > 0) and of the recall probability (< 0)."""
    conditions = [c for c in dict.fromkeys(ds["condition"].values) if str(c).startswith("length_")]
    rows = np.concatenate([_trials(ds, c) for c in conditions])
    lengths = ds["list_length"].values[rows]
    n = hits(ds["recalls"].values[rows], lengths).sum(axis=1).astype(float)
    return [_row("list_length", "n_recalled_per_10_words", _slope_ci(lengths, n), margin=0.5, n=rows.size),
            _row("list_length", "p_recall_per_10_words", _slope_ci(lengths, n / lengths), direction=-1, margin=0.02,
                 n=rows.size)]


@renamed_keywords(seed="rng")
def list_strength_rows(ds, *, n_boot: int = 2000, rng=0) -> list[dict]:
    """Strong minus weak in mixed lists, mixed weak minus pure weak (the same items), log ratio of ratios.

    ``rng``: an int is the seed of every bootstrap; a Generator draws one (``int(rng.integers(2**63))``)."""
    seed = seed_of(rng)
    parts = {}
    for condition in STRENGTH:
        rows = _trials(ds, condition)
        order = np.argsort(ds["list"].values[rows])
        rows = rows[order]
        h = hits(ds["recalls"].values[rows], ds["list_length"].values[rows]).astype(float)
        strong = ds["presentations"].values[rows][:, :h.shape[1]] >= 2
        parts[condition] = (h, strong)
    (hw, _), (hm, strong), (hs, _) = (parts[c] for c in STRENGTH)
    n = min(len(hw), len(hm), len(hs))
    hw, hm, strong, hs = hw[:n], hm[:n], strong[:n], hs[:n]
    valid = strong.any(axis=1) & (~strong).any(axis=1)
    s_mixed = np.where(valid, (hm * strong).sum(1) / np.maximum(strong.sum(1), 1), np.nan)
    w_mixed = np.where(valid, (hm * ~strong).sum(1) / np.maximum((~strong).sum(1), 1), np.nan)
    # the mixed list's weak items, once in the pure weak list (the same words): the list-strength effect
    w_pure = np.where(valid, (hw * ~strong).sum(1) / np.maximum((~strong).sum(1), 1), np.nan)
    s_pure, all_weak = hs.mean(1), hw.mean(1)

    def log_ror(idx):
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.log(_nanmean(s_mixed[idx]) / _nanmean(w_mixed[idx]))
                         - np.log(_nanmean(s_pure[idx]) / _nanmean(all_weak[idx])))

    rng = np.random.default_rng(seed)
    draws = np.array([log_ror(rng.integers(0, n, n)) for _ in range(int(n_boot))])
    draws = draws[np.isfinite(draws)]
    ror = (log_ror(np.arange(n)), *(np.quantile(draws, [0.025, 0.975]) if draws.size else (np.nan, np.nan)))
    return [_row("list_strength", "mixed_strong_minus_weak", s_mixed - w_mixed, seed=seed),
            _row("list_strength", "weak_mixed_minus_pure", w_mixed - w_pure, direction=-1, seed=seed),
            _row("list_strength", "pure_strong_minus_weak", s_pure - all_weak, seed=seed),
            _row("list_strength", "log_ratio_of_ratios", tuple(map(float, ror)), margin=np.log(1.1), n=n)]


@renamed_keywords(seed="rng")
def drm_rows(ds, *, rng=0) -> list[dict]:
    """False recall of the critical lure against the other lists' lures (a sign test over lists);
    ``rng`` as in :func:`list_strength_rows`."""
    from scipy.stats import binomtest

    seed = seed_of(rng)

    rows = _trials(ds, "drm")
    lures = [normalise(x) for x in ds["lure"].values[rows]]
    every = sorted(set(lures))
    said = [{normalise(i) for i in ds["recall_item"].values[k] if str(i)} for k in rows]
    own = np.array([lure in s for lure, s in zip(lures, said)], dtype=float)
    other = np.array([np.mean([o in s for o in every if o != lure]) if len(every) > 1 else np.nan
                      for lure, s in zip(lures, said)])
    diff = own - other
    up, down = int((diff > 0).sum()), int((diff < 0).sum())
    p = binomtest(up, up + down, 0.5, alternative="greater").pvalue if up + down else np.nan
    studied = hits(ds["recalls"].values[rows], ds["list_length"].values[rows]).mean(axis=1)
    return [_row("drm", "lure_minus_other_lures", diff, p=p, human=0.40, seed=seed),
            _row("drm", "critical_lure_rate", own, margin=0.02, human=0.40, seed=seed),
            _row("drm", "studied_recall", studied, direction=0, seed=seed)]


def _similarity(source: str = "psifr:Morton2013"):
    pool = load_item_patterns(source, categories=False)
    return pool.similarity, {str(w).casefold(): k for k, w in enumerate(pool.items)}


@keyword_only
@renamed_keywords(seed="rng")
def semantic_rows(ds, *, human: pd.Series | None = None, n_perm: int = 1000, rng=0,
                  similarity=None) -> tuple[list[dict], np.ndarray]:
    """The semantic rank of the ``semantic`` lists against a null that shuffles each list's recall order.

    Returns the rows and the per-list ranks (for human-likeness). ``rng`` as in
    :func:`list_strength_rows` (the null and the bootstraps share its seed).
    """
    seed = seed_of(rng)
    similarity, index_of = similarity or _similarity()
    rows = _trials(ds, "semantic")
    recalls, items = ds["recalls"].values[rows], ds["study_item"].values[rows]
    observed, counts = semantic_ranks(recalls, items, similarity, index_of)
    rng = np.random.default_rng(seed)
    null = np.zeros((int(n_perm), len(rows)))
    for b in range(int(n_perm)):
        shuffled = recalls.copy()
        for t, row in enumerate(recalls):
            valid = np.flatnonzero(row > 0)
            shuffled[t, valid] = row[valid][rng.permutation(valid.size)]
        null[b] = semantic_ranks(shuffled, items, similarity, index_of)[0]
    keep = counts > 0
    obs_mean, null_means = _nanmean(observed[keep]), _nanmean(null[:, keep], axis=1)
    p = (1 + np.sum(null_means >= obs_mean)) / (1 + n_perm) if keep.any() else np.nan
    excess = observed - _nanmean(null, axis=0)
    ref = float(human.mean()) if human is not None else np.nan
    return ([_row("semantic", "rank_minus_shuffled", excess, margin=0.02, p=p, seed=seed),
             _row("semantic", "semantic_rank", observed, direction=0, human=ref, seed=seed)], observed)


@keyword_only
def human_scores(*, source: str = "psifr:peers_notask") -> tuple[pd.DataFrame, pd.DataFrame]:
    """People's scores of :data:`LIKENESS_MEASURES` (but the semantic rank): per subject and per list."""
    events = load_recall_data(source)
    per_list = position_scores(events["recalls"].values, events["list_length"].values)
    crp = recall_measures(events)
    per_list["crp_forward"], per_list["crp_backward"] = crp["crp_forward"].values, crp["crp_backward"].values
    per_list["subject"] = events["subject"].values
    per_subject = per_list.groupby("subject").mean()
    pooled = lag_crp(events, by="subject", lags=1)
    rate = pooled["actual"] / pooled["possible"].where(pooled["possible"] > 0)
    for name, lag in (("crp_forward", 1), ("crp_backward", -1)):  # psifr's subject CRP: counts pooled over lists
        per_subject[name] = pd.Series(rate.sel(lag=lag).values, index=pooled["subject"].values)
    return per_subject, per_list.drop(columns="subject")


@keyword_only
def human_semantic_scores(*, source: str = "psifr:Morton2013", similarity=None) -> tuple[pd.Series, np.ndarray]:
    """People's semantic rank per subject (transitions pooled over lists) and per list."""
    similarity, index_of = similarity or _similarity()
    events = load_recall_data(source)
    means, counts = semantic_ranks(events["recalls"].values, events["study_item"].values, similarity, index_of)
    frame = pd.DataFrame(dict(subject=events["subject"].values, total=np.nan_to_num(means) * counts, n=counts))
    sums = frame.groupby("subject")[["total", "n"]].sum()
    return (sums["total"] / sums["n"].where(sums["n"] > 0)).dropna(), means[counts > 0]


@renamed_keywords(seed="rng")
def human_likeness(model_values, subject_values, human_list_values, *, n_draws: int = 500, rng=0) -> dict:
    """1 - W1 of the model's per-list scores to people's per-subject scores, beside people's own lists.

    The baseline draws as many of people's single lists as the model has (``n_draws`` times) and
    scores them the same way; below its 2.5th percentile the model ``goes against
    human-likeness``, otherwise it is ``within people's range``. The draws use
    ``numpy.random.default_rng(rng)`` (a Generator ``rng`` is used as is).
    """
    from scipy.stats import wasserstein_distance

    model = np.asarray(model_values, float)
    model = model[np.isfinite(model)]
    subjects = np.asarray(subject_values, float)
    subjects = subjects[np.isfinite(subjects)]
    lists = np.asarray(human_list_values, float)
    lists = lists[np.isfinite(lists)]
    if model.size == 0 or subjects.size == 0 or lists.size == 0:
        return dict(one_minus_w1=np.nan, baseline_median=np.nan, baseline_low=np.nan, n_model=int(model.size),
                    likeness="not detected")
    score = 1 - wasserstein_distance(model, subjects)
    rng = as_generator(rng)
    base = np.array([1 - wasserstein_distance(rng.choice(lists, size=model.size), subjects) for _ in range(n_draws)])
    low = float(np.quantile(base, 0.025))
    return dict(one_minus_w1=float(score), baseline_median=float(np.median(base)), baseline_low=low,
                n_model=int(model.size),
                likeness="goes against human-likeness" if score < low else "within people's range")


def _model_list_scores(ds) -> pd.DataFrame:
    rows = _trials(ds, "serial_position")
    scores = position_scores(ds["recalls"].values[rows], ds["list_length"].values[rows])
    events = condition_events(ds, "serial_position")  # trials in list order, as rows are
    crp = recall_measures(events)
    scores["crp_forward"], scores["crp_backward"] = crp["crp_forward"].values, crp["crp_backward"].values
    return scores


def _cmr_fit(ds, *, seed: int = 0, n_restarts="auto"):
    fit = cmr.fit_recall(condition_events(ds, "serial_position"), by=None, n_restarts=n_restarts, rng=seed,
                         progress=False)
    return fit


def _floors(ds) -> dict:
    """Recall probability of the studied words of each effect's lists."""
    conditions = ds["condition"].values
    recall = hits(ds["recalls"].values, ds["list_length"].values).sum(axis=1) / ds["list_length"].values
    effect = np.array(["list_length" if str(c).startswith("length_") else "list_strength"
                       if str(c).startswith("strength_") else str(c) for c in conditions])
    return {name: float(recall[effect == name].mean()) for name in set(effect)}


@renamed_keywords(seed="rng")
def battery_effects(ds: xr.Dataset, *, human: str = "psifr:peers_notask", semantic_human: str = "psifr:Morton2013",
                    n_perm: int = 1000, fit: bool = True, rng=0, human_data=None) -> xr.Dataset:
    """``ds`` with the statistics, human-likeness and CMR fit of every effect it holds (a new dataset).

    The CMR fit (``fit``) is skipped when the serial-position lists recall under :data:`FLOOR`.

    ``human_data`` (optional) gives the human scores instead of reading them:
    ``(per_subject, per_list, semantic_per_subject, semantic_per_list)`` as returned by
    :func:`human_scores` and :func:`human_semantic_scores`; ``similarity`` is then read only
    when the dataset has semantic lists.

    ``rng`` seeds every bootstrap, null and fit (default 0): an int is the seed; a Generator
    draws one (``int(rng.integers(2**63))``); None draws one from fresh entropy. The seed used is
    the attribute ``effects_seed``.
    """
    seed = seed_of(rng)

    validate_memory_battery(ds)
    names = set(ds["condition"].values)
    if human_data is None:
        subjects, lists = human_scores(source=human) if "serial_position" in names else (None, None)
        sem_subjects, sem_lists = human_semantic_scores(source=semantic_human) if "semantic" in names else (None, None)
    else:
        subjects, lists, sem_subjects, sem_lists = human_data
    rows, likeness = [], {}
    if "serial_position" in names:
        rows += serial_position_rows(ds, human=subjects)
        scores = _model_list_scores(ds)
        for name in LIKENESS_MEASURES[:-1]:
            likeness[name] = human_likeness(scores[name], subjects[name], lists[name], rng=seed)
    if sum(str(c).startswith("length_") for c in names) >= 2:
        rows += list_length_rows(ds)
    if set(STRENGTH) <= names:
        rows += list_strength_rows(ds, rng=seed)
    if "drm" in names:
        rows += drm_rows(ds, rng=seed)
    if "semantic" in names:
        sem, observed = semantic_rows(ds, human=sem_subjects, n_perm=n_perm, rng=seed)
        rows += sem
        likeness["semantic_rank"] = human_likeness(observed, sem_subjects, sem_lists, rng=seed)
    if not rows:
        raise ParameterError("the dataset holds no complete effect: it needs serial_position, two length_ "
                             "conditions, the three strength_ conditions, drm or semantic lists")
    floors = _floors(ds)
    for row in rows:
        recall = floors.get(row["effect"], 1.0)
        row["floor"] = "" if recall >= FLOOR else f"recall at floor ({100 * recall:.1f}% of studied words)"
        if row["floor"] and row["verdict"] != "descriptive":
            row["verdict"] = "not detected"
    for name, entry in likeness.items():
        recall = floors.get("semantic" if name == "semantic_rank" else "serial_position", 1.0)
        if name != "p_recall" and recall < FLOOR:
            entry["likeness"] = "not detected"
    out = ds.copy()
    table = pd.DataFrame(rows)
    for column in table.columns:
        values = table[column].to_numpy(dtype=object if table[column].dtype == object else None)
        out[f"effect_{column}" if column in ("estimate", "n") else column] = ("statistic", values)
    out = out.rename({"effect_estimate": "estimate", "effect_n": "n_units"})
    if likeness:
        frame = pd.DataFrame(likeness).T
        out = out.assign_coords(measure=list(frame.index))
        for column in frame.columns:
            out[column] = ("measure", frame[column].to_numpy(dtype=object if column == "likeness" else float))
    if fit and "serial_position" in names and floors["serial_position"] >= FLOOR:  # no fit of (almost) no recall
        result = _cmr_fit(ds, seed=seed)
        out = out.assign_coords(parameter=result["parameter"].values)
        out["cmr_value"] = ("parameter", result["value"].values.astype(float))
        out["cmr_at_bound"] = ("parameter", result["at_bound"].values.astype(np.int64))
        out.attrs.update(cmr_logl=float(result["logl"]), cmr_events=int(result["n"]),
                         cmr_converged=int(bool(result["converged"])))
    out.attrs.update(human=human, semantic_human=semantic_human, n_perm=int(n_perm), effects_seed=int(seed))
    return out


def verdict_lines(ds: xr.Dataset) -> list[str]:
    """One printed line per statistic and per human-likeness measure."""
    def num(x, d=3):
        return "nan" if not np.isfinite(x) else f"{x:.{d}f}"

    lines = []
    for k in range(ds.sizes.get("statistic", 0)):
        p = float(ds["p_value"].values[k])
        human = float(ds["human"].values[k])
        lines.append(f"{ds['effect'].values[k]:15s} {ds['statistic'].values[k]:26s} {ds['verdict'].values[k]:12s} "
                     f"{num(float(ds['estimate'].values[k]))} [{num(float(ds['ci_low'].values[k]))}, "
                     f"{num(float(ds['ci_high'].values[k]))}]" + (f" p={num(p, 4)}" if np.isfinite(p) else "")
                     + f" n={int(ds['n_units'].values[k])}" + (f"; people {num(human)}" if np.isfinite(human) else "")
                     + (f"; {ds['floor'].values[k]}" if "floor" in ds and ds["floor"].values[k] else ""))
    for name in ds.coords.get("measure", xr.DataArray([])).values:
        row = ds.sel(measure=name)
        lines.append(f"{'human-likeness':15s} {str(name):26s} 1-W1 {num(float(row['one_minus_w1']))} (people's lists: "
                     f"median {num(float(row['baseline_median']))}, 2.5% {num(float(row['baseline_low']))}; "
                     f"{int(row['n_model'])} lists): {row['likeness'].item()}")
    if "cmr_value" in ds:
        lines.append("CMR fit (serial-position lists pooled): " + ", ".join(
            f"{p} {v:.3f}" + (" (at a bound)" if b else "")
            for p, v, b in zip(ds["parameter"].values, ds["cmr_value"].values, ds["cmr_at_bound"].values))
            + f"; logl {ds.attrs['cmr_logl']:.1f} over {ds.attrs['cmr_events']} events")
    return lines
