"""Model directories as a way in: custom code, pickled objects, hostile chat templates, missing parts.

Every case ends in one ``ModelNotAvailableError`` on one line that says what is wrong, runs none
of the directory's code, shows no prompt, and leaves the directory as it was.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, require, save_tiny_model

# the Python of a hostile model directory: importing it leaves a marker file behind
_HOSTILE_CODE = """
import pathlib
pathlib.Path({marker!r}).write_text("the model directory's code ran")
from transformers import PretrainedConfig


class EvilConfig(PretrainedConfig):
    model_type = "evilnet"
"""


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    require("transformer_lens")
    return save_tiny_model(tmp_path_factory.mktemp("model"))


def _copy(source: Path, target: Path) -> Path:
    target.mkdir()
    for file in source.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): None if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


def _custom_code_directory(tmp_path: Path) -> tuple[Path, Path]:
    """A model directory whose config.json maps an unknown model type to its own modeling_evil.py."""
    directory, marker = tmp_path / "evil-model", tmp_path / "MARKER"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({
        "model_type": "evilnet", "architectures": ["EvilForCausalLM"],
        "auto_map": {"AutoConfig": "modeling_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"},
    }))
    (directory / "modeling_evil.py").write_text(_HOSTILE_CODE.format(marker=str(marker)))
    return directory, marker


def _load(directory):
    from icl_cmr.adapters.lm.loading import load_model

    return load_model(str(directory))


def _one_typed_line(call):
    from icl_cmr.adapters.errors import ModelNotAvailableError

    with pytest.raises(ModelNotAvailableError) as info:
        call()
    assert type(info.value) is ModelNotAvailableError
    assert "\n" not in str(info.value), "the message must be one line"
    return str(info.value)


# --- custom code ------------------------------------------------------------------------------


def test_custom_code_directory_is_refused_by_the_cli_without_a_prompt(tmp_path):
    """Through ``icl-cmr heads`` in a child process whose stdin answers "y": nothing asks, nothing runs."""
    require("torch")
    directory, marker = _custom_code_directory(tmp_path)
    before = _snapshot(directory)
    modules = tmp_path / "hf-modules"  # where transformers would copy the directory's code to import it
    env = dict(os.environ, HF_MODULES_CACHE=str(modules), PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, "-m", "icl_cmr.analyses.cli", "heads", str(directory), "-o",
                           str(tmp_path / "heads.nc")], input="y\ny\n", capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "[y/N]" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"icl-cmr heads: error: model directory {str(directory)!r} cannot be loaded: its "
                                  "config.json asks for custom Python code (modeling_evil.py), which is never run, "
                                  "and its model type 'evilnet' is not supported by the installed transformers ")
    assert not marker.exists(), "the model directory's code ran"
    assert not modules.exists() or not list(modules.rglob("modeling_evil.py"))
    assert _snapshot(directory) == before and not (tmp_path / "heads.nc").exists()


def test_custom_code_in_a_hub_cache_copy_is_refused_without_running_it(tmp_path):
    """A hub id whose cached snapshot maps its model type to its own code: refused, the code never runs."""
    require("torch")
    snapshot = tmp_path / "hub" / "models--evil--net" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    source, marker = _custom_code_directory(tmp_path)
    for file in source.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    (tmp_path / "hub" / "models--evil--net" / "refs").mkdir()
    (tmp_path / "hub" / "models--evil--net" / "refs" / "main").write_text("abc123")
    before = _snapshot(tmp_path / "hub")
    modules = tmp_path / "hf-modules"
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_MODULES_CACHE=str(modules),
               PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, "-m", "icl_cmr.analyses.cli", "heads", "evil/net", "-o",
                           str(tmp_path / "heads.nc")], input="y\ny\n", capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("icl-cmr heads: error: model 'evil/net' cannot be loaded: its config.json needs "
                                  "custom Python code of the model, which is never run"), done.stderr
    assert not marker.exists(), "the cached snapshot's code ran"
    assert not modules.exists() or not list(modules.rglob("modeling_evil.py"))
    assert _snapshot(tmp_path / "hub") == before and not (tmp_path / "heads.nc").exists()


@pytest.fixture
def no_prompt(monkeypatch):
    """Record (and refuse) every question a library would ask on the terminal."""
    asked = []

    def refuse(prompt=""):
        asked.append(prompt)
        raise EOFError("no terminal in this test")

    monkeypatch.setattr(builtins, "input", refuse)
    return asked


def test_transformers_is_never_asked_to_run_model_code(tmp_path, monkeypatch, no_prompt):
    """Past the check of config.json, every load passes trust_remote_code=False: transformers refuses on its own."""
    require("torch")
    directory, marker = _custom_code_directory(tmp_path)
    monkeypatch.setattr("icl_cmr.adapters.lm.loading.config_problem", lambda *args: None)
    message = _one_typed_line(lambda: _load(directory))
    assert "its config.json needs custom Python code of the model, which is never run" in message
    assert no_prompt == [] and not marker.exists()
    assert "trust_remote_code" not in message


def test_custom_tokenizer_code_is_refused(saved_model, tmp_path, no_prompt):
    directory = _copy(saved_model, tmp_path / "model")
    marker = tmp_path / "MARKER"
    config = json.loads((directory / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="EvilTokenizer", auto_map={"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]})
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    (directory / "tokenization_evil.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    before = _snapshot(directory)
    message = _one_typed_line(lambda: _load(directory))
    assert "its tokenizer needs custom Python code of the model (tokenizer_config.json auto_map), which is never run" \
        in message
    assert no_prompt == [] and not marker.exists() and _snapshot(directory) == before


def _passes_trust_remote_code_false(call: ast.Call) -> bool:
    return any(k.arg == "trust_remote_code" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def test_every_load_in_the_lm_adapters_refuses_remote_code():
    """Every from_pretrained, from_config and TransformerBridge boot under adapters/lm/ says trust_remote_code=False."""
    loaders = {"from_pretrained", "from_config", "boot_transformers", "boot"}
    calls = []
    for path in sorted((REPO_ROOT / "adapters" / "lm").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in loaders:
                calls.append((f"{path.name}:{node.lineno}", _passes_trust_remote_code_false(node)))
    assert len(calls) >= 6  # config, tokenizer, model, the GGUF pair, the bridge (and more as they come)
    assert [where for where, safe in calls if not safe] == []


# --- pickled weights ----------------------------------------------------------------------------


class _Opener:
    """A pickle whose loading would create a file (what a hostile pytorch_model.bin does)."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")
def test_pickled_objects_are_refused_without_suggesting_an_unsafe_option(saved_model, tmp_path):
    directory = _copy(saved_model, tmp_path / "model")
    marker = tmp_path / "MARKER"
    (directory / "model.safetensors").unlink()
    (directory / "pytorch_model.bin").write_bytes(pickle.dumps({"model.embed_tokens.weight": _Opener(marker)}))
    before = _snapshot(directory)
    message = _one_typed_line(lambda: _load(directory))
    assert "the pickled weights in 'pytorch_model.bin' hold Python objects besides tensors and are not loaded" in message
    assert "convert the model to safetensors" in message
    for unsafe in ("weights_only", "trust_remote_code", "=False", "=True"):
        assert unsafe not in message
    assert not marker.exists() and _snapshot(directory) == before


def test_pickled_plain_tensors_still_load_as_before(saved_model, tmp_path):
    """A pytorch_model.bin of plain tensors (torch's restricted unpickler reads it) loads the same weights."""
    import torch
    from safetensors.torch import load_file

    directory = _copy(saved_model, tmp_path / "model")
    weights = load_file(directory / "model.safetensors")
    (directory / "model.safetensors").unlink()
    torch.save(weights, directory / "pytorch_model.bin")
    pickled, safe = (_load(d).bridge.original_model.state_dict() for d in (directory, saved_model))
    assert sorted(pickled) == sorted(safe) and all(torch.equal(pickled[name], safe[name]) for name in safe)


# --- chat templates -----------------------------------------------------------------------------

_TEMPLATES = {
    "reaches outside the sandbox": ("{{ cycler.__init__.__globals__.os.system('touch {marker}') }}",
                                    r"was refused: it reaches for Python objects outside jinja2's sandbox "
                                    r"\(SecurityError: "),
    "walks the class tree": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", r"was refused: .*SecurityError"),
    "does not parse": ("{% if messages %}{{ messages[0]['content'] }}", r"cannot be rendered \(TemplateSyntaxError: "),
}


@pytest.mark.parametrize("case", _TEMPLATES, ids=list(_TEMPLATES))
def test_chat_template_that_fails_is_one_typed_line(saved_model, tmp_path, case):
    import re

    from icl_cmr.adapters.lm.recall_task import generate_answers

    template, pattern = _TEMPLATES[case]
    directory = _copy(saved_model, tmp_path / "model")
    marker = tmp_path / "MARKER"
    config = json.loads((directory / "tokenizer_config.json").read_text())
    config["chat_template"] = template.replace("{marker}", str(marker))
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    before = _snapshot(directory)
    model = _load(directory)
    message = _one_typed_line(lambda: generate_answers(model, [["bab", "bac"]], max_new_tokens=2))
    assert message.startswith(f"the chat template of {str(directory)!r} "), message
    assert re.search(pattern, message), message
    assert not marker.exists() and _snapshot(directory) == before


# --- what is missing ------------------------------------------------------------------------------


def _drop(*names):
    def change(directory):
        for name in names:
            (directory / name).unlink()
    return change


def _write(name, text):
    def change(directory):
        (directory / name).write_text(text)
    return change


def _truncate(directory):
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])


def _model_type(directory):
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, model_type="nosuchtype")))


# (id, damage, what the message says, words it must not use: another part is not what is missing)
MISSING = [
    ("no config.json", _drop("config.json"), "it has no config.json (the model's configuration)", ("tokenizer", "weights")),
    ("broken config.json", _write("config.json", '{"model_type": "llama", '),
     "its config.json cannot be read (JSONDecodeError: ", ("tokenizer", "weights")),
    ("config.json not an object", _write("config.json", "[1, 2]"), "its config.json holds a JSON list, not an object",
     ("tokenizer", "weights")),
    ("unknown model type", _model_type, "its model type 'nosuchtype' is not supported by the installed transformers ",
     ("tokenizer", "weights", "custom")),
    ("no tokenizer files", _drop("tokenizer.json"), "it has no tokenizer files (one of tokenizer.json, tokenizer.model, ",
     ("weights", "config.json")),
    ("no weights", _drop("model.safetensors"),
     "it has no weights file (model.safetensors or pytorch_model.bin, or their shards)", ("tokenizer", "config.json")),
    ("truncated weights", _truncate, "its weights (model.safetensors) cannot be read (SafetensorError: ",
     ("tokenizer", "config.json")),
]


@pytest.mark.parametrize("case", MISSING, ids=[c[0] for c in MISSING])
def test_message_says_which_part_is_missing(saved_model, tmp_path, case, no_prompt):
    _, damage, says, never = case
    directory = _copy(saved_model, tmp_path / "model")
    damage(directory)
    before = _snapshot(directory)
    message = _one_typed_line(lambda: _load(directory))
    assert message.startswith(f"model directory {str(directory)!r} cannot be loaded: {says}"), message
    assert message.endswith("or a complete local model directory")
    reason = message.split(" cannot be loaded: ", 1)[1].split(". Use the embedded default", 1)[0]
    assert not [word for word in never if word in reason], reason
    assert no_prompt == [] and _snapshot(directory) == before


def test_a_file_is_not_a_model_directory(tmp_path):
    require("torch")
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\0" * 16)
    message = _one_typed_line(lambda: _load(path))
    assert f"model directory {str(path)!r} cannot be loaded: it is a file, not a model directory" in message


# --- the environment of a load ------------------------------------------------------------------


def test_package_installers_find_no_index_during_a_load(monkeypatch):
    """TransformerLens installs torchvision with pip or uv while booting a multimodal model: never from an index."""
    from icl_cmr.adapters.lm._model_files import offline_mode

    for key in ("PIP_NO_INDEX", "UV_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    with offline_mode():
        assert (os.environ.get("PIP_NO_INDEX"), os.environ.get("UV_OFFLINE"), os.environ.get("HF_HUB_OFFLINE")) \
            == ("1", "1", "1")
    assert not {"PIP_NO_INDEX", "UV_OFFLINE", "HF_HUB_OFFLINE"} & set(os.environ)  # restored afterwards
