"""Causal test: does ablating the CMR-like heads hurt in-context learning more than random heads?

ICL score of a passage (Olsson et al. 2022): the loss at text token ``late`` (500)
minus the loss at text token ``early`` (50), each averaged over a +-``window`` (5) token window;
negative when the model predicts better late in a passage, i.e. learns in context. Token indices
are 0-based positions in the passage text; a BOS token is prepended when the tokenizer has one.

Heads are ablated at their output, set to zero or to their mean output
(:mod:`icl_cmr.adapters.interventions`, where every torch call of the test lives).

The statistics (per mode) compare per-passage effects ``icl_ablated - icl_unablated``: the top
set against no ablation, and against the mean of the random sets, by paired t-test, Wilcoxon
signed-rank test and Cohen's d_z, plus the empirical p-value of the top set's mean effect in the
distribution of the random sets' mean effects. See docs/ablation.md.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import xarray as xr

from cmr.errors import ParameterError, SchemaError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from icl_cmr.adapters.interventions import MODES, geometry, passage_losses

__all__ = [
    "MODES",
    "parse_heads",
    "top_heads_from_fits",
    "random_head_sets",
    "icl_scores",
    "scored_positions",
    "validate_ablation",
    "paired_statistics",
    "run_ablation",
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
    finite = np.flatnonzero(np.isfinite(grid.ravel()))
    if size < 1 or size > finite.size:
        raise ParameterError(f"cannot choose {size} heads: {finite.size} of {grid.size} heads have a finite {variable}")
    key = -grid.ravel()[finite] if largest else grid.ravel()[finite]
    order = finite[np.argsort(key, kind="stable")][:size]
    rows, cols = np.unravel_index(order, grid.shape)
    return [(int(layers[r]), int(heads[c])) for r, c in zip(rows, cols)]


def random_head_sets(n_layers: int, n_heads: int, target, n_sets: int, seed: int,
                     layer_matched: bool = False) -> list[list[tuple[int, int]]]:
    """``n_sets`` seeded random head sets of the size of ``target``, disjoint from ``target``.

    With ``layer_matched`` each set has as many heads in every layer as ``target`` (drawn among
    that layer's other heads). Sets are drawn with ``numpy.random.default_rng(seed)`` and each is
    sorted by (layer, head).
    """
    target = [(int(l), int(h)) for l, h in target]
    for layer, head in target:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ParameterError(f"head L{layer}.H{head} is outside the model ({n_layers} layers x {n_heads} heads)")
    taken = set(target)
    rng = np.random.default_rng(seed)
    sets = []
    if layer_matched:
        per_layer = {}
        for layer, _ in target:
            per_layer[layer] = per_layer.get(layer, 0) + 1
        for layer, count in per_layer.items():
            if n_heads - count < count:
                raise ParameterError(
                    f"layer-matched sets need {count} heads of layer {layer} outside the top set; "
                    f"the layer has only {n_heads - count} others"
                )
        for _ in range(int(n_sets)):
            chosen = []
            for layer in sorted(per_layer):
                pool = [h for h in range(n_heads) if (layer, h) not in taken]
                picks = rng.choice(len(pool), size=per_layer[layer], replace=False)
                chosen.extend((layer, pool[i]) for i in picks)
            sets.append(sorted(chosen))
    else:
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


def empirical_pvalue(top_mean: float, random_means) -> float:
    """(1 + #{random sets with a mean effect >= the top set's}) / (1 + n_random)."""
    random_means = np.asarray(random_means, dtype=np.float64)
    return float((1 + np.sum(random_means >= top_mean)) / (1 + random_means.size))


_STAT_NAMES = ("mean_difference", "t_statistic", "t_pvalue", "wilcoxon_pvalue", "cohens_dz")
_COMPARISONS = ("top_vs_none", "top_vs_random")


def _statistics(effects: np.ndarray) -> dict:
    """effects: (head_set, passage), row 0 = top, the rest random sets."""
    top, random = effects[0], effects[1:]
    rows = {"top_vs_none": paired_statistics(top)}
    rows["top_vs_random"] = paired_statistics(top - random.mean(axis=0)) if random.size else paired_statistics([])
    means = effects.mean(axis=1)
    return dict(rows=rows, empirical=empirical_pvalue(means[0], means[1:]) if random.size else np.nan)


# --- the whole test ----------------------------------------------------------------------------


def run_ablation(bridge, passages, top_heads, *, n_random=20, seed=0, layer_matched=False, modes=MODES,
                 early=50, late=500, window=5, batch_size=4, progress=True, info=None) -> xr.Dataset:
    """Ablate ``top_heads`` and ``n_random`` random sets of the same size; an ``ablation`` dataset.

    Parameters
    ----------
    bridge : TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
    top_heads : sequence of (layer, head)
    n_random, seed, layer_matched : int, int, bool
        Random sets (see :func:`random_head_sets`).
    modes : sequence of {"zero", "mean"}
    early, late, window : int
        ICL score positions and half-window.
    batch_size : int
        Passages per forward pass.
    progress : bool
        Show a tqdm progress bar over forward passes.
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
    top_heads = [(int(l), int(h)) for l, h in top_heads]
    if not top_heads:
        raise ParameterError("the top head set is empty")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    if passages.ndim != 2 or passages.shape[0] < 2:
        raise ParameterError(f"passages must be (n_passage >= 2, n_token); got shape {passages.shape}")
    targets = scored_positions(int(early), int(late), int(window), passages.shape[1])
    n_layers, n_heads = geometry(bridge)
    sets = [top_heads] + random_head_sets(n_layers, n_heads, top_heads, n_random, seed, layer_matched)
    set_names = ["top"] + [f"random_{i:03d}" for i in range(len(sets) - 1)]
    n_batches = -(-passages.shape[0] // int(batch_size))
    bar = tqdm(total=n_batches * (1 + len(modes) * len(sets)), desc="ablation forward passes",
               unit="batch", disable=not progress)
    kwargs = dict(batch_size=batch_size, progress=bar)
    try:
        base_losses, means = passage_losses(bridge, passages, targets, capture_means=True, **kwargs)
        base = icl_scores(base_losses, targets, early, late, window)
        scores = np.empty((3, len(modes), len(sets), passages.shape[0]))
        for m, mode in enumerate(modes):
            for s, heads in enumerate(sets):
                bar.set_postfix_str(f"{mode} {set_names[s]}")
                losses, _ = passage_losses(bridge, passages, targets, heads=heads, mode=mode, means=means, **kwargs)
                scores[:, m, s] = icl_scores(losses, targets, early, late, window)
    finally:
        bar.close()
    return _assemble(scores, base, sets, set_names, modes, passages, dict(
        n_random=int(n_random), seed=int(seed), layer_matched=int(bool(layer_matched)), early_token=int(early),
        late_token=int(late), window=int(window), batch_size=int(batch_size), **(info or {})))


def _assemble(scores, base, sets, set_names, modes, passages, info) -> xr.Dataset:
    size = len(sets[0])
    dims = ("mode", "head_set", "passage")
    ds = xr.Dataset(coords={"mode": list(modes), "head_set": set_names,
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
    table = np.full((len(modes), len(_COMPARISONS), len(_STAT_NAMES)), np.nan)
    empirical = np.full(len(modes), np.nan)
    for m in range(len(modes)):
        result = _statistics(effects[m])
        empirical[m] = result["empirical"]
        for c, comparison in enumerate(_COMPARISONS):
            table[m, c] = [result["rows"][comparison][name] for name in _STAT_NAMES]
    ds = ds.assign_coords(comparison=list(_COMPARISONS))
    for k, name in enumerate(_STAT_NAMES):
        ds[name] = (("mode", "comparison"), table[:, :, k])
    ds["empirical_pvalue"] = ("mode", empirical)
    _describe(ds)
    ds.attrs.update(provenance_attrs("ablation", "icl_cmr.analyses.ablation.run_ablation", **info))
    ds.attrs.update({k: v for k, v in info.items() if isinstance(v, (int, float, str))})
    ds.attrs["n_tokens"] = int(passages.shape[1])
    return validate(ds, "ablation")


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
    "mean_difference": "top_vs_none: mean top-set effect; top_vs_random: mean of (top effect - mean random effect)",
    "t_statistic": "paired t statistic over passages",
    "t_pvalue": "two-sided p-value of the paired t-test",
    "wilcoxon_pvalue": "two-sided p-value of the Wilcoxon signed-rank test",
    "cohens_dz": "Cohen's d_z: mean paired difference / its standard deviation",
    "empirical_pvalue": "(1 + #random sets with mean effect >= top's) / (1 + n_random)",
}


def _describe(ds):
    for name, text in _DESCRIPTIONS.items():
        ds[name].attrs["long_name"] = text
