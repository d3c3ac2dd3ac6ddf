"""Interventions on a TransformerBridge: head ablation and next-token losses at chosen positions.

Heads are ablated at their output before the output projection: the hook
``blocks.{layer}.attn.hook_z`` (shape batch x position x query head x d_head; grouped-query
models expose one slice per query head, so query heads are ablated). Zero ablation sets the
head's slice to 0; mean ablation sets it to the head's mean output over every text position of
the same passages (measured in the unablated pass). Only the logits at the scored positions are
computed (the body of the Hugging Face model runs under the bridge's hooks, then the output
embedding is applied to those positions), which saves the vocabulary projection elsewhere.

Device and dtype: passages go to the device of the bridge's weights and run in their dtype
(mean head outputs are applied there in that dtype); the losses are a float64 log-softmax on
the host of the logits copied in float32. torch is imported inside the functions, so
importing this module is cheap.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from cmr.errors import ParameterError

__all__ = ["MODES", "DIRECT_FAMILIES", "geometry", "placement", "bos_id", "ablation_hooks", "scored_logits", "passage_losses",
           "plain_model", "output_projections", "zeroed_heads", "set_losses",
           "full_logit_losses"]

#: ablation modes: replace a head's output by zeros or by its mean output
MODES = ("zero", "mean")


def geometry(bridge) -> tuple[int, int]:
    return int(bridge.cfg.n_layers), int(bridge.cfg.n_heads)


def placement(bridge):
    """``(device, dtype)`` of the bridge's floating-point weights (torch objects)."""
    for param in bridge.parameters():
        if param.is_floating_point():
            return param.device, param.dtype
    import torch

    return torch.device("cpu"), torch.float32


def _host_logprob(logits, gold):
    """Log-probability of ``gold`` (host int64) in float64 on the host, from float32 copies of ``logits``."""
    import torch

    logp = torch.log_softmax(logits.float().cpu().double(), dim=-1)
    return logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)


def bos_id(bridge):
    tokenizer = getattr(bridge, "tokenizer", None)
    return getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None


def ablation_hooks(heads, mode, means):
    """fwd_hooks replacing the chosen heads' slices of hook_z (zero or their mean output)."""
    import torch

    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))
    hooks = []
    for layer, head_list in sorted(by_layer.items()):
        index = torch.tensor(sorted(head_list), dtype=torch.long)
        fill = None if mode == "zero" else torch.as_tensor(means[layer][sorted(head_list)])
        cast = {}  # the fill in the activations' device and dtype, made once

        def hook(z, hook, index=index, fill=fill, cast=cast):
            z = z.clone()
            if fill is None:
                z[:, :, index.to(z.device), :] = 0.0
            else:
                key = (z.device, z.dtype)
                if key not in cast:
                    cast[key] = fill.to(dtype=z.dtype, device=z.device)
                z[:, :, index.to(z.device), :] = cast[key]
            return z

        hooks.append((f"blocks.{layer}.attn.hook_z", hook))
    return hooks


def scored_logits(bridge, input_ids, predict_index):
    """Logits at ``predict_index`` only (batch, n_index, vocab), with the bridge's hooks active."""
    import torch

    model = getattr(bridge, "original_model", None)
    body = getattr(model, "base_model", None) if model is not None else None
    head = model.get_output_embeddings() if model is not None and hasattr(model, "get_output_embeddings") else None
    if body is None or head is None or body is model:
        return bridge(input_ids)[:, predict_index]  # generic path: full logits
    hidden = body(input_ids=input_ids).last_hidden_state[:, predict_index]
    logits = head(hidden)
    cap = float(getattr(bridge.cfg, "output_logits_soft_cap", -1.0) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def passage_losses(bridge, passages, targets, *, heads=(), mode="zero", means=None, batch_size=4,
                   capture_means=False, progress=None) -> tuple[np.ndarray, np.ndarray | None]:
    """Next-token losses (nats) at text positions ``targets`` of every passage.

    Parameters
    ----------
    bridge : transformer_lens.model_bridge.TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
        Token ids without special tokens (:func:`icl_cmr.adapters.text_corpus.load_passages`).
    targets : sequence of int
        0-based text positions whose loss is wanted (each >= 1 unless a BOS is prepended).
    heads : sequence of (layer, head)
        Heads to ablate; empty for the unablated model.
    mode : {"zero", "mean"}
    means : ndarray, shape (n_layer, n_head, d_head), optional
        Mean head outputs, needed for ``mode="mean"``.
    capture_means : bool
        Also return the mean ``hook_z`` per head over all text positions (n_layer, n_head, d_head).
    progress : tqdm bar, optional
        Advanced by one per batch.

    Returns
    -------
    losses : ndarray, shape (n_passage, len(targets))
    means : ndarray or None
    """
    import torch

    if mode not in MODES:
        raise ParameterError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if heads and mode == "mean" and means is None:
        raise ParameterError("mean ablation needs the mean head outputs (means=...)")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    bos = bos_id(bridge)
    offset = 1 if bos is not None else 0
    if targets.min() + offset < 1 or targets.max() >= passages.shape[1]:
        raise ParameterError(
            f"scored positions must lie in {1 - offset}..{passages.shape[1] - 1}; got {targets.min()}..{targets.max()}"
        )
    length = int(targets.max()) + offset  # input positions needed: BOS + text up to the last target - 1
    device, _ = placement(bridge)
    predict_index = torch.as_tensor(targets + offset - 1, device=device)
    hooks = list(ablation_hooks(heads, mode, means)) if heads else []
    n_layers, n_heads = geometry(bridge)
    sums, count = None, 0
    if capture_means:
        sums = [None] * n_layers

        def make_capture(layer):
            def capture(z, hook):
                # summed in float32 on the device (bfloat16 sums would round), then float64 on the host
                part = z[:, offset:].sum(dim=(0, 1), dtype=torch.float32).cpu().double()
                sums[layer] = part if sums[layer] is None else sums[layer] + part
                return z
            return capture

        hooks += [(f"blocks.{l}.attn.hook_z", make_capture(l)) for l in range(n_layers)]
    out = np.empty((passages.shape[0], targets.size), dtype=np.float64)
    with torch.inference_mode(), bridge.hooks(fwd_hooks=hooks):
        for start in range(0, passages.shape[0], int(batch_size)):
            chunk = torch.as_tensor(passages[start:start + int(batch_size)])
            text = chunk[:, : length - offset]
            if offset:
                text = torch.cat([torch.full((chunk.shape[0], 1), int(bos), dtype=torch.long), text], dim=1)
            logits = scored_logits(bridge, text.to(device), predict_index)
            gold = chunk[:, torch.as_tensor(targets)]
            out[start:start + chunk.shape[0]] = (-_host_logprob(logits, gold)).numpy()
            count += chunk.shape[0] * (length - offset)
            if progress is not None:
                progress.update(1)
    mean_out = None
    if capture_means:
        mean_out = np.stack([(s / count).numpy() for s in sums]).astype(np.float64)
    return out, mean_out


def full_logit_losses(bridge, passages, targets, *, heads=(), mode="zero", means=None) -> np.ndarray:
    """The plain TransformerLens way to the losses of :func:`passage_losses` (the reference).

    ``bridge.run_with_hooks`` on the whole batch with full logits at every position, then the
    losses at ``targets``; a BOS is prepended when the tokenizer has one.
    """
    import torch

    passages = np.ascontiguousarray(passages, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    bos = bos_id(bridge)
    ids = torch.as_tensor(passages[:, : int(targets.max())])
    offset = 0
    if bos is not None:
        ids = torch.cat([torch.full((ids.shape[0], 1), int(bos), dtype=torch.long), ids], dim=1)
        offset = 1
    hooks = ablation_hooks(heads, mode, means) if heads else []
    device, _ = placement(bridge)
    with torch.inference_mode():
        logits = bridge.run_with_hooks(ids.to(device), fwd_hooks=hooks)
        gold = torch.as_tensor(passages[:, targets])
        return (-_host_logprob(logits[:, torch.as_tensor(targets + offset - 1, device=device)], gold)).numpy()


# --- many head sets per passage: the ablation test's engine ------------------------------------

#: model families whose decoder (embed, rotary, layers, norm, lm_head) the engine runs directly
DIRECT_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")

_PLAIN = {}  # id(bridge) -> (weakref to the bridge, plain model or None)


def plain_model(bridge):
    """The bridge's Hugging Face model as a plain module with SDPA attention, or None.

    The bridge wraps every submodule of its model with hooks; the ablation engine and
    generation need none of them (heads are ablated at the input of each layer's attention
    output projection, which is ``hook_z`` flattened: :func:`zeroed_heads`). A plain module
    sharing the bridge's weight tensors and buffers (no second copy) is built once per bridge;
    None when the architecture cannot be rebuilt from its configuration (then callers go through
    the bridge). Generation runs here rather than through the bridge, whose attention components
    read the key-value cache only under its older keyword (``past_key_values``; transformers
    5.24 passes ``cache``), so that cached generation through the bridge ignores the prompt.
    """
    import weakref

    key = id(bridge)
    if key in _PLAIN and _PLAIN[key][0]() is bridge:
        return _PLAIN[key][1]
    plain = _build_plain(bridge)
    _PLAIN[key] = (weakref.ref(bridge), plain)
    return plain


def _build_plain(bridge):
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    hf = getattr(bridge, "original_model", None)
    config = getattr(hf, "config", None)
    if config is None:
        return None
    _, dtype = placement(bridge)
    config = copy.deepcopy(config)
    config._attn_implementation = "sdpa"
    try:
        with torch.device("meta"):  # no memory: the tensors are the bridge's own (assigned below)
            plain = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype, trust_remote_code=False)
    except (ValueError, KeyError, TypeError, ImportError):  # no plain class or no SDPA for this architecture
        return None
    state = {_plain_name(k): v for k, v in hf.state_dict().items()}
    missing, _ = plain.load_state_dict(state, strict=False, assign=True)
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
        missing = [k for k in missing if not k.startswith("lm_head.")]
    if missing:
        return None
    buffers = {_plain_name(k): v for k, v in hf.named_buffers()}  # non-persistent ones too (rotary frequencies)
    for name, buffer in list(plain.named_buffers()):
        if buffer.is_meta and name in buffers:
            owner, _, leaf = name.rpartition(".")
            plain.get_submodule(owner)._buffers[leaf] = buffers[name]
    if any(t.is_meta for t in (*plain.parameters(), *plain.buffers())):
        return None
    return plain.eval()


def _plain_name(name: str) -> str:
    """A module or tensor name of the bridge's model without the bridge's wrapper levels."""
    return name.replace("._original_component", "").replace("_original_component.", "")


def output_projections(bridge, plain) -> list:
    """Per layer, the module of ``plain`` whose input is the heads' outputs side by side (``hook_z`` flattened).

    Found through the bridge's own map of each block's attention output (``blocks.{l}.attn.o``):
    the module of ``plain`` holding the same weight tensor (``o_proj``, GPT-2's ``c_proj``, ...),
    so it holds for every architecture the bridge supports.
    """
    import torch

    by_weight = {}
    for module in plain.modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.Tensor):
            by_weight.setdefault(weight.data_ptr(), []).append(module)
    projections = []
    for layer, block in enumerate(bridge.blocks):
        module = getattr(getattr(getattr(block, "attn", None), "o", None), "original_component", None)
        weight = getattr(module, "weight", None)
        found = by_weight.get(weight.data_ptr(), []) if weight is not None else []
        if len(found) != 1:
            raise ParameterError(f"layer {layer} of this model has no attention output projection to ablate heads at")
        projections.append(found[0])
    return projections


@contextlib.contextmanager
def zeroed_heads(bridge, plain, heads):
    """Zero-ablate ``heads`` ((layer, head) pairs) in ``plain`` while the block runs: their slices of
    the input of each layer's output projection are set to 0 at every position (as zeroing ``hook_z``)."""
    import torch

    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), set()).add(int(head))
    if not by_layer:
        yield
        return
    projections = output_projections(bridge, plain)
    n_layers, n_heads = geometry(bridge)
    width = int(bridge.cfg.d_head)
    device, dtype = placement(bridge)
    handles = []
    try:
        for layer, chosen in sorted(by_layer.items()):
            if not 0 <= layer < n_layers or not chosen <= set(range(n_heads)):
                raise ParameterError(f"heads must lie in layers 0..{n_layers - 1} and heads 0..{n_heads - 1}; "
                                     f"got layer {layer}, heads {sorted(chosen)}")
            keep = torch.ones(n_heads, width, device=device, dtype=dtype)
            keep[sorted(chosen)] = 0.0
            keep = keep.reshape(-1)

            def hook(module, args, keep=keep):
                return (args[0] * keep, *args[1:])
            handles.append(projections[layer].register_forward_pre_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _head_width(config) -> int:
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _row_masks(rows, n_layers, n_heads, width, means, device, dtype):
    """Per layer: (keep, fill) of shape (n_row, 1, n_heads * width) or None when no row ablates it."""
    import torch

    keep = np.ones((len(rows), n_layers, n_heads, width), dtype=np.float32)
    fill = np.zeros_like(keep)
    for r, (heads, mode) in enumerate(rows):
        for layer, head in heads:
            keep[r, layer, head] = 0.0
            if mode == "mean":
                fill[r, layer, head] = means[layer, head]
    out = []
    for layer in range(n_layers):
        if keep[:, layer].all():
            out.append(None)
            continue
        shape = (len(rows), 1, n_heads * width)
        out.append((torch.as_tensor(keep[:, layer].reshape(shape), device=device, dtype=dtype),
                    torch.as_tensor(fill[:, layer].reshape(shape), device=device, dtype=dtype)))
    return out


def _decoder_pass(plain, hidden, start, masks, predict_index, *, keep_states=False, stop=None, capture=None):
    """Run decoder layers ``start..`` on ``hidden`` (rows, position, d_model) with row-wise ablation.

    Returns (logits at ``predict_index`` or None when ``stop`` ends early, layer inputs when asked).
    """
    import torch
    from transformers.masking_utils import create_causal_mask

    body = plain.model
    position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
    # no cache: passed by position, since its keyword was renamed (past_key_values -> cache, transformers 5.24)
    mask = create_causal_mask(plain.config, hidden, None, None, position_ids=position_ids)
    rotary = body.rotary_emb(hidden, position_ids=position_ids)
    handles, states = [], []
    try:
        for layer in range(start, len(body.layers)):
            entry = masks[layer] if masks is not None else None
            o_proj = body.layers[layer].self_attn.o_proj
            if entry is not None:
                def ablate(module, args, entry=entry):
                    return (args[0] * entry[0] + entry[1],)
                handles.append(o_proj.register_forward_pre_hook(ablate))
            if capture is not None:
                def measure(module, args, layer=layer):
                    capture(layer, args[0])
                handles.append(o_proj.register_forward_pre_hook(measure))
        end = len(body.layers) if stop is None else stop
        for layer in range(start, end):
            if keep_states:
                states.append(hidden)
            hidden = body.layers[layer](hidden, attention_mask=mask, position_ids=position_ids,
                                        position_embeddings=rotary)
    finally:
        for handle in handles:
            handle.remove()
    if stop is not None:
        return None, states
    logits = plain.lm_head(body.norm(hidden[:, predict_index]))
    cap = float(getattr(plain.config, "final_logit_softcapping", None) or -1.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits, states


def set_losses(bridge, passages, targets, head_sets, modes=("zero",), *, batch_size=8, progress=None, deadline=None):
    """Losses at ``targets`` of every passage, unablated and with every head set ablated in every mode.

    The unablated pass runs once per passage and keeps the residual stream at the input of
    every layer; each ablated condition resumes there at its set's first ablated layer (layers
    before it are the same as unablated). With mean ablation the unablated pass first runs over
    every passage (the mean head outputs need them all), and a partial pass up to the deepest
    first-ablated layer then gives each passage's states. Conditions of one passage are batched, each
    row with its own heads zeroed or set to their mean at the input of ``o_proj``. Only the
    scored positions are projected onto the vocabulary. Models outside
    :data:`DIRECT_FAMILIES` run every condition through the bridge (:func:`passage_losses`).

    Parameters
    ----------
    bridge : TransformerBridge
    passages : ndarray of int, shape (n_passage, n_token)
    targets : sequence of int
        0-based text positions whose loss is wanted.
    head_sets : sequence of sequences of (layer, head)
    modes : sequence of {"zero", "mean"}
    batch_size : int
        Conditions (head set x mode rows) per forward pass.
    progress : tqdm bar, optional
        Advanced by one per passage.
    deadline : float, optional
        A ``time.monotonic()`` value: no passage starts after it (with mean ablation the mean
        outputs still come from every passage).

    Returns
    -------
    base : ndarray, shape (n_done, n_target)
        Unablated losses (nats) of the first ``n_done`` passages (all unless ``deadline`` passed).
    losses : ndarray, shape (n_mode, n_set, n_done, n_target)
    means : ndarray, shape (n_layer, n_head, d_head), or None without mean ablation
        Mean head outputs over every text position of the passages (float64).
    """
    import torch

    modes = tuple(modes)
    if not modes or any(m not in MODES for m in modes):
        raise ParameterError(f"modes must be a non-empty subset of {MODES}; got {modes}")
    passages = np.ascontiguousarray(passages, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    head_sets = [[(int(l), int(h)) for l, h in heads] for heads in head_sets]
    if any(not heads for heads in head_sets):
        raise ParameterError("every head set needs at least one head")
    plain = plain_model(bridge)
    if plain is None or plain.config.model_type not in DIRECT_FAMILIES or not hasattr(plain.model, "rotary_emb"):
        return _bridge_set_losses(bridge, passages, targets, head_sets, modes, progress)
    bos = bos_id(bridge)
    offset = 1 if bos is not None else 0
    if targets.min() + offset < 1 or targets.max() >= passages.shape[1]:
        raise ParameterError(
            f"scored positions must lie in {1 - offset}..{passages.shape[1] - 1}; got {targets.min()}..{targets.max()}"
        )
    length = int(targets.max()) + offset
    device, dtype = placement(bridge)
    n_layers, n_heads = geometry(bridge)
    width = _head_width(plain.config)
    predict_index = torch.as_tensor(targets + offset - 1, device=device)

    def inputs(rows):
        ids = torch.as_tensor(passages[rows, : length - offset])
        if offset:
            ids = torch.cat([torch.full((ids.shape[0], 1), int(bos), dtype=torch.long), ids], dim=1)
        return ids.to(device)

    sums = torch.zeros((n_layers, n_heads * width), dtype=torch.float64)

    def add_sums(layer, z):  # float32 on the device, float64 on the host (as passage_losses)
        sums[layer] += z[:, offset:].sum(dim=(0, 1), dtype=torch.float32).cpu().double()

    base = np.full((passages.shape[0], targets.size), np.nan)
    losses = np.empty((len(modes), len(head_sets), passages.shape[0], targets.size))
    conditions = [(m, s) for m in range(len(modes)) for s in range(len(head_sets))]
    first = {c: min(l for l, _ in head_sets[c[1]]) for c in conditions}
    conditions.sort(key=lambda c: first[c])
    deepest = max(first.values())
    with torch.inference_mode():
        means = None
        if "mean" in modes:  # mean outputs over every passage before any mean ablation
            for start in range(0, passages.shape[0], 4):
                rows = np.arange(start, min(start + 4, passages.shape[0]))
                logits, _ = _decoder_pass(plain, plain.model.embed_tokens(inputs(rows)), 0, None, predict_index,
                                          capture=add_sums)
                base[rows] = (-_host_logprob(logits, torch.as_tensor(passages[rows][:, targets]))).numpy()
            means = (sums / (passages.shape[0] * (length - offset))).numpy().reshape(n_layers, n_heads, width)
        for p in range(passages.shape[0]):
            if deadline is not None and time.monotonic() > deadline:
                return base[:p], losses[:, :, :p], means
            gold = torch.as_tensor(passages[p, targets])
            embedded = plain.model.embed_tokens(inputs([p]))
            if means is None:  # zero ablation only: one unablated pass gives the losses and the states
                logits, states = _decoder_pass(plain, embedded, 0, None, predict_index, keep_states=True)
                base[p] = (-_host_logprob(logits, gold[None])).numpy()[0]
            else:
                _, states = _decoder_pass(plain, embedded, 0, None, predict_index, keep_states=True, stop=deepest + 1)
            for at in range(0, len(conditions), int(batch_size)):
                chunk = conditions[at: at + int(batch_size)]
                begin = first[chunk[0]]
                masks = _row_masks([(head_sets[s], modes[m]) for m, s in chunk], n_layers, n_heads, width, means,
                                   device, dtype)
                hidden = states[begin].expand(len(chunk), -1, -1)
                logits, _ = _decoder_pass(plain, hidden, begin, masks, predict_index)
                values = (-_host_logprob(logits, gold.expand(len(chunk), -1))).numpy()
                for row, (m, s) in enumerate(chunk):
                    losses[m, s, p] = values[row]
            if progress is not None:
                progress.update(1)
    return base, losses, means


def _bridge_set_losses(bridge, passages, targets, head_sets, modes, progress):
    base, means = passage_losses(bridge, passages, targets, capture_means=True)
    losses = np.empty((len(modes), len(head_sets), passages.shape[0], len(targets)))
    for m, mode in enumerate(modes):
        for s, heads in enumerate(head_sets):
            losses[m, s], _ = passage_losses(bridge, passages, targets, heads=heads, mode=mode, means=means)
    if progress is not None:
        progress.update(passages.shape[0])
    return base, losses, means
