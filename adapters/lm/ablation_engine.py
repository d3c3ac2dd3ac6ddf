"""The ablation test's engine: losses of many head sets per passage, zero, mean or resample ablation.

Each passage runs unablated once; every (head set, mode) condition resumes at its set's first
ablated layer, several conditions batched per forward pass, on a plain Hugging Face copy of the
bridge's model (:func:`icl_cmr.adapters.lm.interventions.plain_model`, sharing its weights).
Heads are ablated at the input of each layer's attention output projection (``hook_z``
flattened). Each layer gets the attention mask and rotary embedding of its attention type, as the
model's own forward builds them (Gemma 3's sliding-window and full-attention layers: :func:`_layer_inputs`).
Models outside :data:`~icl_cmr.adapters.lm.interventions.DIRECT_FAMILIES` run every condition
through the bridge. torch is imported inside the functions.
"""
from __future__ import annotations

import time

import numpy as np

from cmr.checks import as_generator
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError

from . import interventions
from .interventions import DIRECT_FAMILIES, SET_MODES, bos_id, geometry, host_logprob, placement

__all__ = ["set_losses", "donor_passages"]


def _head_width(config) -> int:
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _row_masks(rows, n_layers, n_heads, width, means, device, dtype):
    """Per layer: (keep, fill, swap) of shape (n_row, 1, n_heads * width) or None when no row ablates it.

    ``swap`` is 1 on the slices of resample rows (their fill is the donor's output) and None when
    no row of the chunk resamples, so zero and mean rows compute exactly as without resampling."""
    import torch

    keep = np.ones((len(rows), n_layers, n_heads, width), dtype=np.float32)
    fill = np.zeros_like(keep)
    swap = np.zeros_like(keep)
    for r, (heads, mode) in enumerate(rows):
        for layer, head in heads:
            keep[r, layer, head] = 0.0
            if mode == "mean":
                fill[r, layer, head] = means[layer, head]
            elif mode == "resample":
                swap[r, layer, head] = 1.0
    out = []
    for layer in range(n_layers):
        if keep[:, layer].all():
            out.append(None)
            continue
        shape = (len(rows), 1, n_heads * width)
        out.append((torch.as_tensor(keep[:, layer].reshape(shape), device=device, dtype=dtype),
                    torch.as_tensor(fill[:, layer].reshape(shape), device=device, dtype=dtype),
                    torch.as_tensor(swap[:, layer].reshape(shape), device=device, dtype=dtype)
                    if swap[:, layer].any() else None))
    return out


def _decoder_pass(plain, hidden, start, masks, predict_index, *, keep_states=False, stop=None, capture=None,
                  donor=None, dense=None):
    """Run decoder layers ``start..`` on ``hidden`` (rows, position, d_model) with row-wise ablation.

    ``donor``: per layer the donor passage's input of ``o_proj`` (1, position, n_heads * width),
    the output of resample rows. ``dense``: (index, gold) of more positions whose losses are
    wanted, projected apart from ``predict_index`` (so the logits there are computed as without).
    Returns (logits at ``predict_index`` or None when ``stop`` ends early, layer inputs when asked),
    and with ``dense`` their losses (rows, n_index; float64).
    """
    import torch

    body = plain.model
    position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
    mask, rotary = _layer_inputs(plain, hidden, position_ids)
    handles, states = [], []
    try:
        for layer in range(start, len(body.layers)):
            entry = masks[layer] if masks is not None else None
            o_proj = body.layers[layer].self_attn.o_proj
            if entry is not None:
                def ablate(module, args, entry=entry, layer=layer):
                    if entry[2] is None:
                        return (args[0] * entry[0] + entry[1],)
                    return (args[0] * entry[0] + (entry[1] + entry[2] * donor[layer]),)
                handles.append(o_proj.register_forward_pre_hook(ablate))
            if capture is not None:
                def measure(module, args, layer=layer):
                    capture(layer, args[0])
                handles.append(o_proj.register_forward_pre_hook(measure))
        end = len(body.layers) if stop is None else stop
        for layer in range(start, end):
            if keep_states:
                states.append(hidden)
            hidden = body.layers[layer](hidden, attention_mask=mask[layer], position_ids=position_ids,
                                        position_embeddings=rotary[layer])
    finally:
        for handle in handles:
            handle.remove()
    if stop is not None:
        return None, states
    logits = plain.lm_head(body.norm(hidden[:, predict_index]))
    cap = float(getattr(plain.config, "final_logit_softcapping", None) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    if dense is None:
        return logits, states
    return logits, states, _dense_losses(plain, body.norm(hidden[:, dense[0]]), dense[1], cap)


def _layer_inputs(plain, hidden, position_ids):
    """Per layer, the attention mask and the rotary embedding (cos, sin) its decoder layer takes.

    As the model's own forward builds them (no cache, no padding): one causal mask and one
    rotary embedding for every layer (Llama, Mistral), or, where the configuration names each
    layer's attention type (``config.layer_types``), the causal mask of full-attention layers and
    the sliding-window causal mask of sliding-window layers (Qwen2/3, Gemma 3); with a rotary
    embedding per layer type where the model keeps one per type (Gemma 3: local and global
    frequencies, ``rotary_emb(hidden, position_ids, layer_type)``).
    """
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    body, config = plain.model, plain.config
    n_layers = len(body.layers)
    # no cache: passed by position, since its keyword was renamed (past_key_values -> cache, transformers 5.24)
    full = create_causal_mask(config, hidden, None, None, position_ids=position_ids)
    types = getattr(config, "layer_types", None)
    if types is None:
        masks = [full] * n_layers
    else:
        by_type = {"full_attention": full}
        if "sliding_attention" in types:
            by_type["sliding_attention"] = create_sliding_window_causal_mask(config, hidden, None, None,
                                                                              position_ids=position_ids)
        masks = [by_type[types[layer]] for layer in range(n_layers)]
    if getattr(body.rotary_emb, "layer_types", None) is None:
        rotary = [body.rotary_emb(hidden, position_ids=position_ids)] * n_layers
    else:
        by_type = {kind: body.rotary_emb(hidden, position_ids, kind) for kind in set(types)}
        rotary = [by_type[types[layer]] for layer in range(n_layers)]
    return masks, rotary


def _direct(plain) -> bool:
    """Whether the engine runs ``plain`` itself (else every condition goes through the bridge)."""
    return (plain is not None and plain.config.model_type in DIRECT_FAMILIES and hasattr(plain.model, "rotary_emb")
            and not getattr(plain.config, "use_bidirectional_attention", False))


def _dense_losses(plain, normed, gold, cap):
    """Losses (float64, rows x positions) from final hidden states, one row at a time (the vocabulary
    projection of hundreds of positions is large); log-sum-exp in float32 on the device."""
    import torch

    out = np.empty(tuple(normed.shape[:2]), dtype=np.float64)
    for row in range(normed.shape[0]):
        logits = plain.lm_head(normed[row]).float()
        if cap > 0:
            logits = cap * torch.tanh(logits / cap)
        picked = logits.gather(-1, gold[row].to(logits.device).unsqueeze(-1)).squeeze(-1)
        out[row] = (torch.logsumexp(logits, dim=-1) - picked).double().cpu().numpy()
    return out


@keyword_only
@renamed_keywords(seed="rng")
def donor_passages(n_passages: int, *, rng) -> np.ndarray:
    """A fixed derangement of ``n_passages`` passages: passage ``p`` takes resampled head outputs from
    passage ``donors[p] != p`` (a random cyclic order drawn from ``rng``, so every passage is a donor
    exactly once). ``rng``: an int is the seed of ``numpy.random.default_rng``; a Generator is drawn
    from; None: fresh entropy."""
    if int(n_passages) < 2:
        raise ParameterError(f"resample ablation needs at least 2 passages (a donor for each); got {n_passages}")
    order = as_generator(rng).permutation(int(n_passages))
    donors = np.empty(int(n_passages), dtype=np.int64)
    donors[order] = np.roll(order, -1)
    return donors


@keyword_only
def set_losses(bridge, passages, targets, head_sets, *, modes=("zero",), batch_size=8, progress=None, deadline=None,
               donors=None, extra_targets=None):
    """Losses at ``targets`` of every passage, unablated and with every head set ablated in every mode.

    The unablated pass runs once per passage and keeps the residual stream at the input of
    every layer; each ablated condition resumes there at its set's first ablated layer (layers
    before it are the same as unablated). With mean ablation the unablated pass first runs over
    every passage (the mean head outputs need them all), and a partial pass up to the deepest
    first-ablated layer then gives each passage's states. With resample ablation an unablated
    pass of the passage's donor gives the donor's head outputs at every position. Conditions of
    one passage are batched, each row with its own heads zeroed, set to their mean or to the
    donor's output at the input of ``o_proj``. Only the scored positions are projected onto the
    vocabulary. Models outside :data:`DIRECT_FAMILIES` run every condition through the bridge
    (:func:`passage_losses`).

    Parameters
    ----------
    bridge : TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
    targets : sequence of int
        0-based text positions whose loss is wanted.
    head_sets : sequence of sequences of (layer, head)
    modes : sequence of {"zero", "mean", "resample"}
    batch_size : int
        Conditions (head set x mode rows) per forward pass.
    progress : tqdm bar, optional
        Advanced by one per passage.
    deadline : float, optional
        A ``time.monotonic()`` value: no passage starts after it (with mean ablation the mean
        outputs still come from every passage).
    donors : ndarray of int, shape (n_passage,), optional
        For resample ablation: the passage whose head outputs (``hook_z``, same positions,
        unablated) replace the ablated heads' outputs in passage ``p`` (:func:`donor_passages`).
    extra_targets : sequence of int, optional
        More text positions whose losses are wanted from the same passes, computed apart from
        ``targets`` (float32 log-sum-exp), so the losses at ``targets`` stay as without them.

    Returns
    -------
    base : ndarray, shape (n_done, n_target)
        Unablated losses (nats) of the first ``n_done`` passages (all unless ``deadline`` passed).
    losses : ndarray, shape (n_mode, n_set, n_done, n_target)
    means : ndarray, shape (n_layer, n_head, d_head), or None without mean ablation
        Mean head outputs over every text position of the passages (float64).
    extra : dict, only with ``extra_targets``
        ``base`` (n_done, n_extra) and ``losses`` (n_mode, n_set, n_done, n_extra) at ``extra_targets``.
    """
    import torch


    modes = tuple(modes)
    if not modes or any(m not in SET_MODES for m in modes):
        raise ParameterError(f"modes must be a non-empty subset of {SET_MODES}; got {modes}")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    extra = None if extra_targets is None else np.asarray(extra_targets, dtype=np.int64)
    head_sets = [[(int(l), int(h)) for l, h in heads] for heads in head_sets]
    if any(not heads for heads in head_sets):
        raise ParameterError("every head set needs at least one head")
    if "resample" in modes:
        donors = _check_donors(donors, passages.shape[0])
    plain = interventions.plain_model(bridge)
    if not _direct(plain):
        return _bridge_set_losses(bridge, passages, targets, head_sets, modes, progress, donors, extra)
    bos = bos_id(bridge)
    offset = 1 if bos is not None else 0
    reach = targets if extra is None else np.concatenate([targets, extra])
    if reach.min() + offset < 1 or reach.max() >= passages.shape[1]:
        raise ParameterError(
            f"scored positions must lie in {1 - offset}..{passages.shape[1] - 1}; got {reach.min()}..{reach.max()}"
        )
    length = int(reach.max()) + offset
    device, dtype = placement(bridge)
    n_layers, n_heads = geometry(bridge)
    width = _head_width(plain.config)
    predict_index = torch.as_tensor(targets + offset - 1, device=device)
    extra_index = None if extra is None else torch.as_tensor(extra + offset - 1, device=device)

    def inputs(rows):
        ids = torch.as_tensor(passages[rows, : length - offset])
        if offset:
            ids = torch.cat([torch.full((ids.shape[0], 1), int(bos), dtype=torch.long), ids], dim=1)
        return ids.to(device)

    def dense(rows):
        return None if extra is None else (extra_index, torch.as_tensor(passages[rows][:, extra]))

    sums = torch.zeros((n_layers, n_heads * width), dtype=torch.float64)

    def add_sums(layer, z):  # float32 on the device, float64 on the host (as passage_losses)
        sums[layer] += z[:, offset:].sum(dim=(0, 1), dtype=torch.float32).cpu().double()

    base = np.full((passages.shape[0], targets.size), np.nan)
    losses = np.empty((len(modes), len(head_sets), passages.shape[0], targets.size))
    n_extra = 0 if extra is None else extra.size
    extra_base = np.full((passages.shape[0], n_extra), np.nan)
    extra_losses = np.empty((len(modes), len(head_sets), passages.shape[0], n_extra))

    def finish(done):
        out = (base[:done], losses[:, :, :done], means)
        return out if extra is None else (*out, dict(base=extra_base[:done], losses=extra_losses[:, :, :done]))

    conditions = [(m, s) for m in range(len(modes)) for s in range(len(head_sets))]
    first = {c: min(l for l, _ in head_sets[c[1]]) for c in conditions}
    conditions.sort(key=lambda c: first[c])
    deepest = max(first.values())
    deepest_ablated = max(l for heads in head_sets for l, _ in heads)
    with torch.inference_mode():
        means = None
        if "mean" in modes:  # mean outputs over every passage before any mean ablation
            for start in range(0, passages.shape[0], 4):
                rows = np.arange(start, min(start + 4, passages.shape[0]))
                logits, *rest = _decoder_pass(plain, plain.model.embed_tokens(inputs(rows)), 0, None, predict_index,
                                              capture=add_sums, dense=dense(rows))
                base[rows] = (-host_logprob(logits, torch.as_tensor(passages[rows][:, targets]))).numpy()
                if extra is not None:
                    extra_base[rows] = rest[1]
            means = (sums / (passages.shape[0] * (length - offset))).numpy().reshape(n_layers, n_heads, width)
        for p in range(passages.shape[0]):
            if deadline is not None and time.monotonic() > deadline:
                return finish(p)
            gold = torch.as_tensor(passages[p, targets])
            embedded = plain.model.embed_tokens(inputs([p]))
            if means is None:  # no mean ablation: one unablated pass gives the losses and the states
                logits, states, *rest = _decoder_pass(plain, embedded, 0, None, predict_index, keep_states=True,
                                                      dense=dense([p]))
                base[p] = (-host_logprob(logits, gold[None])).numpy()[0]
                if extra is not None:
                    extra_base[p] = rest[0][0]
            else:
                _, states = _decoder_pass(plain, embedded, 0, None, predict_index, keep_states=True, stop=deepest + 1)
            donor = None
            if "resample" in modes:  # the donor's head outputs at every position, unablated
                donor = [None] * n_layers

                def keep_output(layer, z):
                    donor[layer] = z.clone()
                _decoder_pass(plain, plain.model.embed_tokens(inputs([int(donors[p])])), 0, None, predict_index,
                              capture=keep_output, stop=deepest_ablated + 1)
            for at in range(0, len(conditions), int(batch_size)):
                chunk = conditions[at: at + int(batch_size)]
                begin = first[chunk[0]]
                masks = _row_masks([(head_sets[s], modes[m]) for m, s in chunk], n_layers, n_heads, width, means,
                                   device, dtype)
                hidden = states[begin].expand(len(chunk), -1, -1)
                logits, _, *rest = _decoder_pass(plain, hidden, begin, masks, predict_index, donor=donor,
                                                 dense=dense([p] * len(chunk)))
                values = (-host_logprob(logits, gold.expand(len(chunk), -1))).numpy()
                for row, (m, s) in enumerate(chunk):
                    losses[m, s, p] = values[row]
                    if extra is not None:
                        extra_losses[m, s, p] = rest[0][row]
            if progress is not None:
                progress.update(1)
    return finish(passages.shape[0])


def _check_donors(donors, n_passages: int) -> np.ndarray:
    if donors is None:
        raise ParameterError("resample ablation needs donor passages (donors=...; see donor_passages)")
    donors = np.asarray(donors)
    if donors.shape != (n_passages,) or not np.issubdtype(donors.dtype, np.integer) \
            or np.any((donors < 0) | (donors >= n_passages)) or np.any(donors == np.arange(n_passages)):
        raise ParameterError(f"donors must give each of the {n_passages} passages another passage's index; "
                             f"got shape {donors.shape}, dtype {donors.dtype}")
    return donors.astype(np.int64)


def _resample_hooks(heads, donor_z):
    """fwd_hooks replacing the chosen heads' slices of hook_z by a donor's (``donor_z``: layer -> tensor)."""
    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))

    def make(layer, index):
        def hook(z, hook):
            z = z.clone()
            z[:, :, index] = donor_z[layer][:, : z.shape[1], index].to(dtype=z.dtype, device=z.device)
            return z
        return hook
    return [(f"blocks.{layer}.attn.hook_z", make(layer, sorted(index))) for layer, index in sorted(by_layer.items())]


def _bridge_set_losses(bridge, passages, targets, head_sets, modes, progress, donors=None, extra=None):
    """:func:`set_losses` through the bridge: one pass per condition (and per passage with resampling)."""
    import torch

    from .interventions import passage_losses

    base, means = passage_losses(bridge, passages, targets, capture_means=True)
    losses = np.empty((len(modes), len(head_sets), passages.shape[0], len(targets)))
    n_extra = 0 if extra is None else extra.size
    extra_base = passage_losses(bridge, passages, extra)[0] if n_extra else None
    extra_losses = np.empty((len(modes), len(head_sets), passages.shape[0], n_extra))
    bos = bos_id(bridge)
    for m, mode in enumerate(modes):
        for s, heads in enumerate(head_sets):
            if mode != "resample":
                losses[m, s], _ = passage_losses(bridge, passages, targets, heads=heads, mode=mode, means=means)
                if n_extra:
                    extra_losses[m, s], _ = passage_losses(bridge, passages, extra, heads=heads, mode=mode, means=means)
                continue
            for p in range(passages.shape[0]):
                ids = torch.as_tensor(passages[int(donors[p])])[None]
                if bos is not None:
                    ids = torch.cat([torch.full((1, 1), int(bos), dtype=torch.long), ids], dim=1)
                with torch.inference_mode():
                    _, cache = bridge.run_with_cache(ids.to(placement(bridge)[0]),
                                                     names_filter=lambda n: n.endswith("attn.hook_z"))
                donor_z = {l: cache[f"blocks.{l}.attn.hook_z"] for l, _ in heads}
                with bridge.hooks(fwd_hooks=_resample_hooks(heads, donor_z)):
                    losses[m, s, p] = passage_losses(bridge, passages[p:p + 1], targets)[0][0]
                    if n_extra:
                        extra_losses[m, s, p] = passage_losses(bridge, passages[p:p + 1], extra)[0][0]
    if progress is not None:
        progress.update(passages.shape[0])
    out = (base, losses, means)
    return out if extra is None else (*out, dict(base=extra_base, losses=extra_losses))
