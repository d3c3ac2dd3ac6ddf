"""Composition scores of attention heads (Elhage et al. 2021), through d_head-sized products only.

For an earlier head e with ``W_OV = W_V W_O`` (TransformerLens' row-vector convention: a
residual row ``x`` is read as ``x W``) and a later head l with ``W_QK = W_Q W_K^T``:

* Q-composition ``||W_OV^e W_QK^l||_F / (||W_OV^e||_F ||W_QK^l||_F)`` (e writes into l's query),
* K-composition ``||W_OV^e (W_QK^l)^T||_F / (...)`` (e writes into l's key),
* V-composition ``||W_OV^e W_OV^l||_F / (||W_OV^e||_F ||W_OV^l||_F)`` (e writes into l's value).

Every matrix is a product of (d_model x d_head) factors, ``||A M D^T||_F^2 = tr(M^T G_A M G_D)``
with the d_head x d_head Gram matrices ``G = A^T A``, so only d_head x d_head products of the
d_model-dimensional factors are formed (never a d_model x d_model or vocabulary-sized matrix).
Norm scale weights of the layer that reads the residual are folded into its W_Q, W_K, W_V (a
LayerNorm's centring too); the per-token RMS factor is a scalar, which no score sees. Query head
h reads key/value head ``h // (n_heads / n_kv_heads)`` (grouped-query attention). Rotary
position embeddings rotate queries and keys by position; like Elhage et al.'s scores, these
are of the position-free W_QK.

Random baseline: for independent Gaussian factors of the same shapes,
``E[score^2] = 1 / d_model`` exactly (the later matrix's distribution is invariant under
rotations of the residual space, which average ``||X O Y||^2`` to ``||X||^2 ||Y||^2 / d``);
the Monte Carlo mean and spread of the score itself come with every result.
"""
from __future__ import annotations

import contextlib

import numpy as np
import xarray as xr

from cmr.checks import as_generator, is_integer, seed_of
from cmr.deprecation import renamed_keywords
from cmr.errors import SchemaError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

__all__ = [
    "COMPOSITIONS",
    "head_weights",
    "composition_scores",
    "composition_from_weights",
    "random_composition_baseline",
    "composition_dataset",
    "validate_composition",
]

COMPOSITIONS = ("Q", "K", "V")


def _norm_fold(module, size: int) -> np.ndarray:
    """The scale vector of a norm (ones when it has none), float64."""
    import torch

    scale = np.ones(size)
    for pname, param in module.named_parameters():
        if pname.endswith("weight") and param.ndim == 1 and param.shape[0] == size:
            scale = param.detach().to("cpu", torch.float64).numpy()
    return scale


def _centred(name: str) -> bool:
    return "layernorm" in name.lower() and "rms" not in name.lower()


def head_weights(model) -> dict:
    """Every head's factors with the input norm folded in, float64 on the host.

    Parameters
    ----------
    model : icl_cmr.adapters.lm.loading.LoadedModel

    Returns
    -------
    dict
        ``W_Q`` (layer, head, d_model, d_head), ``W_K`` and ``W_V`` (layer, kv_head, d_model,
        d_head), ``W_O`` (layer, head, d_head, d_model), each input factor multiplied by its
        layer's ``ln1`` scale (rows; minus the row mean for a LayerNorm), and ``kv_of_head``
        (head,) int64.
    """
    import torch

    bridge = model.bridge
    d_model = int(model.cfg.d_model)
    with torch.no_grad():
        weights = {name: getattr(bridge, name).detach().to("cpu", torch.float64).numpy().copy()
                   for name in ("W_Q", "W_K", "W_V", "W_O")}
    for layer in range(model.n_layers):
        norm = bridge.blocks[layer].ln1
        scale = _norm_fold(norm, d_model)[:, None]
        for name in ("W_Q", "W_K", "W_V"):
            folded = scale * weights[name][layer]
            if _centred(type(getattr(norm, "original_component", norm)).__name__):
                folded = folded - folded.mean(axis=-2, keepdims=True)  # (I - 11^T/d) diag(w) W
            weights[name][layer] = folded
    n_heads, n_kv = weights["W_Q"].shape[1], weights["W_K"].shape[1]
    weights["kv_of_head"] = np.arange(n_heads, dtype=np.int64) // (n_heads // n_kv)
    return weights


def _single_blas():
    """One BLAS thread for the many small products (threads fight over d_head-sized work)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional at run time: only slower without it
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _root(gram):
    """L with ``L L^T = gram`` for stacks of symmetric PSD matrices (eigenvalues clipped at 0)."""
    values, vectors = np.linalg.eigh(gram)
    return vectors * np.sqrt(np.clip(values, 0.0, None))[..., None, :]


def _gram(a):
    return np.swapaxes(a, -1, -2) @ a


def _trace_form(m, gram):
    """``tr(M G M^T)`` over the last two axes (``||M L||_F^2`` for ``L L^T = G``)."""
    return np.einsum("...ij,...ij->...", m @ gram, m)


def composition_from_weights(W_Q, W_K, W_V, W_O, kv_of_head=None, *, dtype=np.float32) -> dict:
    """Q-, K- and V-composition of every (earlier head, later head) pair from the factors.

    Parameters
    ----------
    W_Q, W_O : array (layer, head, d_model, d_head), (layer, head, d_head, d_model)
    W_K, W_V : array (layer, kv_head, d_model, d_head)
    kv_of_head : int array (head,), optional
        Key/value head of each query head (default ``h // group``).
    dtype : numpy dtype
        Of the one large product (float32 by default: a relative error near 1e-6 on the
        scores; float64 for exactness tests). Gram matrices and norms are float64.

    BLAS runs on one thread here: the d_head-sized products are many and small, and threads
    contending for them (on a loaded machine especially) cost far more than they give.

    Returns
    -------
    dict
        ``score`` float64 (composition, layer, head, source_layer, source_head), NaN unless
        ``source_layer < layer`` or where a norm is zero.
    """
    with _single_blas():
        return _composition(W_Q, W_K, W_V, W_O, kv_of_head, dtype)


def _composition(W_Q, W_K, W_V, W_O, kv_of_head, dtype):
    W_Q, W_K, W_V, W_O = (np.asarray(w, dtype=np.float64) for w in (W_Q, W_K, W_V, W_O))
    n_layers, n_heads, d_model, d_head = W_Q.shape
    n_kv = W_K.shape[1]
    kv = np.arange(n_heads) // (n_heads // n_kv) if kv_of_head is None else np.asarray(kv_of_head, dtype=np.int64)
    v_of_head = W_V[:, kv]  # (layer, head, d_model, d_head)
    # earlier side: B~ = L_A^T W_O with L_A L_A^T = W_V^T W_V, so ||W_OV||_F = ||B~||_F
    source = np.swapaxes(_root(_gram(v_of_head)), -1, -2) @ W_O  # (layer, head, d_head, d_model)
    source_norm = np.sqrt((source ** 2).sum(axis=(-1, -2)))
    g_q, g_k, g_v = _gram(W_Q), _gram(W_K), _gram(W_V)
    g_o = W_O @ np.swapaxes(W_O, -1, -2)  # (layer, head, d_head, d_head)
    qk_norm = np.sqrt(np.einsum("lhij,lhji->lh", g_q, g_k[:, kv]))
    ov_norm = np.sqrt(np.einsum("lhij,lhji->lh", g_v[:, kv], g_o))
    score = np.full((3, n_layers, n_heads, n_layers, n_heads), np.nan)
    flat_source = source.astype(dtype)
    for layer in range(1, n_layers):
        # query factor with the key's root folded in: ||B~ W_Q L_K||_F is the Q numerator
        q_target = W_Q[layer] @ _root(g_k[layer, kv])  # (head, d_model, d_head)
        targets = np.concatenate([q_target, W_K[layer], W_V[layer]], axis=0)  # (head + 2 kv, d_model, d_head)
        left = flat_source[:layer].reshape(layer * n_heads * d_head, d_model)
        right = np.transpose(targets, (1, 0, 2)).reshape(d_model, -1).astype(dtype)
        prod = (left @ right).reshape(layer, n_heads, d_head, -1, d_head)
        prod = np.transpose(prod, (0, 1, 3, 2, 4))  # (source_layer, source_head, target, d_head, d_head)
        q_num = np.einsum("...ij,...ij->...", prod[:, :, :n_heads], prod[:, :, :n_heads]).astype(np.float64)
        k_num = _trace_form(prod[:, :, n_heads + kv], g_q[layer].astype(dtype)).astype(np.float64)
        v_num = _trace_form(prod[:, :, n_heads + n_kv + kv], g_o[layer].astype(dtype)).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            for c, (num, later) in enumerate(((q_num, qk_norm[layer]), (k_num, qk_norm[layer]), (v_num, ov_norm[layer]))):
                value = np.sqrt(np.clip(num, 0.0, None)) / (source_norm[:layer, :, None] * later[None, None, :])
                score[c, layer, :, :layer, :] = np.transpose(value, (2, 0, 1))
    score[~np.isfinite(score)] = np.nan
    return {"score": score, "d_model": d_model, "d_head": d_head}


def random_composition_baseline(d_model: int, d_head: int, *, n_samples: int = 200, rng=0) -> dict:
    """Monte Carlo Q-, K-, V-composition scores of independent Gaussian factors of these shapes.

    Returns
    -------
    dict
        ``samples`` float64 (composition, n_samples); ``mean``, ``sd`` (composition,);
        ``expected_mean_square`` = 1 / d_model (exact for every composition).
    """
    generator = as_generator(rng)
    samples = np.empty((3, n_samples))
    chunk = 25  # bounds the memory of one batch of factor draws
    with _single_blas():
        for start in range(0, n_samples, chunk):
            size = min(chunk, n_samples - start)
            factors = [generator.standard_normal((size, 2, 1, d_model, d_head)) for _ in range(3)]
            w_o = generator.standard_normal((size, 2, 1, d_head, d_model))
            samples[:, start:start + size] = _pair_scores(*factors, w_o)
    return {"samples": samples, "mean": samples.mean(axis=1), "sd": samples.std(axis=1, ddof=1),
            "expected_mean_square": 1.0 / d_model}


def _pair_scores(w_q, w_k, w_v, w_o):
    """Scores of head (0, 0) onto head (1, 0) for a batch of two-layer, one-head factor sets, (3, batch)."""
    a, b = w_v[:, 0, 0], w_o[:, 0, 0]
    source = np.swapaxes(_root(_gram(a)), -1, -2) @ b  # (batch, d_head, d_model)
    q, k, v, o = w_q[:, 1, 0], w_k[:, 1, 0], w_v[:, 1, 0], w_o[:, 1, 0]
    g_q, g_k, g_v, g_o = _gram(q), _gram(k), _gram(v), o @ np.swapaxes(o, -1, -2)
    source_norm = np.sqrt((source ** 2).sum(axis=(-1, -2)))
    qk_norm = np.sqrt(np.einsum("bij,bji->b", g_q, g_k))
    ov_norm = np.sqrt(np.einsum("bij,bji->b", g_v, g_o))
    numerators = [_trace_form(source @ q, g_k), _trace_form(source @ k, g_q), _trace_form(source @ v, g_o)]
    later = [qk_norm, qk_norm, ov_norm]
    return np.array([np.sqrt(num) / (source_norm * norm) for num, norm in zip(numerators, later)])


def composition_scores(model, *, n_baseline: int = 200, rng=0, dtype=np.float32) -> xr.Dataset:
    """Q-, K- and V-composition of every pair (earlier head, later head) of a model.

    Parameters
    ----------
    model : LoadedModel
    n_baseline : int
        Random factor sets of the model's shapes for the baseline.
    rng : int or numpy.random.Generator
        Seed of the baseline.
    dtype : numpy dtype
        Of the large product (see :func:`composition_from_weights`).

    Returns
    -------
    xarray.Dataset
        Kind ``composition``: ``score`` (composition, layer, head, source_layer, source_head),
        NaN unless the source layer is earlier; ``excess`` = score minus the baseline mean;
        ``baseline_mean``, ``baseline_sd`` (composition); attrs ``model``, ``d_model``,
        ``d_head``, ``n_kv_heads``, ``baseline_expected_rms`` = ``d_model ** -0.5``, provenance.
    """
    weights = head_weights(model)
    out = composition_from_weights(weights["W_Q"], weights["W_K"], weights["W_V"], weights["W_O"],
                                   weights["kv_of_head"], dtype=dtype)
    seed = seed_of(rng) if is_integer(rng) else None  # a Generator's state is not a seed to record
    base = random_composition_baseline(out["d_model"], out["d_head"], n_samples=n_baseline, rng=rng)
    return composition_dataset(out["score"], base, model=model.name, n_kv_heads=int(weights["W_K"].shape[1]),
                               rng=seed, n_baseline=n_baseline, d_model=out["d_model"], d_head=out["d_head"])


@renamed_keywords(seed="rng")
def composition_dataset(score, baseline, *, model: str, n_kv_heads: int, rng, n_baseline: int, d_model: int,
                        d_head: int) -> xr.Dataset:
    """The ``composition`` dataset of a score array and its baseline (see :func:`composition_scores`).

    ``rng`` is the baseline's seed, kept in attrs ``seed``: an int; None or a Generator (whose
    state is not a seed to record) are kept as -1.
    """
    seed = int(rng) if is_integer(rng) else None
    _, n_layers, n_heads = score.shape[:3]
    ds = xr.Dataset(
        {
            "score": (("composition", "layer", "head", "source_layer", "source_head"), score),
            "baseline_mean": ("composition", baseline["mean"]),
            "baseline_sd": ("composition", baseline["sd"]),
        },
        coords={"composition": list(COMPOSITIONS), "layer": np.arange(n_layers), "head": np.arange(n_heads),
                "source_layer": np.arange(n_layers), "source_head": np.arange(n_heads)},
        attrs=provenance_attrs("composition", "icl_cmr.adapters.lm.composition.composition_scores", model=model,
                               seed=-1 if seed is None else int(seed), n_baseline=int(n_baseline)),
    )
    ds["excess"] = ds["score"] - ds["baseline_mean"]
    ds.attrs.update(model=model, d_model=int(d_model), d_head=int(d_head), n_kv_heads=int(n_kv_heads),
                    baseline_expected_rms=float(d_model) ** -0.5)
    ds["score"].attrs["long_name"] = "composition score ||W_e W_l|| / (||W_e|| ||W_l||) (Elhage et al. 2021)"
    return validate(ds, "composition")


def validate_composition(ds: xr.Dataset) -> None:
    """Check a composition dataset (docs/schema.md)."""
    kind = "composition"
    require_variables(ds, ["score", "baseline_mean", "baseline_sd"], kind)
    require_dims(ds["score"], ["composition", "layer", "head", "source_layer", "source_head"], kind, "score")
    if list(ds["composition"].values) != list(COMPOSITIONS):
        raise SchemaError(f"composition coordinate must be {list(COMPOSITIONS)}; got {list(ds['composition'].values)}")
