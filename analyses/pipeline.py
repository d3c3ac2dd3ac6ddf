"""A small resumable pipeline: named stages, atomic outputs, a manifest of finished stages.

Each stage writes its outputs atomically (through :func:`cmr.io.save_dataset` or
:func:`cmr.io.atomic_write`) and is then recorded in ``DIR/manifest.json`` (also written
atomically) with its outputs, their sizes and SHA-256 checksums. With ``resume=True`` a stage
whose manifest entry exists and whose outputs are all still present with the recorded size
and checksum is skipped, so killing a run and starting it again with ``--resume`` redoes only
unfinished or damaged stages (and every stage after the first one it redoes, whose inputs may
have changed) and never reads a half-written or altered file.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cmr.errors import OutputError
from cmr.io import atomic_write, check_output, file_digest

MANIFEST = "manifest.json"


@dataclass
class Stage:
    """One step of a study: ``run(ctx)`` writes ``outputs`` (paths relative to the run dir)."""

    name: str
    outputs: tuple[str, ...]
    run: Callable[["RunContext"], dict | None]
    description: str = ""


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


def run_stages(stages, ctx: RunContext, resume: bool = False) -> dict:
    """Run ``stages`` in order; return the manifest. Skips finished stages when ``resume``."""
    check_out_dir(ctx.out_dir)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(ctx.out_dir) if resume else {"stages": {}}
    if resume and manifest.get("settings") not in (None, ctx.settings):
        ctx.log("settings differ from the earlier run in this directory: starting over")
        manifest = {"stages": {}}
    manifest["settings"] = ctx.settings
    redone = False  # once a stage runs, every later stage runs too: its inputs may have changed
    for index, stage in enumerate(stages, 1):
        label = f"[{index}/{len(stages)}] {stage.name}"
        if resume and not redone:
            damaged = damaged_outputs(ctx.out_dir, manifest, stage)
            if not damaged:
                ctx.summaries[stage.name] = manifest["stages"][stage.name].get("summary", {})
                ctx.log(f"{label}: done in an earlier run, skipped")
                continue
            if stage.name in manifest["stages"]:
                ctx.log(f"{label}: {', '.join(damaged)} missing or changed since the earlier run: redoing")
        redone = True
        ctx.log(f"{label}: {stage.description or 'running'}")
        start = time.perf_counter()
        summary = stage.run(ctx) or {}
        elapsed = time.perf_counter() - start
        missing = [o for o in stage.outputs if not ctx.path(o).is_file()]
        if missing:
            raise RuntimeError(f"stage {stage.name} did not write {', '.join(missing)}")
        ctx.summaries[stage.name] = summary
        manifest["stages"][stage.name] = {
            "status": "done",
            "seconds": round(elapsed, 2),
            "outputs": {o: output_record(ctx.path(o)) for o in stage.outputs},
            "summary": summary,
        }
        write_manifest(ctx.out_dir, manifest)
        ctx.log(f"{label}: finished in {elapsed:.1f} s")
    return manifest
