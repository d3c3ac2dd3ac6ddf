"""Every source file the documentation names exists, so a reader following a "Code:" line finds it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
# a repository path in backticks: `cmr/textbook/fit.py`, `analyses/commands/ablate.py`
PATH = re.compile(r"`((?:cmr|adapters|analyses|tests|data)/[A-Za-z0-9_./-]+\.(?:py|md|json|nc|csv|txt))`")


def named_paths(text: str) -> list[str]:
    return sorted(set(PATH.findall(text)))


def test_the_pattern_finds_paths_and_misses_prose():
    text = "Code: `cmr/textbook/fit.py` and `analyses/commands/ablate.py`; not `cmr.fit_recall` or cmr/x.py"
    assert named_paths(text) == ["analyses/commands/ablate.py", "cmr/textbook/fit.py"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_named_source_files_exist(page):
    missing = [p for p in named_paths(page.read_text(encoding="utf-8")) if not (ROOT / p).exists()]
    assert not missing, f"{page.name} names files that do not exist: {missing}"
