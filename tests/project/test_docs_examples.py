"""The Python examples of README.md and docs/user-guide.md run as written (model examples: integration)."""
from __future__ import annotations

import os
import re

import pytest

from tests.conftest import REPO_ROOT, require

GUIDE = REPO_ROOT / "docs" / "user-guide.md"
README = REPO_ROOT / "README.md"


def _blocks(tag: str) -> list[str]:
    return re.findall(rf"```{tag}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def test_user_guide_examples_run(tmp_path, monkeypatch, capsys):
    require("psifr")
    monkeypatch.chdir(tmp_path)  # the examples need nothing beside the installed package
    namespace: dict = {}
    blocks = _blocks("python")
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    assert "0.006 [0.6  0.75 0.3 ] 44.3" in out or "0.006 [0.6 0.75 0.3] 44.3" in out


def test_readme_python_example_reaches_a_lag_crp_a_fit_and_a_figure(tmp_path, monkeypatch, capsys):
    require("psifr")
    import numpy as np

    import cmr

    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102 - our own documentation
    assert sorted(p.name for p in tmp_path.iterdir()) == ["morton_crp.nc", "morton_crp.png"]
    assert cmr.load_dataset(tmp_path / "morton_crp.nc").equals(namespace["crp"])
    fit = namespace["fit"]
    assert bool(fit["success"].all())
    # the pooled ML fit beats the default parameters on the same data
    default = cmr.log_likelihood(namespace["events"], cmr.default_parameters())
    assert float(fit["logl"].sum()) > float(default["logl"].sum())
    first = capsys.readouterr().out.splitlines()[0]
    assert np.isnan(namespace["crp"]["profile"].mean("subject").sel(lag=0)) and "nan" in first


def test_fitting_guide_examples_run():
    """docs/fitting.md: the published GPT-2 fit and the human fit (the cluster block needs a cluster)."""
    require("psifr")
    guide = REPO_ROOT / "docs" / "fitting.md"
    blocks = re.findall(r"```python\n(.*?)```", guide.read_text(), flags=re.S)
    assert len(blocks) == 2
    namespace: dict = {}
    exec(compile(blocks[0], str(guide), "exec"), namespace)  # noqa: S102 - our own documentation
    l5h1 = namespace["fits"].sel(layer=5, head=1).squeeze()
    assert round(float(l5h1["distance"]), 4) == 0.0061 and round(float(l5h1["gain"]), 1) == 44.3
    exec(compile(blocks[1], str(guide), "exec"), namespace)  # noqa: S102
    assert namespace["fits"].sizes["subject"] == 126


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
