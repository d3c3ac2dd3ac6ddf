"""The language model as a free-recall subject: its recall, scored and fitted like a person's.

:func:`model_recall` runs the task of :mod:`icl_cmr.adapters.lm.recall_task` on study lists
drawn from a human experiment's word pool and returns an events dataset, so
:func:`cmr.lag_crp`, :func:`cmr.spc`, :func:`cmr.pfr` and :func:`cmr.fit_recall` apply
unchanged. The effect of ablating heads on this recall is
:func:`icl_cmr.analyses.causal.recall.recall_ablation`.

Per-list measures (:data:`MEASURES`): ``crp_forward`` and ``crp_backward``, the list's
lag-CRP at +1 and -1 (actual / possible transitions, psifr's rule; NaN without a possible
transition); ``forward_asymmetry`` = crp(+1) - crp(-1); ``forward_share``, the share of the
list's valid transitions that go forward (defined whenever there is one, unlike crp(-1) after
a recall in studied order, which never has a possible -1); ``n_correct`` (distinct studied items
recalled); ``recall_early`` and ``recall_late``, the recall probability of the first and last
third of the serial positions (the two ends of the SPC); ``temporal_factor``, the mean
percentile rank of each transition's absolute lag among the lags available (Polyn, Norman &
Kahana 2009; :func:`cmr.recall_stats.lag_rank`: 1 = always the nearest item, 0.5 = chance).

Recall with heads ablated is labelled by its head set: the subject ``model|greedy|0`` of the
intact model becomes ``model|greedy|0|ablate:top5`` (``head_set`` of :func:`model_recall`).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from cmr.checks import seed_of
from cmr.crp import lag_crp
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.markdown import markdown_table
from cmr.recall_stats import lag_rank, pfr, spc

from ...adapters.lm import recall_task as task_module
from ...adapters.recall_text import normalise

__all__ = ["MEASURES", "model_recall", "recall_measures", "recall_summary", "report_section"]

#: per-list measures of :func:`recall_measures`
MEASURES = ("crp_forward", "crp_backward", "forward_asymmetry", "forward_share", "n_correct", "recall_early",
            "recall_late", "temporal_factor")


@renamed_keywords(seed="rng")
def model_recall(model, *, pool: str = "psifr:peers_notask", n_lists: int = 20, list_length: int = 16,
                 task: str = "free", decoding: str = "greedy", seeds=(0,), temperature: float = 0.7, rng=0,
                 batch_size: int = 16, heads=(), lists=None, max_new_tokens: int | None = None,
                 head_set: str | None = None):
    """The model's recall of ``n_lists`` lists of ``list_length`` words from ``pool``.

    ``pool`` is a bundled recall data set whose studied items are the word pool (lower-cased),
    or a sequence of words; ``lists`` gives the study lists instead. ``rng`` draws the lists
    (default 0; an int is the seed, kept as the attribute ``list_seed``; a Generator draws one,
    ``int(rng.integers(2**63))``);
    ``seeds`` seed the sampled decoding; the other arguments are those of
    :func:`icl_cmr.adapters.lm.recall_task.generate_answers`.
    Answers are scored with the pool's longest item (in words) as the longest intrusion
    (``max_intrusion_words`` of :func:`icl_cmr.adapters.recall_text.parse_recall`) whenever
    the pool is read here (``lists`` not given, or ``pool`` a sequence).
    With ``heads`` ablated every subject label gets ``|`` and ``head_set`` appended (default
    ``ablate:`` and the heads, ``ablate:L1.H0+L2.H3``), so ablated recall never carries the
    intact model's label.
    Returns ``(events, table)`` as :func:`icl_cmr.adapters.lm.recall_task.recall_events`.
    """
    seed = seed_of(rng)
    words = None
    if lists is None or not isinstance(pool, str):
        words = task_module.word_pool(pool) if isinstance(pool, str) else list(pool)
    if lists is None:
        lists = task_module.study_lists(words, n_lists=n_lists, list_length=list_length, rng=seed)
    longest = max((len(normalise(w).split()) for w in [*(words or ()), *(w for items in lists for w in items)]),
                  default=0)  # never below the studied items' own longest
    events, table = task_module.recall_events(model, lists, task=task, decoding=decoding, seeds=seeds,
                                              temperature=temperature, batch_size=batch_size, heads=heads,
                                              max_new_tokens=max_new_tokens, max_intrusion_words=longest or None)
    events.attrs["pool"] = pool if isinstance(pool, str) else "word list"
    events.attrs["list_seed"] = int(seed)
    if heads:
        label = head_set or "ablate:" + "+".join(f"L{int(l)}.H{int(h)}" for l, h in heads)
        events, table = _labelled(events, table, label)
    return events, table


def _labelled(events, table, label: str):
    """Events and table whose subject labels end in ``|label`` (the ablated head set)."""
    events = events.assign_coords(subject=("trial", np.array([f"{s}|{label}" for s in events["subject"].values],
                                                             dtype=object)))
    events.attrs["head_set"] = label
    table = table.assign(subject=[f"{s}|{label}" for s in table["subject"]])
    return events, table


def recall_measures(events) -> xr.Dataset:
    """Per-list measures (:data:`MEASURES`) of an events dataset, dims ``(trial,)``."""
    crp = lag_crp(events, by="trial")
    actual, possible = crp["actual"], crp["possible"]
    moves = actual.sum("lag").values.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(moves > 0, actual.where(actual["lag"] > 0, 0).sum("lag").values / moves, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (actual / possible.where(possible > 0)).astype(np.float64)
    forward = rate.sel(lag=1, drop=True).values
    backward = rate.sel(lag=-1, drop=True).values
    recalls = events["recalls"].values
    length = events["list_length"].values
    n_trials, n_study = recalls.shape[0], events.sizes["study_position"]
    hit = np.zeros((n_trials, n_study + 1), dtype=bool)
    rows = np.repeat(np.arange(n_trials), recalls.shape[1])
    hit[rows, np.clip(recalls.ravel(), 0, None)] = True
    hit = hit[:, 1:] & (np.arange(1, n_study + 1)[None, :] <= length[:, None])
    third = np.maximum(length // 3, 1)
    early = np.array([hit[t, :third[t]].mean() for t in range(n_trials)])
    late = np.array([hit[t, length[t] - third[t]:length[t]].mean() for t in range(n_trials)])
    temporal = lag_rank(events, by="trial")["rank"].values.astype(np.float64)
    values = dict(crp_forward=forward, crp_backward=backward, forward_asymmetry=forward - backward, forward_share=share,
                  n_correct=hit.sum(axis=1).astype(np.float64), recall_early=early, recall_late=late,
                  temporal_factor=temporal)
    return xr.Dataset({name: ("trial", values[name]) for name in MEASURES},
                      coords={"trial": np.arange(n_trials)})


# --- the study's stage and its report section ------------------------------------------------


#: statistics of the recall ablation kept in the study's summary (rank test first; paired tests beside it)
_SUMMARY_STATS = ("set_effect", "rank", "n_null", "rank_pvalue", "z", "mean_difference", "t_pvalue", "wilcoxon_pvalue",
                  "cohens_dz", "n_lists")


@keyword_only
def recall_summary(events, *, ablation: xr.Dataset | None = None) -> dict:
    """JSON-safe summary of the model's recall (and of an ablation result, if given)."""
    crp = lag_crp(events, by=None, lags=3)
    pooled = crp["actual"] / crp["possible"].where(crp["possible"] > 0)
    out = {
        "lists": int(events.sizes["trial"]),
        "list_length": int(events["list_length"].max()),
        "crp": {int(lag): float(pooled.sel(lag=lag)) for lag in crp["lag"].values if lag != 0},
        "spc_mean": float(spc(events, by=None)["prob"].mean()),
        "pfr_first": float(pfr(events, by=None)["prob"].isel(serial_position=0)),
        "per_list": {name: float(events[name].mean()) for name in
                     ("n_correct", "n_repeats", "n_intrusions", "n_filler", "n_loop") if name in events},
    }
    if "loop_period" in events:  # lists whose answer ended in a decoding loop (stopped, its copies not scored)
        out["lists_with_loop"] = int((events["loop_period"].values > 0).sum())
    if ablation is not None:
        stats = ablation["statistic"]
        kept = [str(k) for k in ablation["stat"].values if str(k) in _SUMMARY_STATS]
        out["ablation"] = {
            "sets": {str(n): int(k) for n, k in zip(ablation["head_set"].values, ablation["n_ablated"].values)},
            "comparisons": {
                str(c): {str(m): {s: float(stats.sel(comparison=c, measure=m, stat=s)) for s in kept}
                         for m in ("crp_forward", "forward_share", "n_correct")}
                for c in ablation["comparison"].values
            },
        }
    return out


def _number(x, digits=3):
    return "nan" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def report_section(summary: dict) -> list[str]:
    """Markdown lines of the report section on the model's own recall."""
    if not summary:
        return []
    if "skipped" in summary:
        return ["## The language model as a free-recall subject", "", f"Not run: {summary['skipped']}", ""]
    crp = {int(lag): value for lag, value in summary["crp"].items()}  # JSON keys of a resumed run are text
    per = summary["per_list"]
    lines = [
        "## The language model as a free-recall subject",
        "",
        f"{summary['lists']} lists of {summary['list_length']} words from the PEERS pool, recalled in any order "
        f"(greedy decoding). Per list: {_number(per.get('n_correct'), 1)} correct recalls, "
        f"{_number(per.get('n_repeats'), 1)} repeats, {_number(per.get('n_intrusions'), 1)} intrusions"
        + (f"; {summary['lists_with_loop']} of {summary['lists']} answers ended in a decoding loop (stopped; its "
           f"repeated copies, {_number(per.get('n_loop'), 1)} items per list, are neither repeats nor intrusions)"
           if "lists_with_loop" in summary else "") + ". "
        "Pooled lag-CRP: " + ", ".join(f"{lag:+d}: {_number(v, 2)}" for lag, v in sorted(crp.items()))
        + f"; first recall from position 1: {_number(summary['pfr_first'], 2)}.",
        "",
    ]
    ablation = summary.get("ablation")
    if ablation:
        rows = []
        for comparison, measures in ablation["comparisons"].items():
            if comparison.endswith("_vs_none") and not comparison.startswith("top"):
                continue
            for measure, st in measures.items():
                ranked = np.isfinite(st.get("rank_pvalue", np.nan))
                rank = f"{st['rank']:.0f} of {st['n_null'] + 1:.0f}" if ranked else ""
                rows.append((comparison, measure, _number(st.get("set_effect", st["mean_difference"])), rank,
                             _number(st["rank_pvalue"], 3) if ranked else "", _number(st["z"], 2) if ranked else "",
                             _number(st["t_pvalue"], 4), _number(st["wilcoxon_pvalue"], 4),
                             _number(st["cohens_dz"], 2), f"{int(st['n_lists'])}"))
        lines += markdown_table(("comparison", "measure", "effect", "rank among random sets", "rank p", "z",
                                 "paired t p", "Wilcoxon p", "d_z", "lists"), rows, align="llrrrrrrrr").split("\n")
        lines += ["", "Zero ablation during generation; effects are ablated - intact per list (paired over the same "
                  "lists), averaged over the lists where the measure is defined. Against random sets the test is the "
                  "target set's rank among them (1 = the lowest effect; one-sided p = (1 + #{random <= target}) / "
                  "(1 + random sets), the set lowers the measure more than random sets) and z against their mean and "
                  "sd; the paired t and Wilcoxon of the set's effect minus the random sets' mean effect over lists are "
                  "secondary (they grow with lists for any fixed set). Against none they are the test.", ""]
    return lines
