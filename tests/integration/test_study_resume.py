"""The main job: a killed run resumes without redoing finished stages or leaving corrupt files."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, require


# Only a hung run waits this long (a whole run takes about 25 s on 2 quiet cores): the waits
# below end on the run's own progress, so load only makes them longer.
HANG_GUARD_S = 1800


def _run_cmd(out: Path, grid: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "analyses", "run", "-o", str(out), "--model", "tiny-llama",
        "--recall", "psifr:Morton2013", "--grid", str(grid), "--n-words", "40", "--n-prompts", "2",
        "--ablation-passages", "0", *extra,
    ]


def _env():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", NUMBA_NUM_THREADS="1")
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def _stages_done(out: Path) -> list[str]:
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [name for name, entry in manifest.get("stages", {}).items() if entry.get("status") == "done"]


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory):
    require("torch")
    require("psifr")
    from cmr.io import save_dataset
    from cmr.grids import paper_teacher_forced_grid

    grid = paper_teacher_forced_grid(beta_enc=[0.2, 0.5, 0.8], beta_rec=[0.2, 0.5, 0.8], gamma=[0.0, 0.5])
    path = tmp_path_factory.mktemp("grid") / "grid.nc"
    save_dataset(grid, path)
    return path


def test_killed_run_resumes_without_redoing_finished_stages(tmp_path, small_grid, monkeypatch, capsys):
    out = tmp_path / "run"
    log = tmp_path / "run.log"  # a file, not a pipe: a slow run's many progress updates cannot fill it and block
    with log.open("wb") as output:
        proc = subprocess.Popen(_run_cmd(out, small_grid), env=_env(), cwd=REPO_ROOT,
                                stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    hang_guard = time.monotonic() + HANG_GUARD_S
    try:
        while "heads" not in _stages_done(out):  # kill right after the head scan is recorded
            if proc.poll() is not None:
                pytest.fail("the run ended before it could be killed:\n" + log.read_text(errors="replace"))
            if time.monotonic() > hang_guard:
                pytest.fail(f"the run seems hung: no heads stage after {HANG_GUARD_S} s")
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished = _stages_done(out)
    assert finished[:3] == ["human_crp", "grid", "heads"]
    assert "report" not in finished, "the run was not killed midway"
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.nc")}
    # a lock file may outlive a killed writer (the next writer of that output reuses and removes it)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock")], \
        "temporary files left behind"

    # the resumed run: the same command in this process (a second interpreter would only import everything
    # again), with the figures stage cut to one file (rendering every figure is most of a run's time; the
    # figures have their own tests, and the wheel's test renders them from `icl-cmr run`)
    from icl_cmr.analyses.cli import main
    from icl_cmr.analyses.study import stages

    monkeypatch.setattr(stages, "_figures", _one_figure)
    capsys.readouterr()
    code = main(_run_cmd(out, small_grid, "--resume")[3:])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stdout + stderr
    for stage in finished:
        assert f"{stage}: done in an earlier run, skipped" in stdout
    for name in ("human_lag_crp_Morton2013.nc", "cmr_grid.nc", "heads.nc"):
        assert (out / name).stat().st_mtime_ns == stamps[name], f"{name} was rewritten"
    assert _stages_done(out)[-1] == "report"

    from cmr.io import load_dataset

    for path in out.glob("*.nc"):
        load_dataset(path)  # every file is complete and valid
    report = (out / "report.md").read_text()
    assert "tiny-llama" in report and "CMR fits" in report


def _one_figure(ctx) -> dict:
    """The figures stage, cut to one small file written by the same atomic writer (rendering every
    figure three times would be most of the test's time; the figures have their own tests)."""
    from cmr.io import atomic_write, load_dataset

    with atomic_write(ctx.path("figures/human_lag_crp.png"), suffix=".png") as tmp:
        tmp.write_bytes(load_dataset(ctx.path("heads.nc"))["profile"].values.tobytes())
    return {"figures": ["figures/human_lag_crp.png"]}


def _run_in_process(out: Path, grid: Path, *, resume: bool = False, **settings) -> str:
    """The study as ``icl-cmr run`` with the options of :func:`_run_cmd`, in this process; its log."""
    from icl_cmr.analyses.study.stages import run_study

    lines = []
    run_study(out, recall=["psifr:Morton2013"], model="tiny-llama", resume=resume, log=lines.append,
              grid=str(grid), n_words=40, n_prompts=2, ablation_passages=0, **settings)
    return "\n".join(lines)


def test_resume_redoes_a_stage_whose_output_was_damaged(tmp_path, small_grid, monkeypatch):
    from icl_cmr.analyses.study import stages

    monkeypatch.setattr(stages, "_figures", _one_figure)
    out = tmp_path / "run"
    _run_in_process(out, small_grid)
    (out / "fits_heads_lsq.nc").write_bytes(b"truncated")
    again = _run_in_process(out, small_grid, resume=True)
    assert "heads: done in an earlier run, skipped" in again
    assert "fit_heads: redoing: fits_heads_lsq.nc missing or changed since the earlier run" in again
    for later in ("composition", "llm_recall", "figures", "report"):  # they read the redone stage: redone too
        assert f"{later}: redoing: it reads " in again, later
    assert "fit_humans: done in an earlier run, skipped" in again  # reads human_crp and grid alone
    from cmr.io import load_dataset

    load_dataset(out / "fits_heads_lsq.nc", kind="profile_fit")
    # a restart with another setting keeps the stages it does not reach (same files, not rewritten)
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.nc") if not p.name.startswith("llm_recall")}
    changed = _run_in_process(out, small_grid, resume=True, recall_lists=2)
    assert "llm_recall: redoing: its settings changed (recall_lists 6 -> 2)" in changed
    assert "resumed: reused 6 stage(s) (human_crp, grid, heads, fit_heads, fit_humans, composition); redid 3" in changed
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.nc") if p.name in stamps} == stamps
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stages"]["llm_recall"]["settings"]["recall_lists"] == 2
    assert load_dataset(out / "llm_recall_events.nc").sizes["trial"] == 2
