"""Causal test: does ablating the CMR-like heads hurt in-context learning more than random heads?

ICL score of a passage (Olsson et al. 2022): the loss at text token ``late`` (500)
minus the loss at text token ``early`` (50), each averaged over a +-``window`` (5) token window;
negative when the model predicts better late in a passage, i.e. learns in context. Token indices
are 0-based positions in the passage text; a BOS token is prepended when the tokenizer has one.

Heads are ablated at their output, set to zero or to their mean output
(:mod:`icl_cmr.adapters.lm.interventions`, where every torch call of the test lives).

The test (per mode) works on per-passage effects ``icl_ablated - icl_unablated``. Primary: the
place of the top set's mean effect among seeded random sets of the same size, drawn uniformly
among all heads (so the top set is exchangeable with them under the null): the exact
permutation p ``(1 + #{random >= top}) / (1 + n_random)`` and z against the random sets' mean
and sd. Beside it: the same among layer-matched random sets, a control set of top induction
heads ranked the same way, the contrast with the random sets' mean with set and article as
crossed random effects, paired tests over articles between fixed sets (t-test, Wilcoxon,
Cohen's d_z with intervals), and Holm's correction across modes and comparisons. See
docs/ablation.md.
"""
from __future__ import annotations

import re
import time

import numpy as np
from tqdm.auto import tqdm
import xarray as xr

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed_keywords, warn
from cmr.errors import ParameterError, SchemaError
from cmr import multiple_comparisons
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from . import measures as am
from ...adapters.head_ranking import top_heads
from ...adapters.lm.ablation_engine import donor_passages, set_losses
from ...adapters.lm.interventions import SET_MODES as MODES, geometry
from .design import AblationDesign
from .measures import describe
from .power import holm_rank_floor, rank_family_size
from .statistics import COMPARISONS as COMPARISONS
from .statistics import MIN_BOOTSTRAP_PASSAGES as MIN_BOOTSTRAP_PASSAGES
from .statistics import HOLM_FAMILIES, NULL_FAMILIES, STAT_NAMES, comparison_statistics, unit_name
from .statistics import comparison_text as comparison_text
from .statistics import effect_intervals as effect_intervals
from .statistics import holm as holm  # deprecated, kept for one release: cmr.holm
from .statistics import paired_statistics as paired_statistics
from .statistics import rank_pvalue as rank_pvalue

__all__ = [
    "MODES",
    "parse_heads",
    "random_head_sets",
    "head_sets",
    "icl_scores",
    "scored_positions",
    "validate_ablation",
    "paired_statistics",
    "rank_pvalue",
    "holm",
    "holm_rank_floor",
    "rank_family_size",
    "effect_intervals",
    "COMPARISONS",
    "run_ablation",
    "summary_lines",
    "comparison_text",
]

_HEAD_PATTERN = re.compile(r"^\s*L(\d+)\.?H(\d+)\s*$", re.I)


# --- head sets ---------------------------------------------------------------------------------


def parse_heads(text: str) -> list[tuple[int, int]]:
    """``"L18.H6,L17.H3"`` -> ``[(18, 6), (17, 3)]``."""
    heads = []
    for part in str(text).split(","):
        if not part.strip():
            continue
        match = _HEAD_PATTERN.match(part)
        if match is None:
            raise ParameterError(f"heads must look like L18.H6,L17.H3; could not read {part.strip()!r}")
        heads.append((int(match.group(1)), int(match.group(2))))
    if not heads:
        raise ParameterError(f"no heads given in {text!r}; expected e.g. L18.H6,L17.H3")
    if len(set(heads)) != len(heads):
        raise ParameterError(f"heads repeat in {text!r}")
    return heads


@keyword_only
def top_heads_from_fits(fits: xr.Dataset, *, fraction: float = 0.1, variable: str = "distance",
                        n_heads: int | None = None, largest: bool = False) -> list[tuple[int, int]]:
    """Deprecated: :func:`icl_cmr.adapters.head_ranking.top_heads` (``variable`` second, the rest by keyword)."""
    warn("icl_cmr.analyses.causal.ablation.top_heads_from_fits is deprecated and will be removed in the next "
         "release; use icl_cmr.adapters.head_ranking.top_heads", skip=1)
    return top_heads(fits, variable=variable, fraction=fraction, n_heads=n_heads, largest=largest)


def check_heads(heads, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """``heads`` as (layer, head) int pairs, each refused unless inside a model of ``n_layers`` x ``n_heads``."""
    heads = [(int(l), int(h)) for l, h in heads]
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ParameterError(f"head L{layer}.H{head} is outside the model ({n_layers} layers x {n_heads} heads)")
    return heads


@keyword_only
@renamed_keywords(seed="rng")
def random_head_sets(n_layers: int, n_heads: int, target, *, n_sets: int, rng,
                     layer_matched: bool = False, exclude_target: bool = True) -> list[list[tuple[int, int]]]:
    """``n_sets`` seeded random head sets of the size of ``target``.

    Plain sets are drawn among the heads outside ``target`` (``exclude_target``, the default),
    or, with ``exclude_target=False``, uniformly among all heads, each set independently: then
    ``target`` is exchangeable with the sets if it was chosen at random, which makes a rank
    test's p exact (a set may repeat another or share heads with ``target``). With ``layer_matched`` each set
    has as many heads in every layer as ``target``, drawn uniformly among all heads of that
    layer (the top set's own heads included: a layer may hold more top heads than others, and
    the top set is then one possible draw, which is what the rank test's null says). Sets are
    drawn from ``rng`` (an int seed is ``numpy.random.default_rng(rng)``; a Generator is used as
    is) and each is sorted by (layer, head).
    """
    target = check_heads(target, n_layers, n_heads)
    rng = as_generator(rng)
    sets = []
    if layer_matched:
        per_layer = {}
        for layer, _ in target:
            per_layer[layer] = per_layer.get(layer, 0) + 1
        for _ in range(int(n_sets)):
            chosen = []
            for layer in sorted(per_layer):
                chosen.extend((layer, int(h)) for h in rng.choice(n_heads, size=per_layer[layer], replace=False))
            sets.append(sorted(chosen))
        return sets
    taken = set(target) if exclude_target else set()
    pool = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in taken]
    if len(pool) < len(target):
        raise ParameterError(f"random sets of {len(target)} heads need that many heads outside the top set; {len(pool)} remain")
    for _ in range(int(n_sets)):
        picks = rng.choice(len(pool), size=len(target), replace=False)
        sets.append(sorted(pool[i] for i in picks))
    return sets


@keyword_only
def icl_scores(losses, targets, *, early=50, late=500, window=5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(icl_score, loss_early, loss_late) per passage from :func:`passage_losses` output."""
    targets = list(np.asarray(targets).tolist())
    early_cols = [targets.index(t) for t in range(early - window, early + window + 1)]
    late_cols = [targets.index(t) for t in range(late - window, late + window + 1)]
    loss_early = losses[:, early_cols].mean(axis=1)
    loss_late = losses[:, late_cols].mean(axis=1)
    return loss_late - loss_early, loss_early, loss_late


def scored_positions(early, late, window, n_tokens):
    """Text positions whose loss the ICL score reads: the early and late windows."""
    if early - window < 0 or late + window >= n_tokens or early + window >= late - window:
        raise ParameterError(
            f"windows {early}+-{window} and {late}+-{window} must be disjoint and lie in 0..{n_tokens - 1} "
            f"(passages of {n_tokens} tokens)"
        )
    return np.r_[early - window: early + window + 1, late - window: late + window + 1].astype(np.int64)


# --- the whole test ----------------------------------------------------------------------------


@renamed_keywords(seed="rng")
def head_sets(n_layers: int, n_heads: int, top_heads, *, n_random: int = 50, n_matched: int = 50, rng=0,
              control_heads=None) -> tuple[list[list[tuple[int, int]]], list[str], list[str]]:
    """The sets of the test: (sets, names, families), the top set first.

    ``control_heads`` (e.g. the top induction heads) form the set ``induction``; ``n_random``
    random sets (family ``random``) drawn uniformly among all heads and ``n_matched``
    layer-matched sets (``layer_matched``), with seeds ``seed`` and ``seed + 1``
    (:func:`random_head_sets`): each set is an independent draw from the design the top set's
    null describes, so the rank p is exact. ``rng``: an int is ``seed``; a Generator draws one
    (``int(rng.integers(2**63))``); None draws one from fresh entropy.
    """
    seed = seed_of(rng)
    top_heads = [(int(l), int(h)) for l, h in top_heads]
    if not top_heads:
        raise ParameterError("the top head set is empty")
    sets, names, families = [sorted(top_heads)], ["top"], ["top"]
    if control_heads is not None:
        control = sorted((int(l), int(h)) for l, h in control_heads)
        if len(control) != len(top_heads):
            raise ParameterError(f"the control set has {len(control)} heads; the top set has {len(top_heads)}")
        sets.append(control), names.append("induction"), families.append("induction")
    if n_random > 0:
        sets += random_head_sets(n_layers, n_heads, top_heads, n_sets=n_random, rng=seed, exclude_target=False)
        names += [f"random_{i:03d}" for i in range(n_random)]
        families += ["random"] * n_random
    if n_matched > 0:
        sets += random_head_sets(n_layers, n_heads, top_heads, n_sets=n_matched, rng=seed + 1, layer_matched=True)
        names += [f"matched_{i:03d}" for i in range(n_matched)]
        families += ["layer_matched"] * n_matched
    return sets, names, families


@keyword_only
@renamed_keywords(seed="rng")
def run_ablation(bridge, passages, top_heads, *, design=None, control_heads=None, rng=0, time_budget_s=None,
                 progress=True, info=None, articles=None, n_random=None, n_matched=None, modes=None, measures=None,
                 early=None, late=None, window=None, batch_size=None, n_boot=None, wide_early=None, wide_late=None,
                 repeat_length=None) -> xr.Dataset:
    """Ablate ``top_heads``, a control set and random sets; an ``ablation`` dataset with the test.

    Parameters
    ----------
    bridge : TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
    top_heads : sequence of (layer, head)
        Fixed before any ablation (e.g. from head profiles of a held-out prompt seed).
    design : AblationDesign or str, optional
        The test's sizes, modes and measures (:class:`icl_cmr.analyses.causal.design.AblationDesign`,
        or a preset name: ``cpu``, ``study``, ``demo``); default ``AblationDesign()``, the
        defaults of ``icl-cmr ablate``. Its ``n_passages``, ``n_tokens``, ``top_fraction`` and
        ``dtype`` say how the passages, the top set and the model were made; the rest is used here.
    control_heads : sequence of (layer, head), optional
        A control set of the same size, e.g. the top induction heads.
    rng : int, numpy.random.Generator or None
        Seed of the random sets (``seed``, ``seed + 1``) and of the bootstrap intervals (default
        0): an int is ``seed``; a Generator draws one (``int(rng.integers(2**63))``); None draws
        one from fresh entropy. The seed used is the result's ``seed`` attribute.
    time_budget_s : float, optional
        Start no passage's ablations after this many seconds; the test then uses the passages
        done (at least 2; attrs ``n_passages_done`` and ``n_passages_requested`` say so).
    progress : bool
        Show a tqdm progress bar over passages.
    info : dict, optional
        Extra provenance (model name, text source, where the top heads came from).
    articles : sequence of int, shape (n_passage,), optional
        The article (source document) of each passage
        (:func:`icl_cmr.adapters.text_corpus.load_passages` with ``return_articles=True``):
        contrasts and intervals then use article means as their unit. Without it each passage
        is its own unit.
    n_random, n_matched, modes, measures, early, late, window, batch_size, n_boot, wide_early, wide_late, repeat_length
        Replace the design's field of that name when given (see ``AblationDesign``):
        ``n_random`` random and ``n_matched`` layer-matched random sets of the top set's size
        (:func:`head_sets`); ``modes`` among zero, mean and resample (``resample``: each
        ablated head's output is taken from another passage at the same positions, passage
        ``p`` from ``donor_passages(n, seed + 3)[p]``, a seeded derangement); ``measures`` of
        :data:`icl_cmr.analyses.causal.measures.MEASURES` beside the ICL score, with their
        statistics on a ``measure`` dim (``all``: those that fit the passages and the model's
        context; the natural-text ones come from the same passes, ``repeated_tokens`` from
        passages of ``repeat_length`` random ids repeated once, seed ``seed + 2``, as many as
        the natural-text passages done); ``early``, ``late``, ``window``: the ICL score's
        positions and half-window; ``wide_early``, ``wide_late``: inclusive ``wide_icl``
        windows; ``batch_size`` ablated conditions per forward pass; ``n_boot`` bootstrap
        resamples of the passages for the d_z intervals.

    Returns
    -------
    xarray.Dataset of kind ``ablation`` (docs/schema.md)
    """
    seed = seed_of(rng)
    if design is None:
        design = AblationDesign()
    elif isinstance(design, str):
        design = AblationDesign.preset(design)
    elif not isinstance(design, AblationDesign):
        raise ParameterError(f"design must be an AblationDesign or a preset name; got {type(design).__name__}")
    design = design.replace(n_random=n_random, n_matched=n_matched, modes=modes, measures=measures, early=early,
                            late=late, window=window, batch_size=batch_size, n_boot=n_boot, wide_early=wide_early,
                            wide_late=wide_late, repeat_length=repeat_length)
    modes, n_random, n_matched = design.modes, design.n_random, design.n_matched
    early, late, window, batch_size, n_boot = design.early, design.late, design.window, design.batch_size, design.n_boot
    wide_early, wide_late, repeat_length = design.wide_early, design.wide_late, design.repeat_length
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    if passages.ndim != 2 or passages.shape[0] < 2:
        raise ParameterError(f"passages must be (n_passage >= 2, n_token); got shape {passages.shape}")
    if articles is None:
        articles, article_source = np.arange(passages.shape[0], dtype=np.int64), "none given: each passage its own unit"
    else:
        articles, article_source = np.asarray(articles, dtype=np.int64), "source documents of the passages"
        if articles.shape != passages.shape[:1]:
            raise ParameterError(f"articles must give one article per passage ({passages.shape[0]}); "
                                 f"got shape {articles.shape}")
    targets = scored_positions(int(early), int(late), int(window), passages.shape[1])
    measures, _ = design.fitted_measures(n_tokens=passages.shape[1], n_ctx=getattr(bridge.cfg, "n_ctx", None))
    last = int(late) + int(window)
    wide = dict(wide_early=tuple(wide_early), wide_late=tuple(wide_late))
    if "wide_icl" in measures:
        wide = {k: am.check_window(v, passages.shape[1], k) for k, v in wide.items()}
    extra_targets = am.natural_positions(measures, last=last, **wide)
    donors = donor_passages(passages.shape[0], rng=seed + 3) if "resample" in modes else None
    n_layers, n_heads = geometry(bridge)
    sets, names, families = head_sets(n_layers, n_heads, top_heads, n_random=int(n_random), n_matched=int(n_matched),
                                      rng=seed, control_heads=control_heads)
    with tqdm(total=passages.shape[0], desc=f"ablation ({len(sets)} sets x {len(modes)} modes)", unit="passage",
              disable=not progress) as bar:
        deadline = None if time_budget_s is None else time.monotonic() + float(time_budget_s)
        base_losses, losses, _, *extra = set_losses(bridge, passages, targets, sets, modes=modes, batch_size=batch_size,
                                                    progress=bar, deadline=deadline, donors=donors,
                                                    extra_targets=extra_targets)
    requested, done = passages.shape[0], losses.shape[2]
    if done < 2:
        raise ParameterError(f"the time budget of {time_budget_s} s allowed {done} passages; the test needs at least 2")
    passages, base_losses, articles = passages[:done], base_losses[:done], articles[:done]
    base = icl_scores(base_losses, targets, early=early, late=late, window=window)
    scores = np.empty((3, len(modes), len(sets), passages.shape[0]))
    for m in range(len(modes)):
        for s in range(len(sets)):
            scores[:, m, s] = icl_scores(losses[m, s], targets, early=early, late=late, window=window)
    block = None
    if len(measures) > 1:
        block = am.run_measures(bridge, passages, sets, modes=modes, measures=measures, scores=scores, base=base,
                                extra=extra, last=last, wide=wide, families=families, rng=seed, n_boot=int(n_boot),
                                repeat_length=int(repeat_length), batch_size=int(batch_size), progress=progress,
                                articles=articles)
    return _assemble(scores, base, sets, names, families, modes, passages, articles, int(seed), int(n_boot), dict(
        n_random=int(n_random), n_matched=int(n_matched), seed=int(seed), early_token=int(early),
        late_token=int(late), window=int(window), batch_size=int(batch_size), n_boot=int(n_boot),
        n_passages_requested=int(requested), n_passages_done=int(done), article_source=article_source,
        random_sets="drawn uniformly among all heads, independently (the top set exchangeable with them under "
                    "the null)",
        **(info or {})), block)


def _assemble(scores, base, sets, names, families, modes, passages, articles, seed, n_boot, info,
              block=None) -> xr.Dataset:
    size = len(sets[0])
    dims = ("mode", "head_set", "passage")
    ds = xr.Dataset(coords={"mode": list(modes), "head_set": names, "family": ("head_set", families),
                            "passage": np.arange(passages.shape[0], dtype=np.int64),
                            "article": ("passage", np.asarray(articles, dtype=np.int64)),
                            "member": np.arange(size, dtype=np.int64)})
    ds["icl_score"] = (dims, scores[0])
    ds["loss_early"] = (dims, scores[1])
    ds["loss_late"] = (dims, scores[2])
    ds["baseline_icl_score"] = ("passage", base[0])
    ds["baseline_loss_early"] = ("passage", base[1])
    ds["baseline_loss_late"] = ("passage", base[2])
    ds["set_layer"] = (("head_set", "member"), np.array([[l for l, _ in s] for s in sets], dtype=np.int64))
    ds["set_head"] = (("head_set", "member"), np.array([[h for _, h in s] for s in sets], dtype=np.int64))
    effects = scores[0] - base[0][None, None, :]
    ds["mean_effect"] = (("mode", "head_set"), effects.mean(axis=2))
    comparisons, table = comparison_statistics(effects, families, rng=seed, n_boot=n_boot, articles=articles)
    ds = ds.assign_coords(comparison=comparisons)
    for k, name in enumerate(STAT_NAMES):
        ds[name] = (("mode", "comparison"), table[:, :, k])
    ds["holm_rank_pvalue"] = (("mode", "comparison"), multiple_comparisons.holm(ds["rank_pvalue"].values))
    ds["holm_t_pvalue"] = (("mode", "comparison"), multiple_comparisons.holm(ds["t_pvalue"].values))
    ds["empirical_pvalue"] = ds["rank_pvalue"].sel(comparison="top_vs_random", drop=True)
    ds.attrs["holm_family_primary"] = HOLM_FAMILIES["primary"]
    _describe(ds)
    if block is not None:
        ds = ds.assign_coords(block["coords"]).assign(block["variables"])
        describe(ds)
        info = {**info, **block["attrs"]}
    ds.attrs.update(provenance_attrs("ablation", "icl_cmr.analyses.causal.ablation.run_ablation", **info))
    ds.attrs.update({k: v for k, v in info.items() if isinstance(v, (int, float, str))})
    ds.attrs["n_tokens"] = int(passages.shape[1])
    ds.attrs["n_articles"] = int(np.unique(articles).size)
    return validate(ds, "ablation")


def summary_lines(result: xr.Dataset) -> list[str]:
    """One plain-text line per mode and comparison of an ``ablation`` dataset, each test with its
    Holm value and family (``primary``: the ICL score's modes x comparisons).

    An interval that :func:`effect_intervals` leaves NaN (the t interval below 3 units, the
    bootstrap d_z interval below :data:`MIN_BOOTSTRAP_PASSAGES`) is printed as the reason."""
    lines = []
    for mode in result["mode"].values:
        for comparison in result["comparison"].values:
            row = result.sel(mode=mode, comparison=comparison)
            values = {name: float(row[name]) for name in (*STAT_NAMES, "holm_rank_pvalue", "holm_t_pvalue")
                      if name in row}
            lines.append(f"{mode} {comparison}: " + comparison_text(values, "primary", units=unit_name(result)))
    return lines


def validate_ablation(ds: xr.Dataset) -> None:
    """Check an ablation dataset (ICL scores with heads ablated; see docs/schema.md)."""
    kind = "ablation"
    require_variables(ds, ["icl_score", "baseline_icl_score", "set_layer", "set_head", "mode", "head_set"], kind)
    require_dims(ds["icl_score"], ["mode", "head_set", "passage"], kind, "icl_score")
    require_dims(ds["baseline_icl_score"], ["passage"], kind, "baseline_icl_score")
    require_dims(ds["set_layer"], ["head_set", "member"], kind, "set_layer")
    require_dims(ds["set_head"], ["head_set", "member"], kind, "set_head")
    if "top" not in [str(v) for v in ds["head_set"].values]:
        raise SchemaError("ablation dataset: coord 'head_set' must contain 'top'")
    bad = sorted({str(v) for v in ds["mode"].values} - set(MODES))
    if bad:
        raise SchemaError(f"ablation dataset: modes must be among {', '.join(MODES)}; got {', '.join(bad)}")
    if "family" in ds.coords:
        bad = sorted({str(v) for v in ds["family"].values} - {"top", "induction", *NULL_FAMILIES})
        if bad:
            raise SchemaError(f"ablation dataset: unknown head-set families {', '.join(bad)}")


_DESCRIPTIONS = {
    "icl_score": "loss at the late window minus loss at the early window (nats), heads ablated",
    "loss_early": "mean loss over the early window (nats), heads ablated",
    "loss_late": "mean loss over the late window (nats), heads ablated",
    "baseline_icl_score": "ICL score of the unablated model",
    "baseline_loss_early": "early-window loss of the unablated model",
    "baseline_loss_late": "late-window loss of the unablated model",
    "set_layer": "layer of each head of each set",
    "set_head": "head index (query head) of each head of each set",
    "mean_effect": "mean over passages of icl_score - baseline_icl_score (> 0: ablation hurts ICL)",
    "mean_difference": "the set's effect minus the compared effect, mean over units (articles, or passages when no "
                       "article is given): none: 0; a null family: the family's mean effect; a set: its effect",
    "ci_low": "lower end of the 95% interval of mean_difference (t over units; crossed-effects t for a null family)",
    "ci_high": "upper end of the 95% interval of mean_difference (t over units; crossed-effects t for a null family)",
    "t_statistic": "fixed sets: paired t over units; a null family: the crossed set x unit random-effects t",
    "t_pvalue": "two-sided p of t_statistic (a null family: Satterthwaite df, see df)",
    "wilcoxon_pvalue": "two-sided p-value of the Wilcoxon signed-rank test over units (fixed sets only)",
    "cohens_dz": "Cohen's d_z: mean paired difference / its standard deviation over units (fixed sets only)",
    "dz_ci_low": "lower end of the 95% bootstrap (units: a cluster bootstrap of articles) percentile interval of d_z",
    "dz_ci_high": "upper end of the 95% bootstrap (units: a cluster bootstrap of articles) percentile interval of d_z",
    "rank": "rank of the set's mean effect among the null family's (1 = larger than all)",
    "n_null": "sets in the null family",
    "rank_pvalue": "exact permutation p: (1 + #null sets with mean effect >= the set's) / (1 + n_null); the primary "
                   "test of a set against a null family",
    "z": "(the set's mean effect - the null sets' mean) / the null sets' sd (ddof 1)",
    "null_mean": "mean of the null family's mean effects",
    "null_sd": "sd (ddof 1) of the null family's mean effects",
    "df": "degrees of freedom of t_statistic (units - 1; Satterthwaite's for the crossed contrast)",
    "between_set_sd": "sd of the null family's true set effects (method-of-moments, sets x units layout)",
    "residual_sd": "residual sd of the null family's effects per unit (sets x units layout)",
    "set_residual_sd": "sd over units of the set's effect minus the null family's mean effect",
    "n_units": "units of the contrast: articles (or passages when no article is given)",
    "holm_rank_pvalue": "rank_pvalue adjusted by Holm across modes and comparisons (family: primary)",
    "holm_t_pvalue": "t_pvalue adjusted by Holm across modes and comparisons (family: primary)",
    "empirical_pvalue": "rank_pvalue of the top set among the random sets (the primary test)",
}


def _describe(ds):
    for name, text in _DESCRIPTIONS.items():
        ds[name].attrs["long_name"] = text
