"""A small resumable pipeline: named stages, atomic outputs, a manifest of finished stages.

Each stage writes its outputs atomically (through :func:`cmr.io.save_dataset` or
:func:`cmr.io.atomic_write`) and is then recorded in ``DIR/manifest.json`` (also written
atomically) with its outputs, their sizes and SHA-256 checksums, and the settings it read
(``Stage.settings``). With ``resume=True`` a finished stage is reused unless its outputs are
missing or altered, its own settings changed, or a stage it reads from (``Stage.after``) was
redone in this run; so killing a run and starting it again with ``--resume``, with the same or
other settings, redoes only what those changes reach and never reads a half-written or altered
file. Each resumed run says which stages it reused and which it redid, and why.

A stage that cannot apply to this run (a model that recalls nothing has no recall to score)
raises :class:`StageSkipped` with a note: the note is logged and recorded, the stage counts as
done without outputs, and the run goes on.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cmr.deprecation import keyword_only
from cmr.errors import OutputError
from cmr.io import atomic_write, check_output, file_digest

MANIFEST = "manifest.json"


class StageSkipped(Exception):
    """Raised by a stage that does not apply to this run; its message is the note the user reads."""


@dataclass
class Stage:
    """One step of a study: ``run(ctx)`` writes ``outputs`` (paths relative to the run dir).

    ``settings`` names the entries of ``ctx.settings`` the stage reads (None: all of them);
    ``after`` names the earlier stages whose outputs it reads (None: every earlier stage). A
    resumed run redoes the stage when one of those settings changed or one of those stages
    was redone.
    """

    name: str
    outputs: tuple[str, ...]
    run: Callable[["RunContext"], dict | None]
    description: str = ""
    settings: tuple[str, ...] | None = None
    after: tuple[str, ...] | None = None


@dataclass
class RunContext:
    """What stages share: the output directory, settings, and per-stage summaries."""

    out_dir: Path
    settings: dict
    summaries: dict = field(default_factory=dict)
    log: Callable[[str], None] = print

    def path(self, name: str) -> Path:
        return self.out_dir / name


def read_manifest(out_dir: Path) -> dict:
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return {"stages": {}}
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"stages": {}}  # an unreadable manifest means: nothing is known to be finished
    if not isinstance(manifest, dict) or not isinstance(manifest.get("stages"), dict):
        return {"stages": {}}
    return manifest


def write_manifest(out_dir: Path, manifest: dict) -> None:
    with atomic_write(Path(out_dir) / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2))  # stage order kept


def output_record(path: Path) -> dict:
    """What the manifest keeps of one stage output: its size in bytes and its SHA-256."""
    return {"size": path.stat().st_size, "sha256": file_digest(path)}


def damaged_outputs(out_dir: Path, manifest: dict, stage: Stage) -> list[str]:
    """Outputs of ``stage`` that are missing, or differ in size or checksum from the manifest.

    A stage without a finished manifest entry, or whose entry lacks an output or a
    checksum, counts all its outputs as damaged.
    """
    entry = manifest.get("stages", {}).get(stage.name)
    if not isinstance(entry, dict) or entry.get("status") != "done" or not isinstance(entry.get("outputs"), dict):
        return list(stage.outputs)
    damaged = []
    for rel in stage.outputs:
        path = Path(out_dir) / rel
        recorded = entry["outputs"].get(rel)
        if not isinstance(recorded, dict) or not path.is_file() or path.stat().st_size != recorded.get("size"):
            damaged.append(rel)
        elif file_digest(path) != recorded.get("sha256"):
            damaged.append(rel)
    return damaged


def check_out_dir(out_dir: Path) -> None:
    """Refuse a run directory that is a file or cannot be written (:class:`OutputError`)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"output directory {str(out_dir)!r} is a file; expected a directory (new or of an earlier run)")
    check_output(out_dir / MANIFEST)


def stage_settings(stage: Stage, settings: dict) -> dict:
    """The settings ``stage`` reads, as the manifest stores them (JSON types: lists, not tuples)."""
    chosen = settings if stage.settings is None else {k: settings.get(k) for k in stage.settings}
    return json.loads(json.dumps(chosen, sort_keys=True, default=str))


def _changed(before: dict, now: dict) -> str:
    """``n_words 40 -> 30, seed 0 -> 1``: the settings that differ, in words."""
    keys = sorted(set(before) | set(now))
    return ", ".join(f"{k} {json.dumps(before.get(k))} -> {json.dumps(now.get(k))}" for k in keys
                     if before.get(k) != now.get(k))


def _why_redo(stage: Stage, entry, own: dict, upstream: list[str], redone: list[str], old_run: dict | None,
              new_run: dict, out_dir: Path, manifest: dict) -> str | None:
    """Why a resumed run must redo ``stage`` (None: reuse it)."""
    if not isinstance(entry, dict) or entry.get("status") not in ("done", "skipped"):
        return "not finished in the earlier run"
    recorded = entry.get("settings")
    if recorded is None:  # a manifest of a version that kept only the run's settings
        if old_run != new_run:
            return "the run's settings changed and this stage's own were not recorded"
    elif recorded != own:
        return f"its settings changed ({_changed(recorded, own)})"
    reached = [name for name in upstream if name in redone]
    if reached:
        return f"it reads {', '.join(reached)}, redone in this run"
    if entry["status"] == "done":
        damaged = damaged_outputs(out_dir, manifest, stage)
        if damaged:
            return f"{', '.join(damaged)} missing or changed since the earlier run"
    return None


@keyword_only
def run_stages(stages, ctx: RunContext, *, resume: bool = False) -> dict:
    """Run ``stages`` in order; return the manifest.

    With ``resume``, a stage finished by an earlier run in the same directory is reused unless
    its outputs are damaged, its settings changed or a stage it reads was redone (see the
    module docstring); the log names every stage reused and redone.
    """
    check_out_dir(ctx.out_dir)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(ctx.out_dir) if resume else {"stages": {}}
    old_run = manifest.get("settings")
    old_run = json.loads(json.dumps(old_run, default=str)) if old_run is not None else None
    new_run = json.loads(json.dumps(ctx.settings, default=str))
    manifest["settings"] = ctx.settings
    reused, redone, reasons = [], [], {}
    for index, stage in enumerate(stages, 1):
        label = f"[{index}/{len(stages)}] {stage.name}"
        own = stage_settings(stage, ctx.settings)
        upstream = [s.name for s in stages[:index - 1]] if stage.after is None else list(stage.after)
        if resume:
            entry = manifest["stages"].get(stage.name)
            why = _why_redo(stage, entry, own, upstream, redone, old_run, new_run, ctx.out_dir, manifest)
            if why is None:
                ctx.summaries[stage.name] = entry.get("summary", {})
                reused.append(stage.name)
                if entry["status"] == "skipped":
                    ctx.log(f"{label}: skipped in an earlier run with the same settings: {entry.get('note', '')}")
                else:
                    ctx.log(f"{label}: done in an earlier run, skipped (settings and inputs unchanged)")
                continue
            reasons[stage.name] = why
            if entry is not None:
                ctx.log(f"{label}: redoing: {why}")
        redone.append(stage.name)
        ctx.log(f"{label}: {stage.description or 'running'}")
        start = time.perf_counter()
        try:
            summary = stage.run(ctx) or {}
        except StageSkipped as skipped:
            note = str(skipped)
            ctx.summaries[stage.name] = {"skipped": note}
            manifest["stages"][stage.name] = {"status": "skipped", "seconds": round(time.perf_counter() - start, 2),
                                              "settings": own, "note": note, "outputs": {},
                                              "summary": {"skipped": note}}
            write_manifest(ctx.out_dir, manifest)
            ctx.log(f"{label}: skipped: {note}")
            continue
        elapsed = time.perf_counter() - start
        missing = [o for o in stage.outputs if not ctx.path(o).is_file()]
        if missing:
            raise RuntimeError(f"stage {stage.name} did not write {', '.join(missing)}")
        ctx.summaries[stage.name] = summary
        manifest["stages"][stage.name] = {
            "status": "done",
            "seconds": round(elapsed, 2),
            "settings": own,
            "outputs": {o: output_record(ctx.path(o)) for o in stage.outputs},
            "summary": summary,
        }
        write_manifest(ctx.out_dir, manifest)
        ctx.log(f"{label}: finished in {elapsed:.1f} s")
    if resume:
        ctx.log(f"resumed: reused {len(reused)} stage(s) ({', '.join(reused) or 'none'}); redid {len(redone)} "
                f"({'; '.join(f'{n}: {reasons[n]}' for n in redone) or 'none'})")
    return manifest
