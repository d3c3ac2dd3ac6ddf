"""Causal composition test: remove an earlier head's output from only the query, key or value input of a head.

Path-level ablation (the causal counterpart of :mod:`icl_cmr.adapters.lm.composition`): on
repeated-list prompts (BOS + a random word list + the same list again), the direct output
``z W_O`` of an earlier head is subtracted from the query input of one later head only
(``blocks.L.attn.hook_q_input``, one slice per query head), or from its key input only
(``hook_k_input``, one slice per key/value head: with grouped-query attention the other query
heads of the group see the same keys, but only this head is read), or from its value input
only (``hook_v_input``; the head's own values). Only the direct path is cut: MLPs and
intermediate heads still see the earlier head's output. The value input does not enter the
attention pattern, so it cannot move an induction score or a lag profile; the value path is
measured on the head's output instead: the share of its output at the scored positions, along
the output's own direction, that the ablation removes (V-composition: what the head copies,
not where it looks).

For each target head the test measures the drop of its induction score (attention from a
second-copy token to the token after its first copy) when every earlier head is removed from
the query side, from the key side, and when each earlier head is removed alone, and the change
of its attention lag profile. A head is K-composed when removing the earlier heads from its key input
destroys its induction score and removing them from its query input does not (the textbook
induction head of Elhage et al. 2021, a previous-token head feeding the key); Q-composed in
the mirror case (a duplicate-token head feeding the query, CMR's circuit, docs/circuit.md);
mixed when both matter. A head with (almost) no induction score has nothing to lose and is
reported as ``weak``.

Composition means reading what an earlier head *moved* from another position. The part of an
earlier head's output that comes from its attention to the position itself (``A[i, i] v_i W_O``)
moves nothing: it re-encodes what is already there (for a layer-0 head, the token's own
embedding and position). A key that reads its own position through that relay depends on the
earlier head without being composed with it. So every ablation is done twice: with the whole
direct output (``*_all``, ``source_drop``) and with its moved part only, the attention to
other positions (``*_moved``, ``source_drop_moved``); the class and the upstream heads come from
the moved part, and ``whole_output_class`` keeps the class of the whole output.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from cmr.checks import seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from ..errors import ModelNotAvailableError
from .extraction import make_prompts

__all__ = ["PATHS", "PARTS", "SIGNIFICANT_DROP", "DOMINANCE", "UPSTREAM_DROP", "MIN_INDUCTION", "classify", "induction_scores",
           "path_ablation", "validate_path_ablation"]

PATHS = ("Q", "K")
#: the removed part of an earlier head's direct output: all of it, or only what it moved from other positions
PARTS = ("all", "moved")
#: a relative drop of the induction score at least this large counts as an effect of the path
SIGNIFICANT_DROP = 0.25
#: one path dominates when its relative drop is at least this many times the other's
DOMINANCE = 2.0
#: an earlier head is named as upstream when removing it alone drops the score this much
UPSTREAM_DROP = 0.1
#: below this induction score a head has no induction to remove: its relative drops are not classified
MIN_INDUCTION = 0.05


#: earlier heads ablated together in one batched recomputation (bounds its memory)
_CHUNK = 32


class _Stop(Exception):
    """Raised by the last hook of a pass: nothing after the last target layer is needed."""


@keyword_only
def classify(drop_q: float, drop_k: float, *, base_induction: float = 1.0) -> str:
    """``"K"``, ``"Q"``, ``"mixed"`` or ``"neither"`` from the relative drops of the two paths;
    ``"weak"`` when the head's induction score is below :data:`MIN_INDUCTION`."""
    if not base_induction >= MIN_INDUCTION:
        return "weak"
    q_on, k_on = drop_q >= SIGNIFICANT_DROP, drop_k >= SIGNIFICANT_DROP
    if k_on and (not q_on or drop_k >= DOMINANCE * drop_q):
        return "K"
    if q_on and (not k_on or drop_q >= DOMINANCE * drop_k):
        return "Q"
    return "mixed" if (q_on and k_on) else "neither"


def _lag_statistics(pattern, n_words: int, lags) -> tuple[np.ndarray, np.ndarray]:
    """Induction score (...,) and lag profile (..., lag) of attention patterns (..., seq, seq)."""
    k = np.arange(n_words)
    query = n_words + 1 + k
    induction = pattern[..., query[:-1], 1 + k[:-1] + 1].mean(axis=-1)
    profile = np.full(pattern.shape[:-2] + (len(lags),), np.nan)
    for i, lag in enumerate(lags):
        ok = (k + lag >= 0) & (k + lag < n_words)
        profile[..., i] = pattern[..., query[ok], 1 + k[ok] + lag].mean(axis=-1)
    return induction, profile


def _rotary(model) -> bool:
    return getattr(model.bridge.cfg, "positional_embedding_type", "") == "rotary"


def _base_pass(model, tokens, layers, last):
    """One pass to the last target layer: head outputs z, values and attention patterns (layers <
    last), each target layer's residual input, attention pattern and (rotary models) rotary tables."""
    import torch

    cache = {}

    def keeper(name):  # keyed by the name asked for (the library reports aliases by their own names)
        def keep(tensor, hook):
            cache[name] = tensor.detach()
            if name == f"blocks.{last}.attn.hook_pattern":
                raise _Stop

        return keep

    names = [f"blocks.{layer}.attn.hook_{hook}" for layer in range(last) for hook in ("z", "v", "pattern")]
    rotary = _rotary(model)
    for layer in layers:
        names += [f"blocks.{layer}.hook_in"]
        names += [f"blocks.{layer}.attn.hook_v", f"blocks.{layer}.attn.hook_pattern"] if layer == last else []
        names += [f"blocks.{layer}.attn.hook_cos", f"blocks.{layer}.attn.hook_sin"] if rotary else []
    with torch.no_grad():
        try:
            model.bridge.run_with_hooks(tokens, fwd_hooks=[(name, keeper(name)) for name in names])
        except _Stop:
            pass
    return cache


class _HeadAttention:
    """Recomputes one head's attention pattern from separate query-side and key-side inputs.

    Pre-norm attention (the layer's own LayerNorm or RMSNorm module), the head's W_Q, W_K and
    biases, rotary embeddings when the model has them (Llama-style) and none otherwise (absolute
    positions live in the residual stream, GPT-2-style), causal softmax; checked against the
    pattern the model computed (``check``).
    """

    def __init__(self, model, cache, layer: int, head: int):
        bridge = model.bridge
        block = bridge.blocks[layer]
        self.norm, self.attn = block.ln1.original_component, block.attn.original_component
        self.head, self.layer = head, layer
        self.kv = head // (model.n_heads // int(bridge.W_K.shape[1]))
        self.w_q, self.w_k = bridge.W_Q[layer, head].detach(), bridge.W_K[layer, self.kv].detach()
        self.b_q, self.b_k = self._bias(bridge, "b_Q", layer, head), self._bias(bridge, "b_K", layer, self.kv)
        self.scaling = float(getattr(self.attn, "scaling", self.w_q.shape[-1] ** -0.5))
        self.rotary = _rotary(model)
        if self.rotary:
            self.cos, self.sin = cache[f"blocks.{layer}.attn.hook_cos"], cache[f"blocks.{layer}.attn.hook_sin"]
        self.w_v, self.b_v = bridge.W_V[layer, self.kv].detach(), self._bias(bridge, "b_V", layer, self.kv)
        self.w_o = bridge.W_O[layer, head].detach()
        self.residual = cache[f"blocks.{layer}.hook_in"]
        self.observed = cache[f"blocks.{layer}.attn.hook_pattern"][:, head]
        self.observed_v = cache[f"blocks.{layer}.attn.hook_v"][:, :, self.kv]

    @staticmethod
    def _bias(bridge, name, layer, index):
        try:
            return getattr(bridge, name)[layer, index].detach()
        except AttributeError:  # bias-free projections (Llama)
            return None

    def _project(self, x, weight, bias):
        """This head's query or key from the normed input: (n, 1, seq, d_head)."""
        out = self.norm(x) @ weight
        out = out if bias is None else out + bias
        return out.reshape(-1, 1, *out.shape[-2:])

    def pattern(self, removed_q=None, removed_k=None):
        """Attention pattern (..., batch, seq, seq) with ``removed_*`` (..., batch, seq, d_model) taken
        out of the query-side or key-side input (leading dims: one ablation each)."""
        import torch

        x_q = self.residual if removed_q is None else self.residual - removed_q
        x_k = self.residual if removed_k is None else self.residual - removed_k
        lead = torch.broadcast_shapes(x_q.shape, x_k.shape)[:-1]
        with torch.no_grad():
            q = self._project(x_q.expand(*lead, -1), self.w_q, self.b_q)
            k = self._project(x_k.expand(*lead, -1), self.w_k, self.b_k)
            if self.rotary:
                from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

                q, k = apply_rotary_pos_emb(q, k, self.cos, self.sin)
            scores = (q @ k.transpose(-1, -2))[:, 0] * self.scaling
            seq = scores.shape[-1]
            future = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=scores.device), 1)
            pattern = scores.masked_fill(future, float("-inf")).softmax(-1)
            return pattern.reshape(*lead[:-1], seq, seq).float().cpu().numpy()

    def _value(self, x):
        """This head's values from the input ``x`` (..., batch, seq, d_model): (..., batch, seq, d_head)."""
        out = self.norm(x) @ self.w_v
        return out if self.b_v is None else out + self.b_v

    def output(self, positions, removed_v=None):
        """The head's direct output ``z W_O`` at ``positions`` (..., batch, len(positions), d_model),
        with ``removed_v`` (..., batch, seq, d_model) taken out of its value input only (the
        attention pattern is the model's own: the value input does not enter it)."""
        import torch

        x = self.residual if removed_v is None else self.residual - removed_v
        with torch.no_grad():
            values = self._value(x)
            return (self.observed[:, positions].to(values.dtype) @ values) @ self.w_o.to(values.dtype)

    def check(self, tolerance: float = 1e-4) -> None:
        import torch

        got = self.pattern()
        want = self.observed.float().cpu().numpy()
        error = float(np.abs(got - want).max())
        with torch.no_grad():
            value = self._value(self.residual)
        scale = float(self.observed_v.abs().max()) or 1.0
        error = max(error, float((value - self.observed_v).abs().max()) / scale)
        if not error <= tolerance:
            raise ModelNotAvailableError(
                f"path ablation recomputes attention as pre-norm Llama- and GPT-2-style models do (norm, "
                f"W_Q/W_K/W_V with biases, rotary or absolute positions, causal softmax); for L{self.layer}.H{self.head} "
                f"of this model the recomputed pattern or values differ "
                f"from the model's own by {error:.2g}")


def _output_drop(ablated, clean) -> np.ndarray:
    """1 - (the share of the clean output kept along its own direction), summed over batch, positions
    and d_model: (...,) for ``ablated`` (..., batch, pos, d_model); NaN when the clean output is 0."""
    norm = float((clean.double() ** 2).sum())
    kept = (ablated.double() * clean.double()).sum(dim=(-1, -2, -3)).cpu().numpy()
    return 1.0 - kept / norm if norm > 0 else np.full(kept.shape, np.nan)


@renamed_keywords(seed="rng")
def induction_scores(model, *, n_words: int = 50, n_prompts: int = 2, rng=0) -> np.ndarray:
    """Induction score of every head on the prompts of :func:`path_ablation`, float64 (layer, head);
    ``rng`` as there."""
    import torch

    made = make_prompts(model, n_words=n_words, n_prompts=n_prompts, rng=rng)
    tokens = torch.as_tensor(made.tokens).to(model.device)
    scores = np.zeros((model.n_layers, model.n_heads))

    def keep(tensor, hook):
        layer = int(hook.name.split(".")[1])
        pattern = tensor.detach().float().cpu().numpy()
        for head in range(model.n_heads):
            scores[layer, head] = _lag_statistics(pattern[:, head], n_words, [1])[0].mean()

    with torch.no_grad():
        model.bridge.run_with_hooks(tokens, fwd_hooks=[(lambda name: name.endswith("attn.hook_pattern"), keep)])
    return scores


@renamed_keywords(seed="rng")
def path_ablation(model, heads, *, n_words: int = 50, n_prompts: int = 2, rng=0, lags=range(-5, 6),
                  composition=None, progress=None) -> xr.Dataset:
    """The causal composition test of ``heads`` (see the module docstring).

    One forward pass (to the last target layer) records every earlier head's output and each
    target layer's residual input; each ablation then recomputes only the target head's
    attention from the edited query-side or key-side input (checked against the model's own
    pattern without edits), so every earlier head is tested alone on both paths.

    Parameters
    ----------
    model : LoadedModel
        A pre-norm model: Llama-style (RMSNorm, rotary attention, grouped-query attention) or
        GPT-2-style (LayerNorm, absolute positions, biases).
    heads : sequence of (layer, head)
        Target heads (layer >= 1).
    n_words, n_prompts : int
        Prompts (:func:`icl_cmr.adapters.lm.extraction.make_prompts`).
    rng : int, numpy.random.Generator or None
        Seed of the prompts (default 0); a Generator draws one (``int(rng.integers(2**63))``),
        None draws one from fresh entropy. The seed used is kept in attrs ``seed``.
    lags : sequence of int
        Lags of the attention profiles.
    composition : xarray.Dataset, optional
        The model's ``composition`` dataset; when given, ``source_composition`` holds the
        weight-based score of every (source, target, path) next to its causal drop.
    progress : callable, optional
        Called with 1 after each tested head (e.g. ``tqdm.update``).

    Returns
    -------
    xarray.Dataset
        Kind ``path_ablation`` with dims ``target`` (coords ``layer``, ``head``), ``path``
        (Q, K), ``source_layer``, ``source_head``, ``lag``: ``base_induction`` (target);
        ``induction_all`` and ``drop_all`` (target, path), the induction score and its
        relative drop after removing every earlier head's whole direct output from the path;
        ``induction_moved`` and ``drop_moved``, the same after removing only the part each
        earlier head moved from other positions (its attention to the position itself left
        in); ``profile`` (target, lag), ``profile_all`` and ``profile_moved`` (target, path,
        lag), attention by lag; ``source_drop`` and ``source_drop_moved`` (target, path,
        source_layer, source_head), the relative drop when that earlier head alone is removed
        (NaN for heads not earlier); ``source_composition`` (same dims, when ``composition``
        is given); ``composition_class`` (target) K, Q, mixed, neither (from the moved drops),
        or weak (induction score below ``MIN_INDUCTION``: nothing to remove);
        ``whole_output_class`` (target), the same from the whole-output drops;
        ``upstream`` (target), the earlier heads whose moved output alone drops the score by
        ``UPSTREAM_DROP`` or more ("layer.head/path", largest first); and the value path:
        ``value_drop_all`` and ``value_drop_moved`` (target), ``value_source_drop`` and
        ``value_source_drop_moved`` (target, source_layer, source_head), ``1 - <o', o> / <o, o>``
        for the head's output ``o`` (``z W_O`` at the induction score's query positions, summed
        over prompts) and ``o'`` the same with the earlier head(s) removed from its value input
        (NaN when the head's output is 0). Means over prompts.
    """
    import torch

    targets = [(int(layer), int(head)) for layer, head in heads]
    if not targets or any(not (1 <= layer < model.n_layers and 0 <= head < model.n_heads) for layer, head in targets):
        raise ParameterError(f"heads must be (layer, head) pairs with 1 <= layer < {model.n_layers} and "
                             f"0 <= head < {model.n_heads}; got {list(heads)!r}")
    lags = [int(lag) for lag in lags]
    seed = seed_of(rng)
    made = make_prompts(model, n_words=n_words, n_prompts=n_prompts, rng=seed)
    tokens = torch.as_tensor(made.tokens).to(model.device)
    last = max(layer for layer, _ in targets)
    cache = _base_pass(model, tokens, sorted({layer for layer, _ in targets}), last)
    w_o = model.bridge.W_O.detach()  # (layer, head, d_head, d_model)
    with torch.no_grad():  # direct output z W_O of every earlier head: (layer, head, batch, pos, d_model)
        z = torch.stack([cache[f"blocks.{e}.attn.hook_z"] for e in range(last)])  # (layer, batch, pos, head, d_head)
        v = torch.stack([cache[f"blocks.{e}.attn.hook_v"] for e in range(last)])  # (layer, batch, pos, kv, d_head)
        v = v.repeat_interleave(model.n_heads // v.shape[3], dim=3)  # the key/value head of each query head
        to_self = torch.stack([cache[f"blocks.{e}.attn.hook_pattern"].diagonal(dim1=-2, dim2=-1)
                               for e in range(last)])  # (layer, batch, head, pos): attention to the position itself
        moved_z = z - to_self.transpose(2, 3)[..., None].to(z.dtype) * v
        w_o = w_o[:last].to(z.dtype)
        direct = {"all": torch.einsum("lbphd,lhdm->lhbpm", z, w_o),
                  "moved": torch.einsum("lbphd,lhdm->lhbpm", moved_z, w_o)}
    n_t, n_l, n_h = len(targets), model.n_layers, model.n_heads
    base_induction = np.full(n_t, np.nan)
    induction, drop = ({part: np.full((n_t, 2), np.nan) for part in PARTS} for _ in range(2))
    profile = np.full((n_t, len(lags)), np.nan)
    profile_removed = {part: np.full((n_t, 2, len(lags)), np.nan) for part in PARTS}
    source_drop = {part: np.full((n_t, 2, n_l, n_h), np.nan) for part in PARTS}
    value_drop = {part: np.full(n_t, np.nan) for part in PARTS}
    value_source_drop = {part: np.full((n_t, n_l, n_h), np.nan) for part in PARTS}
    scored = n_words + 1 + np.arange(n_words - 1)  # the induction score's query positions
    classes, whole_classes, upstream = [], [], []
    for t, (layer, head) in enumerate(targets):
        attention = _HeadAttention(model, cache, layer, head)
        attention.check()
        base_ind, base_profile = _lag_statistics(attention.pattern(), n_words, lags)
        base = base_ind.mean()
        base_induction[t], profile[t] = base, base_profile.mean(axis=0)
        clean_output = attention.output(scored)
        for part in PARTS:
            every = direct[part][:layer].sum(dim=(0, 1))
            singles = direct[part][:layer].reshape(layer * n_h, *direct[part].shape[2:])
            value_drop[part][t] = _output_drop(attention.output(scored, every), clean_output)
            flat = value_source_drop[part][t, :layer].reshape(-1)
            for start in range(0, layer * n_h, _CHUNK):
                flat[start:start + _CHUNK] = _output_drop(attention.output(scored, singles[start:start + _CHUNK]),
                                                          clean_output)
            value_source_drop[part][t, :layer] = flat.reshape(layer, n_h)
            for p, path in enumerate(PATHS):
                key = f"removed_{path.lower()}"
                ablated, ablated_profile = _lag_statistics(attention.pattern(**{key: every}), n_words, lags)
                induction[part][t, p], drop[part][t, p] = ablated.mean(), 1.0 - ablated.mean() / base
                profile_removed[part][t, p] = ablated_profile.mean(axis=0)
                for start in range(0, layer * n_h, _CHUNK):
                    single, _ = _lag_statistics(attention.pattern(**{key: singles[start:start + _CHUNK]}), n_words, [1])
                    flat = source_drop[part][t, p, :layer].reshape(-1)
                    flat[start:start + single.shape[0]] = 1.0 - single.mean(axis=-1) / base
                    source_drop[part][t, p, :layer] = flat.reshape(layer, n_h)
        classes.append(classify(drop["moved"][t, 0], drop["moved"][t, 1], base_induction=base))
        whole_classes.append(classify(drop["all"][t, 0], drop["all"][t, 1], base_induction=base))
        named = [(source_drop["moved"][t, p, e, g], f"{e}.{g}/{path}") for p, path in enumerate(PATHS)
                 for e in range(layer) for g in range(n_h)
                 if source_drop["moved"][t, p, e, g] >= UPSTREAM_DROP and classes[-1] != "weak"]
        upstream.append(" ".join(name for _, name in sorted(named, reverse=True)) or "-")
        if progress is not None:
            progress(1)
    dims4 = ("target", "path", "source_layer", "source_head")
    variables = {
        "base_induction": ("target", base_induction),
        "induction_all": (("target", "path"), induction["all"]),
        "drop_all": (("target", "path"), drop["all"]),
        "induction_moved": (("target", "path"), induction["moved"]),
        "drop_moved": (("target", "path"), drop["moved"]),
        "profile": (("target", "lag"), profile),
        "profile_all": (("target", "path", "lag"), profile_removed["all"]),
        "profile_moved": (("target", "path", "lag"), profile_removed["moved"]),
        "source_drop": (dims4, source_drop["all"]),
        "source_drop_moved": (dims4, source_drop["moved"]),
        "value_drop_all": ("target", value_drop["all"]),
        "value_drop_moved": ("target", value_drop["moved"]),
        "value_source_drop": (dims4[:1] + dims4[2:], value_source_drop["all"]),
        "value_source_drop_moved": (dims4[:1] + dims4[2:], value_source_drop["moved"]),
        "composition_class": ("target", np.array(classes, dtype=str)),
        "whole_output_class": ("target", np.array(whole_classes, dtype=str)),
        "upstream": ("target", np.array(upstream, dtype=str)),
    }
    if composition is not None:
        values = np.full(source_drop["all"].shape, np.nan)
        for t, (layer, head) in enumerate(targets):
            for p, path in enumerate(PATHS):
                values[t, p] = composition["score"].sel(composition=path, layer=layer, head=head).values
        variables["source_composition"] = (dims4, values)
    ds = xr.Dataset(
        variables,
        coords={"target": np.arange(n_t), "layer": ("target", [layer for layer, _ in targets]),
                "head": ("target", [head for _, head in targets]), "path": list(PATHS),
                "source_layer": np.arange(n_l), "source_head": np.arange(n_h), "lag": lags},
        attrs=provenance_attrs("path_ablation", "icl_cmr.adapters.lm.causal_composition.path_ablation", model=model.name,
                               n_words=int(n_words), n_prompts=int(n_prompts), seed=int(seed),
                               significant_drop=SIGNIFICANT_DROP, dominance=DOMINANCE, upstream_drop=UPSTREAM_DROP),
    )
    ds.attrs["model"] = model.name
    return validate(ds, "path_ablation")


def validate_path_ablation(ds: xr.Dataset) -> None:
    """Check a path_ablation dataset (docs/schema.md)."""
    kind = "path_ablation"
    require_variables(ds, ["base_induction", "drop_all", "drop_moved", "source_drop", "source_drop_moved",
                           "composition_class", "whole_output_class"], kind)
    for name in ("drop_all", "drop_moved"):
        require_dims(ds[name], ["target", "path"], kind, name)
    for name in ("source_drop", "source_drop_moved"):
        require_dims(ds[name], ["target", "path", "source_layer", "source_head"], kind, name)
