"""SIGKILL at random points: of a single write, and of a whole study run resumed again and again.

The children are forked from a fork server (``multiprocessing`` with ``forkserver``) that imported
the toolkit, torch, matplotlib and the packages the stages import lazily (the model's
transformers and transformer_lens modules, psifr for the recall task's word pool) once, so they
start with everything imported and each kill costs only the work it interrupts; the server
never ran torch or numba threads, so its forks are safe whatever the test process ran before (a
fork of a process whose OpenMP pools are running can hang). A kill can land anywhere: in a
computation, between a stage's outputs, inside ``to_netcdf`` or between the flush and the rename
of a write; some kills are placed inside writes on purpose. The others
follow the run's progress, not the clock: a uniformly random moment of the work left (by the
stages' times in the uninterrupted run), reached as that many seconds after the child's log
says the stage it falls in has started, so a slower, loaded machine does not move a kill out of
its stage.
"""
from __future__ import annotations

import json
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from cmr.io import PARTIAL, load_dataset, save_dataset
from tests.conftest import require

FORK = multiprocessing.get_context("forkserver")
#: imported once by the fork server; a child importing one of them itself (some 20 s on 2 loaded cores for
#: transformers, transformer_lens and psifr's seaborn) would spend most of each attempt importing
PRELOAD = ["matplotlib", "torch", "transformers", "transformers.models.llama.modeling_llama", "transformer_lens",
           "transformer_lens.model_bridge", "psifr", "icl_cmr.analyses.study.stages",
           "tests.integration.test_kill_resume"]
FORK.set_forkserver_preload(PRELOAD)
VOLATILE = ("created_utc", "peak_memory_bytes", "peak_memory_measure")  # differ between any two runs


def _kill_inside_write(nth: int, where: str):
    """Make the ``nth`` write of this process die mid-way: half-way into ``to_netcdf``, or after
    the flush and before the rename."""
    import cmr.io

    count = {"writes": 0}
    if where == "to_netcdf":
        original = xr.Dataset.to_netcdf

        def dying(self, target, *args, **kwargs):
            count["writes"] += 1
            if count["writes"] == nth:
                Path(target).write_bytes(b"CDF\x01 half")  # part of a file, then the process dies
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, target, *args, **kwargs)

        xr.Dataset.to_netcdf = dying
    else:
        original_replace = os.replace

        def dying_replace(src, dst, *args, **kwargs):
            count["writes"] += 1
            if count["writes"] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
            return original_replace(src, dst, *args, **kwargs)

        cmr.io.os = _OsWith(replace=dying_replace)


class _OsWith:
    """The ``os`` module with some functions replaced (only for the child that dies)."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


def _tiny_recall(path: Path) -> Path:
    rng = np.random.default_rng(3)
    rows = []
    for subject in range(4):
        for trial in range(6):
            order = rng.permutation(8) + 1
            rows += [(subject, trial, "study", p, f"w{p}") for p in range(1, 9)]
            rows += [(subject, trial, "recall", k, f"w{pos}") for k, pos in enumerate(order[:5], 1)]
    pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"]).to_csv(path, index=False)
    return path


def _single_threaded():
    """One thread each: the children of one test run side by side with nothing else to share."""
    import numba
    import torch

    torch.set_num_threads(1)
    numba.set_num_threads(1)


def _one_figure(ctx) -> dict:
    """The figures stage, cut to one small file written by the same atomic writer (matplotlib
    rendering would be most of the cost of every attempt; the figures have their own tests)."""
    from cmr.io import atomic_write

    with atomic_write(ctx.path("figures/human_lag_crp.png"), suffix=".png") as tmp:
        tmp.write_bytes(load_dataset(ctx.path("heads.nc"))["profile"].values.tobytes())
    return {"figures": ["figures/human_lag_crp.png"]}


def _study(out, recall, grid, kill=None, lines=None):
    """The study, resumed in ``out``; its log lines go to the connection ``lines`` if given."""
    _single_threaded()
    if kill is not None:
        _kill_inside_write(*kill)
    from icl_cmr.analyses.study import stages as study
    from icl_cmr.analyses.study.stages import run_study

    study._figures = _one_figure
    study.NULL_PROFILES = 20  # null profiles behind the fits' "beyond chance" share (statistics, not plumbing)

    run_study(out, recall=[str(recall)], model="tiny-llama", resume=True,
              log=lines.send if lines is not None else lambda line: None, grid=str(grid),
              n_words=20, n_prompts=2, ablation_passages=0, recall_lists=2)


def _grid(path):
    from cmr.grids import paper_teacher_forced_grid

    _single_threaded()
    save_dataset(paper_teacher_forced_grid(beta_enc=[0.2, 0.5, 0.8], beta_rec=[0.2, 0.5, 0.8], gamma=[0.0, 0.5]), path)


def _child(target, *args):
    process = FORK.Process(target=target, args=args)
    process.start()
    return process


def _comparable(path: Path) -> xr.Dataset:
    ds = load_dataset(path)
    ds.attrs = {k: json.dumps(_stable(v), sort_keys=True) if isinstance(v, str) else v
                for k, v in ds.attrs.items() if k not in VOLATILE}
    return ds


def _stable(value):
    """``value`` without the entries that differ between any two runs (also inside nested JSON text)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, str) and value.startswith("{"):
        try:
            return _stable(json.loads(value))
        except json.JSONDecodeError:
            return value
    return value


def _results(out: Path) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    return {
        "stages": {name: _stable(entry["summary"]) for name, entry in manifest["stages"].items()},
        "files": sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()),
    }


def _hidden(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob(".*"))


@pytest.fixture(scope="module")
def study_inputs(tmp_path_factory):
    require("torch")
    import matplotlib  # noqa: F401  (imported before forking: children start with it)
    import torch  # noqa: F401

    from icl_cmr.analyses.study import stages as study  # noqa: F401

    root = tmp_path_factory.mktemp("inputs")
    grid = root / "grid.nc"
    process = _child(_grid, grid)
    process.join(300)
    assert process.exitcode == 0
    recall = _tiny_recall(root / "recall.csv")
    reference = root / "reference"
    process = _child(_study, reference, recall, grid)
    process.join(600)
    assert process.exitcode == 0, "the uninterrupted run failed"
    return recall, grid, reference


def _check_same_as_reference(out: Path, reference: Path) -> None:
    assert _results(out) == _results(reference)
    for path in reference.glob("*.nc"):
        xr.testing.assert_identical(_comparable(out / path.name), _comparable(path))
    assert not _hidden(out), f"left behind: {_hidden(out)}"


def _stage_seconds(out: Path) -> dict:
    """``{stage: seconds}`` of the stages ``out``'s manifest records as done, in run order."""
    try:
        stages = json.loads((out / "manifest.json").read_text())["stages"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return {}
    return {name: entry["seconds"] for name, entry in stages.items() if entry.get("status") == "done"}


def _kill_during(process, lines, stage: str, delay: float) -> None:
    """SIGKILL ``process`` ``delay`` seconds after its log says that ``stage`` starts (or is
    redone); nothing if it ends first. The kill follows the run's progress, not the clock, so a
    loaded machine running the stage slowly does not move it out of the stage."""
    started = re.compile(rf"^\[\d+/\d+\] {re.escape(stage)}: ")
    while process.is_alive():
        ready = multiprocessing.connection.wait([lines, process.sentinel])
        if lines in ready and started.match(lines.recv()):
            process.join(delay)
            break
    if process.is_alive():
        os.kill(process.pid, signal.SIGKILL)


def _random_point(remaining: dict, rng) -> tuple[str, float]:
    """A uniformly random moment of the work left (``{stage: seconds}``, in run order), as the
    stage it falls in and the seconds since that stage's start."""
    moment = rng.uniform(0.0, sum(remaining.values()))
    for stage, stage_s in remaining.items():
        if moment < stage_s:
            return stage, moment
        moment -= stage_s
    return stage, stage_s


def test_run_killed_ten_times_resumes_to_the_uninterrupted_results(tmp_path, study_inputs):
    recall, grid, reference = study_inputs
    seconds = _stage_seconds(reference)  # each stage's time in the uninterrupted run, in run order
    rng = np.random.default_rng(2024)
    inside_writes = [(2, "to_netcdf"), (4, "replace"), (3, "to_netcdf"), (6, "replace")]  # (nth write, where)
    kills, runs = 0, 0
    while kills < 10:  # a run killed until ten kills are reached (a new run if one finishes first), then resumed
        out = tmp_path / f"run{runs}"
        runs += 1
        for attempt in range(11):
            kill = inside_writes.pop() if attempt % 3 == 0 and inside_writes else None
            remaining = {name: stage_s for name, stage_s in seconds.items() if name not in _stage_seconds(out)}
            timed = kills < 10 and kill is None and remaining
            # the child's log goes to a pipe only when it is read: unread, a full pipe would block the child
            lines, child_end = FORK.Pipe(duplex=False) if timed else (None, None)
            process = _child(_study, out, recall, grid, kill, child_end)
            if timed:
                _kill_during(process, lines, *_random_point(remaining, rng))
            process.join()
            if timed:
                lines.close()
                child_end.close()
            if process.exitcode == 0:
                break
            assert process.exitcode == -signal.SIGKILL
            kills += 1
            for path in out.glob("*.nc"):  # whatever carries a final name is complete
                load_dataset(path)
        _check_same_as_reference(out, reference)


def test_resume_redoes_a_stage_whose_output_kept_its_size(tmp_path, study_inputs):
    recall, grid, reference = study_inputs
    out = tmp_path / "run"
    for path in reference.rglob("*"):  # a finished run, copied
        if path.is_file():
            (out / path.relative_to(reference)).parent.mkdir(parents=True, exist_ok=True)
            (out / path.relative_to(reference)).write_bytes(path.read_bytes())
    heads = out / "heads.nc"
    data = bytearray(heads.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    heads.write_bytes(bytes(data))
    assert heads.stat().st_size == (reference / "heads.nc").stat().st_size
    untouched = (out / "human_lag_crp_recall.nc").stat().st_mtime_ns
    process = _child(_study, out, recall, grid)
    process.join(600)
    assert process.exitcode == 0
    assert (out / "human_lag_crp_recall.nc").stat().st_mtime_ns == untouched  # the stage before was kept
    xr.testing.assert_identical(_comparable(heads), _comparable(reference / "heads.nc"))


def _write_versions(path: Path, versions: int):
    rng = np.random.default_rng(0)
    for version in range(versions):
        ds = xr.Dataset({"x": (("row", "col"), rng.random((400, 400)))}, attrs={"version": version})
        ds.to_netcdf  # noqa: B018  (same writer as save_dataset, without a schema: raw atomic writes)
        from cmr.io import atomic_write

        with atomic_write(path) as tmp:
            ds.to_netcdf(tmp, engine="netcdf4")


def test_write_killed_at_random_times_leaves_old_or_new_and_is_cleaned(tmp_path):
    path = tmp_path / "x.nc"
    rng = np.random.default_rng(7)
    for _ in range(10):
        process = _child(_write_versions, path, 50)
        process.join(rng.uniform(0.05, 0.6))
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
        process.join()
        if path.exists():
            with xr.open_dataset(path, engine="netcdf4") as ds:  # complete: every value readable
                assert ds["x"].shape == (400, 400) and np.isfinite(ds["x"].values).all()
    _write_versions(path, 1)  # the next write into that place removes what the killed ones left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.nc"]
    assert not any(PARTIAL in p.name for p in tmp_path.iterdir())
