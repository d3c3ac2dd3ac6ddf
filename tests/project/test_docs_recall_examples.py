"""The Python examples of docs/fitting-recall.md and docs/semantic-cmr.md run as written."""
from __future__ import annotations

import re

import pytest

from tests.conftest import REPO_ROOT, require


@pytest.mark.parametrize("page", ["fitting-recall.md", "semantic-cmr.md"])
def test_examples_run(page, capsys):
    require("psifr")
    require("cymr")
    text = (REPO_ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)  # noqa: S102 - our own documentation
    assert capsys.readouterr().out
