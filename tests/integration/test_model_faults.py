"""A damaged local model directory ends in one ModelNotAvailableError, never a library's own error."""
from __future__ import annotations

import pickle

import pytest

from tests.conftest import save_tiny_model


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("model"))


def _copy(source, target):
    target.mkdir()
    for file in source.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


def _truncated_weights(path):
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])


def _broken_config(path):
    (path / "config.json").write_text('{"model_type": "llama", ')


def _no_weights(path):
    (path / "model.safetensors").unlink()


def _pickled_weights(path):
    (path / "model.safetensors").unlink()
    (path / "pytorch_model.bin").write_bytes(pickle.dumps({"not": "a state dict", "call": print}))


@pytest.mark.parametrize("damage", [
    pytest.param(_truncated_weights, id="truncated safetensors"),
    pytest.param(_broken_config, id="broken config.json"),
    pytest.param(_no_weights, id="no weights file"),
    # torch warns about the pickle protocol before refusing the file: the warning is not the fault
    pytest.param(_pickled_weights, id="pickled pytorch_model.bin",
                 marks=pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")),
])
def test_damaged_model_directory_is_one_typed_error(saved_model, tmp_path, damage):
    from icl_cmr.adapters.errors import ModelNotAvailableError
    from icl_cmr.adapters.lm.loading import load_model

    directory = _copy(saved_model, tmp_path / "model")
    damage(directory)
    with pytest.raises(ModelNotAvailableError, match=r"model directory .* cannot be loaded: .*embedded default 'smollm2-135m'") as info:
        load_model(str(directory))
    assert "\n" not in str(info.value)
