"""A damaged ``train_toy.json`` is one typed line, not a traceback (the scan after ``--resume`` reads it)."""
from __future__ import annotations

import json

import pytest

from cmr.errors import FileFormatError
from icl_cmr.adapters.lm import toy_model


@pytest.mark.parametrize("content", [
    b"{not json", b"", b"[1, 2]", json.dumps({"settings": [1]}).encode(), json.dumps({"settings": {"seed": 0}}).encode(),
    json.dumps({"other": {"text": "kjv"}}).encode(), b"\xff\xfe\x00",
], ids=["cut", "empty", "list", "settings-not-object", "no-text", "no-settings", "binary"])
def test_damaged_settings_raise_one_typed_line(tmp_path, content):
    path = tmp_path / toy_model.SETTINGS_FILE
    path.write_bytes(content)
    with pytest.raises(FileFormatError) as info:
        toy_model._settings_text(path)
    message = str(info.value)
    assert "\n" not in message and "train_toy.json" in message


def test_missing_settings_file_is_a_typed_error(tmp_path):
    with pytest.raises(FileFormatError, match="cannot be read"):
        toy_model._settings_text(tmp_path / toy_model.SETTINGS_FILE)


def test_settings_written_by_a_run_are_read(tmp_path):
    path = tmp_path / toy_model.SETTINGS_FILE
    path.write_text(json.dumps({"settings": {"text": "wikipedia", "seed": 0}, "checkpoint_steps": [0, 6]}))
    assert toy_model._settings_text(path) == "wikipedia"
