"""The resumable pipeline: stages reused when their settings and inputs did not change, skipped stages."""
from __future__ import annotations

import json

import pytest

from icl_cmr.analyses.study.pipeline import RunContext, Stage, StageSkipped, run_stages
from tests.conftest import tiny_head_scan


def _stages(calls, skip=False):
    """a (reads n), b (reads m), c (reads a's output), d (reads everything): each records its runs."""
    def writer(name, text):
        def run(ctx):
            calls.append(name)
            if name == "b" and skip:
                raise StageSkipped("b does not apply to this model; --b 0 leaves it out")
            ctx.path(f"{name}.txt").write_text(text(ctx))
            return {"value": text(ctx)}
        return run

    return [
        Stage("a", ("a.txt",), writer("a", lambda c: str(c.settings["n"])), settings=("n",), after=()),
        Stage("b", ("b.txt",), writer("b", lambda c: str(c.settings["m"])), settings=("m",), after=()),
        Stage("c", ("c.txt",), writer("c", lambda c: c.path("a.txt").read_text() + "!"), settings=(), after=("a",)),
        Stage("d", ("d.txt",), writer("d", lambda c: json.dumps(c.settings, sort_keys=True))),
    ]


def _run(tmp_path, settings, resume, skip=False):
    calls, lines = [], []
    ctx = RunContext(out_dir=tmp_path / "run", settings=settings, log=lines.append)
    manifest = run_stages(_stages(calls, skip), ctx, resume=resume)
    return calls, "\n".join(lines), manifest, ctx


def test_resume_redoes_only_the_stages_a_changed_setting_reaches(tmp_path):
    calls, _, manifest, _ = _run(tmp_path, {"n": 1, "m": 2}, resume=False)
    assert calls == ["a", "b", "c", "d"] and manifest["stages"]["a"]["settings"] == {"n": 1}
    calls, log, _, _ = _run(tmp_path, {"n": 1, "m": 2}, resume=True)
    assert calls == [] and "resumed: reused 4 stage(s) (a, b, c, d); redid 0" in log
    calls, log, _, ctx = _run(tmp_path, {"n": 5, "m": 2}, resume=True)
    assert calls == ["a", "c", "d"]  # b reads m alone: reused
    assert "[1/4] a: redoing: its settings changed (n 1 -> 5)" in log
    assert "[2/4] b: done in an earlier run, skipped" in log
    assert "[3/4] c: redoing: it reads a, redone in this run" in log
    assert "reused 1 stage(s) (b); redid 3" in log
    assert (tmp_path / "run" / "c.txt").read_text() == "5!" and ctx.summaries["b"] == {"value": "2"}
    calls, log, _, _ = _run(tmp_path, {"n": 5, "m": 3}, resume=True)
    assert calls == ["b", "d"]
    (tmp_path / "run" / "a.txt").write_text("damaged")
    calls, log, _, _ = _run(tmp_path, {"n": 5, "m": 3}, resume=True)
    assert calls == ["a", "c", "d"] and "a.txt missing or changed since the earlier run" in log


def test_a_manifest_without_stage_settings_resumes_only_with_the_same_run_settings(tmp_path):
    _run(tmp_path, {"n": 1, "m": 2}, resume=False)
    path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(path.read_text())
    for entry in manifest["stages"].values():
        del entry["settings"]
    path.write_text(json.dumps(manifest))
    assert _run(tmp_path, {"n": 1, "m": 2}, resume=True)[0] == []
    calls, log, _, _ = _run(tmp_path, {"n": 1, "m": 3}, resume=True)
    assert calls == ["a", "b", "c", "d"] and "this stage's own were not recorded" in log


def test_a_skipped_stage_is_noted_recorded_and_reused(tmp_path):
    calls, log, manifest, ctx = _run(tmp_path, {"n": 1, "m": 2}, resume=False, skip=True)
    assert calls == ["a", "b", "c", "d"]
    assert "[2/4] b: skipped: b does not apply to this model; --b 0 leaves it out" in log
    entry = manifest["stages"]["b"]
    assert entry["status"] == "skipped" and entry["outputs"] == {} and "--b 0" in entry["note"]
    assert ctx.summaries["b"] == {"skipped": entry["note"]} and not (tmp_path / "run" / "b.txt").exists()
    calls, log, _, ctx = _run(tmp_path, {"n": 1, "m": 2}, resume=True, skip=True)
    assert calls == [] and "b: skipped in an earlier run with the same settings: b does not apply" in log
    assert ctx.summaries["b"]["skipped"].startswith("b does not apply")
    calls, _, _, _ = _run(tmp_path, {"n": 1, "m": 4}, resume=True, skip=False)
    assert calls == ["b", "d"] and (tmp_path / "run" / "b.txt").read_text() == "4"


def test_the_study_declares_what_every_stage_reads():
    from icl_cmr.analyses.study.layout import DEMO_SETTINGS
    from icl_cmr.analyses.study.stages import STAGE_INPUTS, build_stages

    settings = {**DEMO_SETTINGS, "ablation_passages": 6, "recall": ["psifr:Morton2013"], "model": "tiny-llama"}
    stages = build_stages(settings)
    names = [s.name for s in stages]
    assert set(names) == set(STAGE_INPUTS)
    for i, stage in enumerate(stages):
        assert set(stage.after or ()) <= set(names[:i]), stage.name  # a stage reads only earlier ones
        assert set(stage.settings or ()) <= set(settings) | {"grid", "recall_options"}, stage.name
    changed = {s.name for s in stages if s.settings is None or "n_words" in s.settings}
    assert changed == {"heads", "figures", "report"}


def test_a_model_that_recalls_nothing_skips_the_recall_stage_with_a_note(tmp_path, monkeypatch):
    """The study's recall stage on the tiny model made to look instruction-tuned (a chat template):
    it recalls no studied word, so the stage is skipped with a note naming --recall-lists 0."""
    import cmr
    from cmr.io import save_dataset
    from icl_cmr.adapters.head_profiles import select_profile
    from icl_cmr.analyses.study import stages as study
    from icl_cmr.analyses.memory.llm_recall import report_section
    from icl_cmr.analyses.study.layout import DEMO_SETTINGS, HEADS_FILE, head_fit_file

    model, heads, grid = tiny_head_scan()
    out = tmp_path / "run"
    out.mkdir()
    save_dataset(heads, out / HEADS_FILE)
    fits = cmr.fit_profiles(select_profile(heads, which="score"), grid, objective="lsq", lags=cmr.PAPER_LAGS, invalid="nan")
    save_dataset(fits, out / head_fit_file("lsq"))
    monkeypatch.setattr(model.tokenizer, "chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}",
                        raising=False)
    monkeypatch.setattr(study, "load_study_model", lambda *a, **k: model)
    settings = {**DEMO_SETTINGS, "recall_lists": 2, "recall": [], "model": "my-untrained-model"}
    stage = next(s for s in study.build_stages(settings) if s.name == "llm_recall")
    lines = []
    ctx = RunContext(out_dir=out, settings=settings, log=lines.append)
    manifest = run_stages([stage], ctx)
    note = manifest["stages"]["llm_recall"]["note"]
    assert manifest["stages"]["llm_recall"]["status"] == "skipped"
    assert "my-untrained-model did not recall the study lists" in note and "--recall-lists 0" in note
    assert "recalled no studied word" in note  # what the recall task found, kept
    assert any(line.startswith("[1/1] llm_recall: skipped: my-untrained-model") for line in lines)
    section = "\n".join(report_section(ctx.summaries["llm_recall"]))
    assert "Not run:" in section and "--recall-lists 0" in section
    with pytest.raises(KeyError):
        ctx.summaries["llm_recall"]["lists"]
