"""Causal test: does ablating the CMR-like heads hurt in-context learning more than random heads?

ICL score of a passage (Olsson et al. 2022): the loss at text token ``late`` (500)
minus the loss at text token ``early`` (50), each averaged over a +-``window`` (5) token window;
negative when the model predicts better late in a passage, i.e. learns in context. Token indices
are 0-based positions in the passage text; a BOS token is prepended when the tokenizer has one.

Heads are ablated at their output, set to zero or to their mean output
(:mod:`icl_cmr.adapters.lm.interventions`, where every torch call of the test lives).

The test (per mode) works on per-passage effects ``icl_ablated - icl_unablated``. Primary: the
rank of the top set's mean effect among at least 50 seeded random sets of the same size, with
the exact permutation p ``(1 + #{random >= top}) / (1 + n_random)``. Beside it: the rank among
layer-matched random sets, a control set of top induction heads ranked the same way, paired
tests by passage (t-test, Wilcoxon, Cohen's d_z with intervals), and Holm's correction across
modes and comparisons. See docs/ablation.md.
"""
from __future__ import annotations

import re
import time
import warnings

import numpy as np
import xarray as xr

from cmr.errors import ParameterError, SchemaError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from icl_cmr.adapters.head_ranking import rank_heads
from icl_cmr.adapters.lm.interventions import MODES, geometry, set_losses

__all__ = [
    "MODES",
    "parse_heads",
    "top_heads_from_fits",
    "random_head_sets",
    "head_sets",
    "icl_scores",
    "scored_positions",
    "validate_ablation",
    "paired_statistics",
    "rank_pvalue",
    "holm",
    "effect_intervals",
    "COMPARISONS",
    "run_ablation",
    "summary_lines",
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


def top_heads_from_fits(fits: xr.Dataset, fraction: float = 0.1, variable: str = "distance",
                        n_heads: int | None = None, largest: bool = False) -> list[tuple[int, int]]:
    """The ``fraction`` of heads with the smallest ``variable`` (CMR distance) in a dataset.

    ``fits`` is a ``profile_fit`` dataset (or a head ``lag_profile`` dataset, ranked e.g. by
    ``induction_score`` with ``largest=True``) whose ``variable`` has dims ``layer`` and ``head``
    (other unit dims, e.g. ``model`` and ``checkpoint``, must have size 1). NaN (unfitted)
    heads are never chosen. The set size is ``round(fraction * total heads)``, at least 1,
    unless ``n_heads`` is given. Returns heads sorted by ``variable``, best first.
    """
    if variable not in fits:
        raise SchemaError(f"fit dataset has no variable {variable!r}; variables: {', '.join(map(str, fits.data_vars))}")
    values = fits[variable]
    extra = [d for d in values.dims if d not in ("layer", "head")]
    if any(values.sizes[d] != 1 for d in extra) or not {"layer", "head"} <= set(values.dims):
        raise SchemaError(
            f"{variable!r} must have dims layer and head (others of size 1) to rank heads; got {dict(values.sizes)}"
        )
    values = values.squeeze(extra, drop=True).transpose("layer", "head")
    grid = np.asarray(values.values, dtype=np.float64)
    layers = np.asarray(values["layer"].values)
    heads = np.asarray(values["head"].values)
    size = int(n_heads) if n_heads is not None else max(1, int(round(float(fraction) * grid.size)))
    ranked = rank_heads(grid, largest=largest)
    if size < 1 or size > ranked.size:
        raise ParameterError(f"cannot choose {size} heads: {ranked.size} of {grid.size} heads have a finite {variable}")
    rows, cols = np.unravel_index(ranked[:size], grid.shape)
    return [(int(layers[r]), int(heads[c])) for r, c in zip(rows, cols)]


def check_heads(heads, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """``heads`` as (layer, head) int pairs, each refused unless inside a model of ``n_layers`` x ``n_heads``."""
    heads = [(int(l), int(h)) for l, h in heads]
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ParameterError(f"head L{layer}.H{head} is outside the model ({n_layers} layers x {n_heads} heads)")
    return heads


def random_head_sets(n_layers: int, n_heads: int, target, n_sets: int, seed: int,
                     layer_matched: bool = False) -> list[list[tuple[int, int]]]:
    """``n_sets`` seeded random head sets of the size of ``target``.

    Plain sets are drawn among the heads outside ``target``. With ``layer_matched`` each set
    has as many heads in every layer as ``target``, drawn uniformly among all heads of that
    layer (the top set's own heads included: a layer may hold more top heads than others, and
    the top set is then one possible draw, which is what the rank test's null says). Sets are
    drawn with ``numpy.random.default_rng(seed)`` and each is sorted by (layer, head).
    """
    target = check_heads(target, n_layers, n_heads)
    rng = np.random.default_rng(seed)
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
    taken = set(target)
    pool = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in taken]
    if len(pool) < len(target):
        raise ParameterError(f"random sets of {len(target)} heads need that many heads outside the top set; {len(pool)} remain")
    for _ in range(int(n_sets)):
        picks = rng.choice(len(pool), size=len(target), replace=False)
        sets.append(sorted(pool[i] for i in picks))
    return sets


def icl_scores(losses, targets, early=50, late=500, window=5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


# --- statistics --------------------------------------------------------------------------------


def paired_statistics(differences) -> dict:
    """Paired tests of per-passage differences against 0.

    Returns mean_difference, t_statistic, t_pvalue (two-sided one-sample t-test, i.e. paired),
    wilcoxon_pvalue (two-sided signed-rank) and cohens_dz = mean / sd (ddof 1). Degenerate
    samples (fewer than 2 passages, zero spread, all differences 0) give NaN where undefined.
    """
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    result = dict(mean_difference=float(d.mean()) if d.size else np.nan, t_statistic=np.nan, t_pvalue=np.nan,
                  wilcoxon_pvalue=np.nan, cohens_dz=np.nan)
    if d.size < 2:
        return result
    sd = d.std(ddof=1)
    if sd > 0:
        test = stats.ttest_1samp(d, 0.0)
        result.update(t_statistic=float(test.statistic), t_pvalue=float(test.pvalue), cohens_dz=float(d.mean() / sd))
    if np.any(d != 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small-sample / ties notes from scipy
            result["wilcoxon_pvalue"] = float(stats.wilcoxon(d).pvalue)
    return result


def rank_pvalue(value: float, null) -> float:
    """Exact permutation p of ``value`` among ``null`` draws: (1 + #{null >= value}) / (1 + n).

    Under the null that ``value`` is exchangeable with the ``n`` draws (the top set's mean
    effect is that of one more random set), ``P(p <= k / (n + 1)) = k / (n + 1)`` exactly, for
    every k (ties only make it conservative); the smallest possible p is ``1 / (n + 1)``.
    """
    null = np.asarray(null, dtype=np.float64)
    if null.size == 0:
        raise ParameterError("a rank test needs at least one null draw")
    return float((1 + np.sum(null >= value)) / (1 + null.size))


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979); NaN entries are left out of the family."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    flat, keep = p.ravel(), np.flatnonzero(np.isfinite(p.ravel()))
    order = keep[np.argsort(flat[keep], kind="stable")]
    m = order.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * flat[order]) if m else np.empty(0)
    result = out.ravel()
    result[order] = np.minimum(adjusted, 1.0)
    return result.reshape(p.shape)


def holm_rank_floor(n_random: int, n_matched: int = 0, n_modes: int = 1, control: bool = False) -> float:
    """The smallest Holm-adjusted rank p-value a design can give.

    The rank family holds, per mode, the top set against the random sets, against the
    layer-matched sets (``n_matched > 0``) and the control against the random sets
    (``control``): ``m`` tests. A rank p is at least ``1 / (n + 1)`` with ``n`` null sets, and
    Holm multiplies the smallest p of the family by ``m``, so no adjusted p falls below
    ``m / (max(n_random, n_matched) + 1)``. At or above 0.05, no rank test of the design can be
    significant after correction, whatever the data.
    """
    if int(n_random) < 1:
        raise ParameterError(f"n_random must be >= 1 (the rank test needs random sets); got {n_random!r}")
    m = rank_family_size(n_matched, n_modes, control)
    return min(1.0, m / (max(int(n_random), int(n_matched)) + 1))


def rank_family_size(n_matched: int = 0, n_modes: int = 1, control: bool = False) -> int:
    """Rank tests in the Holm family: per mode, top vs random, top vs layer-matched, control vs random."""
    if int(n_matched) < 0 or int(n_modes) not in (1, 2):
        raise ParameterError(f"n_matched must be >= 0 and n_modes 1 or 2 (zero and/or mean); "
                             f"got n_matched={n_matched!r}, n_modes={n_modes!r}")
    return int(n_modes) * (1 + (int(n_matched) > 0) + bool(control))


#: fewest passages for a bootstrap interval of d_z
MIN_BOOTSTRAP_PASSAGES = 10


def effect_intervals(differences, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """Intervals of paired differences: a t interval of the mean and a bootstrap interval of d_z.

    The d_z interval is the percentile interval of ``mean / sd`` over ``n_boot`` resamples of
    the passages (``numpy.random.default_rng(seed)``). The t interval needs 3 passages; the
    d_z interval needs :data:`MIN_BOOTSTRAP_PASSAGES` (resamples of a few passages have tiny
    spreads and give unbounded ratios); NaN below.
    """
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    out = dict(ci_low=np.nan, ci_high=np.nan, dz_ci_low=np.nan, dz_ci_high=np.nan)
    if d.size < 3:
        return out
    half = stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    out.update(ci_low=float(d.mean() - half), ci_high=float(d.mean() + half))
    if d.size < MIN_BOOTSTRAP_PASSAGES:
        return out
    draws = d[np.random.default_rng(seed).integers(0, d.size, size=(int(n_boot), d.size))]
    sd = draws.std(axis=1, ddof=1)
    dz = np.divide(draws.mean(axis=1), sd, out=np.full(sd.shape, np.nan), where=sd > 0)
    dz = dz[np.isfinite(dz)]
    if dz.size:
        out.update(dz_ci_low=float(np.quantile(dz, 0.5 - level / 2)), dz_ci_high=float(np.quantile(dz, 0.5 + level / 2)))
    return out


#: (comparison, the set, what it is compared with: "none", a null family, or another set)
COMPARISONS = (
    ("top_vs_none", "top", "none"),
    ("top_vs_random", "top", "random"),
    ("top_vs_layer_matched", "top", "layer_matched"),
    ("induction_vs_none", "induction", "none"),
    ("induction_vs_random", "induction", "random"),
    ("top_vs_induction", "top", "induction"),
)
NULL_FAMILIES = ("random", "layer_matched")
_STAT_NAMES = ("mean_difference", "ci_low", "ci_high", "t_statistic", "t_pvalue", "wilcoxon_pvalue", "cohens_dz",
               "dz_ci_low", "dz_ci_high", "rank", "n_null", "rank_pvalue")


def _comparisons(families) -> list[tuple[str, str, str]]:
    present = set(families)
    return [c for c in COMPARISONS if c[1] in present and (c[2] == "none" or c[2] in present)]


def _statistics(effects: np.ndarray, families, seed: int, n_boot: int) -> tuple[list[str], np.ndarray]:
    """effects: (mode, head_set, passage). Returns comparison names and a (mode, comparison, stat) table."""
    families = np.asarray(families)
    comparisons = _comparisons(families)
    table = np.full((effects.shape[0], len(comparisons), len(_STAT_NAMES)), np.nan)
    for m in range(effects.shape[0]):
        per_set = {f: effects[m, families == f] for f in set(families)}
        for c, (_, name, against) in enumerate(comparisons):
            mine = per_set[name][0]
            if against == "none":
                d = mine
            elif against in NULL_FAMILIES:
                d = mine - per_set[against].mean(axis=0)
            else:
                d = mine - per_set[against][0]
            row = paired_statistics(d) | effect_intervals(d, n_boot, seed)
            if against in NULL_FAMILIES:
                null = per_set[against].mean(axis=1)
                row.update(rank=float(1 + np.sum(null > mine.mean())), n_null=float(null.size),
                           rank_pvalue=rank_pvalue(mine.mean(), null))
            table[m, c] = [row.get(k, np.nan) for k in _STAT_NAMES]
    return [c[0] for c in comparisons], table


# --- the whole test ----------------------------------------------------------------------------


def head_sets(n_layers: int, n_heads: int, top_heads, *, n_random: int = 50, n_matched: int = 50, seed: int = 0,
              control_heads=None) -> tuple[list[list[tuple[int, int]]], list[str], list[str]]:
    """The sets of the test: (sets, names, families), the top set first.

    ``control_heads`` (e.g. the top induction heads) form the set ``induction``; ``n_random``
    random sets (family ``random``) and ``n_matched`` layer-matched sets (``layer_matched``)
    are drawn from heads outside the top set with seeds ``seed`` and ``seed + 1``.
    """
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
        sets += random_head_sets(n_layers, n_heads, top_heads, n_random, seed)
        names += [f"random_{i:03d}" for i in range(n_random)]
        families += ["random"] * n_random
    if n_matched > 0:
        sets += random_head_sets(n_layers, n_heads, top_heads, n_matched, seed + 1, layer_matched=True)
        names += [f"matched_{i:03d}" for i in range(n_matched)]
        families += ["layer_matched"] * n_matched
    return sets, names, families


def run_ablation(bridge, passages, top_heads, *, n_random=50, n_matched=50, control_heads=None, seed=0, modes=MODES,
                 early=50, late=500, window=5, batch_size=8, n_boot=2000, time_budget_s=None, progress=True,
                 info=None) -> xr.Dataset:
    """Ablate ``top_heads``, a control set and random sets; an ``ablation`` dataset with the test.

    Parameters
    ----------
    bridge : TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
    top_heads : sequence of (layer, head)
        Fixed before any ablation (e.g. from head profiles of a held-out prompt seed).
    n_random, n_matched : int
        Random sets and layer-matched random sets of the top set's size (:func:`head_sets`).
    control_heads : sequence of (layer, head), optional
        A control set of the same size, e.g. the top induction heads.
    seed : int
        Seed of the random sets (``seed``, ``seed + 1``) and of the bootstrap intervals.
    modes : sequence of {"zero", "mean"}
    early, late, window : int
        ICL score positions and half-window.
    batch_size : int
        Ablated conditions per forward pass.
    n_boot : int
        Bootstrap resamples of the passages for the d_z intervals.
    time_budget_s : float, optional
        Start no passage's ablations after this many seconds; the test then uses the passages
        done (at least 2; attrs ``n_passages_done`` and ``n_passages_requested`` say so).
    progress : bool
        Show a tqdm progress bar over passages.
    info : dict, optional
        Extra provenance (model name, text source, where the top heads came from).

    Returns
    -------
    xarray.Dataset of kind ``ablation`` (docs/schema.md)
    """
    from tqdm.auto import tqdm

    modes = tuple(modes)
    if not modes or any(m not in MODES for m in modes):
        raise ParameterError(f"modes must be a non-empty subset of {MODES}; got {modes}")
    if n_random < 1:
        raise ParameterError(f"the rank test needs random sets; got n_random={n_random}")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    if passages.ndim != 2 or passages.shape[0] < 2:
        raise ParameterError(f"passages must be (n_passage >= 2, n_token); got shape {passages.shape}")
    targets = scored_positions(int(early), int(late), int(window), passages.shape[1])
    n_layers, n_heads = geometry(bridge)
    sets, names, families = head_sets(n_layers, n_heads, top_heads, n_random=int(n_random), n_matched=int(n_matched),
                                      seed=int(seed), control_heads=control_heads)
    with tqdm(total=passages.shape[0], desc=f"ablation ({len(sets)} sets x {len(modes)} modes)", unit="passage",
              disable=not progress) as bar:
        deadline = None if time_budget_s is None else time.monotonic() + float(time_budget_s)
        base_losses, losses, _ = set_losses(bridge, passages, targets, sets, modes, batch_size=batch_size, progress=bar,
                                            deadline=deadline)
    requested, done = passages.shape[0], losses.shape[2]
    if done < 2:
        raise ParameterError(f"the time budget of {time_budget_s} s allowed {done} passages; the test needs at least 2")
    passages, base_losses = passages[:done], base_losses[:done]
    base = icl_scores(base_losses, targets, early, late, window)
    scores = np.empty((3, len(modes), len(sets), passages.shape[0]))
    for m in range(len(modes)):
        for s in range(len(sets)):
            scores[:, m, s] = icl_scores(losses[m, s], targets, early, late, window)
    return _assemble(scores, base, sets, names, families, modes, passages, int(seed), int(n_boot), dict(
        n_random=int(n_random), n_matched=int(n_matched), seed=int(seed), early_token=int(early),
        late_token=int(late), window=int(window), batch_size=int(batch_size), n_boot=int(n_boot),
        n_passages_requested=int(requested), n_passages_done=int(done), **(info or {})))


def _assemble(scores, base, sets, names, families, modes, passages, seed, n_boot, info) -> xr.Dataset:
    size = len(sets[0])
    dims = ("mode", "head_set", "passage")
    ds = xr.Dataset(coords={"mode": list(modes), "head_set": names, "family": ("head_set", families),
                            "passage": np.arange(passages.shape[0], dtype=np.int64),
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
    comparisons, table = _statistics(effects, families, seed, n_boot)
    ds = ds.assign_coords(comparison=comparisons)
    for k, name in enumerate(_STAT_NAMES):
        ds[name] = (("mode", "comparison"), table[:, :, k])
    ds["holm_rank_pvalue"] = (("mode", "comparison"), holm(ds["rank_pvalue"].values))
    ds["holm_t_pvalue"] = (("mode", "comparison"), holm(ds["t_pvalue"].values))
    ds["empirical_pvalue"] = ds["rank_pvalue"].sel(comparison="top_vs_random", drop=True)
    _describe(ds)
    ds.attrs.update(provenance_attrs("ablation", "icl_cmr.analyses.ablation.run_ablation", **info))
    ds.attrs.update({k: v for k, v in info.items() if isinstance(v, (int, float, str))})
    ds.attrs["n_tokens"] = int(passages.shape[1])
    return validate(ds, "ablation")


def _interval(low: float, high: float, digits: int, needs: int) -> str:
    """``[low, high]``, or why there is none (too few passages for it)."""
    if np.isfinite(low) and np.isfinite(high):
        return f"[{low:+.{digits}f}, {high:+.{digits}f}]"
    return f"[no interval: needs {needs} passages]"


def summary_lines(result: xr.Dataset) -> list[str]:
    """One plain-text line per mode and comparison of an ``ablation`` dataset.

    An interval that :func:`effect_intervals` leaves NaN (the t interval below 3 passages, the
    bootstrap d_z interval below :data:`MIN_BOOTSTRAP_PASSAGES`) is printed as the reason."""
    lines = []
    for mode in result["mode"].values:
        for comparison in result["comparison"].values:
            row = result.sel(mode=mode, comparison=comparison)
            v = {name: float(row[name]) for name in (*_STAT_NAMES, "holm_rank_pvalue", "holm_t_pvalue")}
            text = (f"{mode} {comparison}: {v['mean_difference']:+.3f} nats "
                    f"{_interval(v['ci_low'], v['ci_high'], 3, 3)}, "
                    f"d_z {v['cohens_dz']:+.2f} {_interval(v['dz_ci_low'], v['dz_ci_high'], 2, MIN_BOOTSTRAP_PASSAGES)}, "
                    f"t p {v['t_pvalue']:.2g} (Holm {v['holm_t_pvalue']:.2g})")
            if np.isfinite(v["rank_pvalue"]):
                text += (f"; rank {v['rank']:.0f} of {v['n_null'] + 1:.0f}, p {v['rank_pvalue']:.3f} "
                         f"(Holm {v['holm_rank_pvalue']:.3f})")
            lines.append(text)
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
        raise SchemaError(f"ablation dataset: modes must be 'zero' or 'mean'; got {', '.join(bad)}")
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
    "mean_difference": "mean over passages of the set's effect minus the compared effect (none: 0; a null "
                       "family: the family's mean effect; a set: its effect)",
    "ci_low": "lower end of the 95% t interval of mean_difference",
    "ci_high": "upper end of the 95% t interval of mean_difference",
    "t_statistic": "paired t statistic over passages",
    "t_pvalue": "two-sided p-value of the paired t-test",
    "wilcoxon_pvalue": "two-sided p-value of the Wilcoxon signed-rank test",
    "cohens_dz": "Cohen's d_z: mean paired difference / its standard deviation",
    "dz_ci_low": "lower end of the 95% bootstrap (passages) percentile interval of d_z",
    "dz_ci_high": "upper end of the 95% bootstrap (passages) percentile interval of d_z",
    "rank": "rank of the set's mean effect among the null family's (1 = larger than all)",
    "n_null": "sets in the null family",
    "rank_pvalue": "exact permutation p: (1 + #null sets with mean effect >= the set's) / (1 + n_null)",
    "holm_rank_pvalue": "rank_pvalue adjusted by Holm across modes and comparisons",
    "holm_t_pvalue": "t_pvalue adjusted by Holm across modes and comparisons",
    "empirical_pvalue": "rank_pvalue of the top set among the random sets (the primary test)",
}


def _describe(ds):
    for name, text in _DESCRIPTIONS.items():
        ds[name].attrs["long_name"] = text
