"""The Python examples of docs/user-guide.md run as written (model examples: integration)."""
from __future__ import annotations

import os
import re

import pytest

from tests.conftest import REPO_ROOT, require

GUIDE = REPO_ROOT / "docs" / "user-guide.md"


def _blocks(tag: str) -> list[str]:
    return re.findall(rf"```{tag}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def test_user_guide_examples_run(monkeypatch, capsys):
    require("psifr")
    monkeypatch.chdir(REPO_ROOT)  # the published-data example uses a path relative to the repo
    namespace: dict = {}
    blocks = _blocks("python")
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    if (REPO_ROOT.parent / "shared" / "reference" / "icl-cmr").exists():
        assert "0.006 [0.6  0.75 0.3 ] 44.3" in out or "0.006 [0.6 0.75 0.3] 44.3" in out


@pytest.mark.integration
def test_user_guide_model_example_runs(capsys):
    require("torch")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    namespace: dict = {}
    for block in _blocks("python model"):
        exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102
    heads = namespace["heads"]
    top = heads["induction_score"].squeeze().to_series().nlargest(3)
    assert [(int(l), int(h)) for l, h in top.index] == [(18, 6), (17, 3), (17, 4)]
