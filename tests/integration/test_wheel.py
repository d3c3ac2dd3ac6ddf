"""A wheel built from the repository installs non-editable and runs from outside the checkout.

The wheel goes into a fresh virtual environment (no copy of the checkout on its path); its
dependencies come from the test environment's site-packages through a ``.pth`` line, so the
test needs no package registry. Checked: the wheel's top-level import names are ``cmr`` and the
``icl_cmr`` namespace only; both import from the new environment; the small data files the code
reads are inside; the CLI and the study (on the random tiny model) run from it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, require

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir", "-q",
         "-w", str(out), str(REPO_ROOT)],
        check=True, capture_output=True, text=True, env={**os.environ, "PIP_NO_INDEX": "1"}, cwd=out,
    )
    wheels = sorted(out.glob("icl_cmr-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


@pytest.fixture(scope="module")
def fresh_env(wheel, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # dependencies (numpy, numba, torch, ...) from the test environment's site directories (those
    # it reaches through .pth files too), after the wheel's own files
    sites = [sysconfig.get_paths()["purelib"]] + [p for p in sys.path if p.rstrip("/").endswith("site-packages")]
    (Path(purelib) / "zz_dependencies.pth").write_text("\n".join(dict.fromkeys(sites)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, text=True)
    return root


def _run(*args, cwd) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(a) for a in args], cwd=cwd, env=environment, capture_output=True, text=True)


def test_the_wheel_holds_cmr_and_the_icl_cmr_namespace_only(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"cmr", "icl_cmr"}
    assert "icl_cmr/data/published_human_cmr_fits.csv" in names
    for name in ("head_profiles.csv.gz", "head_metrics.csv.gz", "cmr_crp_grid.npz", "SHA256SUMS", "LICENSE",
                 "README.md"):
        assert f"icl_cmr/data/published/{name}" in names  # the study's outputs, with licence and checksums
    assert not any(name.startswith(("adapters/", "analyses/", "tests/")) for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "icl-cmr = icl_cmr.analyses.cli:main" in text and "cmr.dataset_kinds" in text


def test_the_installed_packages_come_from_the_new_environment(fresh_env, tmp_path):
    code = ("import json, cmr, icl_cmr.adapters.published as p, icl_cmr.analyses.cli\n"
            "from icl_cmr.adapters.published_grid import load_published_grid\n"
            "grid = load_published_grid()\n"
            "print(json.dumps([cmr.__file__, icl_cmr.analyses.cli.__file__, len(p.published_human_fits()),\n"
            "                  json.loads(grid.attrs['provenance'])['source'], grid['profile'].shape]))")
    done = _run(fresh_env / "bin" / "python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cmr_file, cli_file, n_fits, grid_file, grid_shape = json.loads(done.stdout.strip().splitlines()[-1])
    assert cmr_file.startswith(str(fresh_env)) and cli_file.startswith(str(fresh_env))
    assert n_fits == 7
    assert grid_file.startswith(str(fresh_env)) and grid_shape == [20, 21, 11, 17]  # the installed copy


def test_the_cli_and_the_study_run_from_the_wheel(fresh_env, tmp_path):
    require("psifr")
    require("torch")
    from cmr.grids import paper_teacher_forced_grid
    from cmr.io import save_dataset

    # a saved 18-point grid instead of the 78540-point Monte Carlo one: the grid and fit stages' cost
    # is the grid's size, and what is checked here is that the installed study runs, not its fits
    save_dataset(paper_teacher_forced_grid(beta_enc=[0.2, 0.5, 0.8], beta_rec=[0.2, 0.5, 0.8], gamma=[0.0, 0.5]),
                 tmp_path / "grid.nc")
    cli = fresh_env / "bin" / "icl-cmr"
    done = _run(cli, "lag-crp", "psifr:Morton2013", "-o", tmp_path / "crp.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "crp.csv").read_text().splitlines()[0].startswith("subject,lag,")
    done = _run(cli, "run", "-o", tmp_path / "study", "--model", "tiny-llama", "--recall", "psifr:Morton2013",
                "--n-words", "20", "--n-prompts", "2", "--grid", tmp_path / "grid.nc", "--ablation-passages", "0",
                "--recall-lists", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "study" / "report.md").is_file()
    assert "figures/parameters_heads_vs_humans.png" in (tmp_path / "study" / "report.md").read_text() or \
        (tmp_path / "study" / "figures" / "parameters_heads_vs_humans.png").is_file()
