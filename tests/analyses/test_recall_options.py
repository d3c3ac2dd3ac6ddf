"""The recall-data options (``--columns``, ``--trial-types``, ``--list-keys``, ``--normalize-items``)
on every command that reads recall data, and semantic CMR from a lab's own word vectors."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr import errors
from icl_cmr.adapters.item_pools import patterns_from_file, read_item_vectors
from icl_cmr.adapters.recall_data import load_recall_data

WORDS = ["apple", "bird", "cat", "dog", "egg", "fish"]
LAB = {"subject": "subject_id", "list": "list_num", "position": "serial_pos", "item": "word", "trial_type": "phase"}
LAB_OPTIONS = ["--columns", ",".join(f"{k}={v}" for k, v in LAB.items()),
               "--trial-types", "study=encoding,recall=retrieval", "--list-keys", "session", "--normalize-items"]
PSIFR_OPTIONS = ["--list-keys", "session", "--normalize-items"]


def _psifr_table() -> pd.DataFrame:
    """Two subjects x two sessions x two lists (numbered 1, 2 again in each session); recalls in capitals."""
    rng = np.random.default_rng(3)
    rows = []
    for subject in (1, 2):
        for session in (1, 2):
            for lst in (1, 2):
                words = list(rng.permutation(WORDS))
                rows += [(subject, session, lst, "study", p, w) for p, w in enumerate(words, 1)]
                rows.append((subject, session, lst, "distractor", 1, "7+3"))
                recalled = [words[k] for k in rng.permutation(6)[: 2 + (subject + session + lst) % 4]]
                rows += [(subject, session, lst, "recall", p, w.upper()) for p, w in enumerate(recalled, 1)]
    return pd.DataFrame(rows, columns=["subject", "session", "list", "trial_type", "position", "item"])


def _lab_table() -> pd.DataFrame:
    table = _psifr_table().rename(columns=LAB)
    table["phase"] = table["phase"].replace({"study": "encoding", "recall": "retrieval"})
    return table[["subject_id", "session", "list_num", "phase", "serial_pos", "word"]]


@pytest.fixture
def tables(tmp_path):
    lab, psifr = tmp_path / "lab.csv", tmp_path / "psifr.csv"
    _lab_table().to_csv(lab, index=False)
    _psifr_table().to_csv(psifr, index=False)
    return lab, psifr


def cli(*argv):
    from icl_cmr.analyses.cli import build_parser, execute

    return execute(build_parser().parse_args([str(a) for a in argv]))


def _help(command: str) -> str:
    from icl_cmr.analyses.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[command].format_help()


def test_from_table_reads_a_lab_table_as_the_psifr_table():
    options = dict(list_keys="session", normalize_items=True)
    lab = cmr.from_table(_lab_table(), columns=LAB, trial_types={"study": "encoding", "recall": "retrieval"}, **options)
    psifr = cmr.from_table(_psifr_table(), **options)
    xr.testing.assert_identical(lab.drop_attrs(deep=False), psifr.drop_attrs(deep=False))
    assert lab.attrs["ignored_trial_types"] == psifr.attrs["ignored_trial_types"] == '{"distractor": 8}'


def test_from_table_without_the_options_is_unchanged():
    table = _psifr_table()
    before = table.copy()
    plain = cmr.from_table(table, list_keys="session", normalize_items=True)
    named = cmr.from_table(table, list_keys="session", normalize_items=True,
                           columns={"subject": "subject"}, trial_types={"study": "study"})
    pd.testing.assert_frame_equal(table, before)
    xr.testing.assert_identical(plain, named)


@pytest.mark.parametrize("options, pattern", [
    ({"columns": {"subj": "subject_id"}}, r"unknown psifr column\(s\): subj$"),
    ({"columns": {**LAB, "item": "words"}}, r"lacks: item=words \(table columns: subject_id, session"),
    ({"columns": {"subject": "subject_id", "list": "subject_id"}}, r"its own table column.*got subject_id$"),
    ({"columns": LAB, "trial_types": {"distractor": "math"}}, r"unknown trial type\(s\): distractor$"),
    ({"columns": LAB, "trial_types": {"study": "enc", "recall": "retrieval"}},
     r"no row of trial_type has: study=enc \(values: distractor, encoding, retrieval\)$"),
    ({"trial_types": {"study": "encoding"}}, r"needs a trial_type column"),
    ({"columns": ["subject"]}, r"columns must be a mapping.*got list$"),
])
def test_mapping_errors_are_one_typed_line(options, pattern):
    with pytest.raises(errors.RecallDataError, match=pattern) as info:
        cmr.from_table(_lab_table(), **options)
    assert "\n" not in str(info.value)


# command -> (arguments after SOURCE, how its result is read)
COMMANDS = {
    "lag-crp": ("nc",), "spc": ("nc",), "pfr": ("nc",), "recall-analyses": ("nc",),
    "loglik": ("stdout",), "fit-recall": ("nc",),
}


def _params(tmp_path):
    path = tmp_path / "params.json"
    path.write_text(json.dumps(dict(cmr.textbook.parameters.DEFAULTS) if hasattr(cmr.textbook.parameters, "DEFAULTS")
                               else {"Lfc": 0.15, "Lcf": 0.15, "P1": 0.2, "P2": 2, "B_enc": 0.7, "B_start": 0.3,
                                     "B_rec": 0.9, "T": 0.1, "X1": 0.001, "X2": 0.25, "Afc": 0, "Acf": 0,
                                     "Dfc": 0.85, "Dcf": 0.85}))
    return path


def _result(command, source, options, tmp_path, capsys, name):
    if command == "loglik":
        assert cli(command, source, "--params", _params(tmp_path), *options) == 0
        return json.loads(capsys.readouterr().out)
    out = tmp_path / f"{name}.nc"
    extra = ["--free", "T", "--pooled", "--no-progress", "--seed", "1"] if command == "fit-recall" else []
    assert cli(command, source, "-o", out, *extra, *options) == 0
    capsys.readouterr()
    return cmr.load_dataset(out)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_recall_command_reads_a_lab_export_as_the_psifr_table(command, tables, tmp_path, capsys):
    lab, psifr = tables
    help_text = _help(command)
    for option in ("--columns", "--trial-types", "--list-keys", "--normalize-items", "--list-length"):
        assert option in help_text
    mine = _result(command, lab, LAB_OPTIONS, tmp_path, capsys, "lab")
    theirs = _result(command, psifr, PSIFR_OPTIONS, tmp_path, capsys, "psifr")
    if command == "loglik":
        assert mine == theirs
    else:
        drop = [v for v in ("seconds", "restart_seconds") if v in mine]
        xr.testing.assert_allclose(mine.drop_vars(drop), theirs.drop_vars(drop), rtol=0, atol=0) \
            if command != "fit-recall" else xr.testing.assert_equal(mine.drop_vars(drop), theirs.drop_vars(drop))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_advice_names_an_option_of_the_command(command, tmp_path, capsys):
    table = _psifr_table()  # list numbers start again in each session: needs --list-keys session
    path = tmp_path / "sessions.csv"
    table.to_csv(path, index=False)
    with pytest.raises(errors.RecallDataError) as info:
        _result(command, path, ["--normalize-items"], tmp_path, capsys, "out")
    advised = re.findall(r"command line: (--[a-z-]+)", str(info.value))
    assert advised == ["--list-keys"]
    assert all(option in _help(command) for option in advised)


def test_bad_columns_option_is_one_typed_line(tables, tmp_path):
    lab, _ = tables
    with pytest.raises(errors.ParameterError, match=r"^--columns must be distinct NAME=VALUE pairs.*got 'subject'$"):
        cli("spc", lab, "-o", tmp_path / "spc.nc", "--columns", "subject")
    assert not (tmp_path / "spc.nc").exists()


def test_run_passes_the_options_to_every_recall_file(tables, tmp_path, monkeypatch):
    import icl_cmr.analyses.study.stages as study

    lab, psifr = tables
    seen = {}

    def first_stage_only(stages, ctx, resume):
        seen["settings"] = ctx.settings
        return study._human_crp(ctx)

    monkeypatch.setattr(study, "run_stages", first_stage_only)
    cli("run", "-o", tmp_path / "study", "--model", "tiny-llama", "--recall", lab, *LAB_OPTIONS)
    assert seen["settings"]["recall_options"]["columns"] == LAB
    (made,) = (tmp_path / "study").glob("human_lag_crp_*.nc")
    expected = cmr.lag_crp(load_recall_data(psifr, list_keys="session", normalize_items=True), by="subject")
    xr.testing.assert_equal(cmr.load_dataset(made), expected)


def test_run_without_the_options_keeps_its_settings(tables, tmp_path, monkeypatch):
    import icl_cmr.analyses.study.stages as study

    _, psifr = tables
    seen = {}
    monkeypatch.setattr(study, "run_stages", lambda stages, ctx, resume: seen.update(ctx.settings))
    cli("run", "-o", tmp_path / "study", "--model", "tiny-llama", "--recall", psifr)
    assert "recall_options" not in seen


# --- your own word vectors -----------------------------------------------------------------

def _vectors():
    rng = np.random.default_rng(0)
    return np.array(WORDS + ["house"]), rng.normal(size=(7, 4))


def test_vector_formats_read_alike(tmp_path):
    items, vectors = _vectors()
    np.savez(tmp_path / "v.npz", items=items, vectors=vectors)
    rows = [[w, *map(repr, v)] for w, v in zip(items, vectors.tolist())]
    (tmp_path / "v.csv").write_text("word," + ",".join(f"d{k}" for k in range(4)) + "\n"
                                    + "".join(",".join(r) + "\n" for r in rows))
    (tmp_path / "v.txt").write_text("7 4\n" + "".join(" ".join(r) + "\n" for r in rows))
    (tmp_path / "v.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    for name in ("v.npz", "v.csv", "v.txt", "v.tsv"):
        got_items, got = read_item_vectors(tmp_path / name)
        assert got_items.tolist() == items.tolist()
        np.testing.assert_array_equal(got, vectors)
    patterns = patterns_from_file(vectors=tmp_path / "v.npz")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(patterns.similarity, unit @ unit.T, rtol=0, atol=1e-15)


@pytest.mark.parametrize("content, error, pattern", [
    ("apple,1,2\nbird,1\n", errors.FileFormatError, r"same length; got lengths 1, 2$"),
    ("apple,1,2\nbird,1,x\n", errors.FileFormatError, r"line 2: expected numbers after the item; got '1 x'$"),
    ("apple,1,2\napple,3,4\n", errors.FileFormatError, r"repeated item\(s\) 'apple'$"),
    ("apple,0,0\nbird,1,2\n", errors.FileFormatError, r"1 item\(s\) have an all-zero vector.*'apple'$"),
    ("word,a,b\n", errors.FileFormatError, r"has no word vectors"),
])
def test_malformed_vector_files(tmp_path, content, error, pattern):
    path = tmp_path / "vectors.csv"
    path.write_text(content)
    with pytest.raises(error, match=pattern) as info:
        read_item_vectors(path)
    assert "\n" not in str(info.value)


def test_vectors_missing_studied_items(tmp_path):
    items, vectors = _vectors()
    np.savez(tmp_path / "v.npz", items=items[2:], vectors=vectors[2:])
    events = cmr.from_table(_psifr_table(), list_keys="session", normalize_items=True)
    with pytest.raises(errors.RecallDataError,
                       match=r"^2 studied item\(s\) have no row in '.*v.npz' \(5 items\), e.g. 'apple', 'bird'; "):
        patterns_from_file(vectors=tmp_path / "v.npz", events=events)


def test_fit_recall_with_own_vectors_end_to_end(tables, tmp_path, capsys):
    lab, _ = tables
    items, vectors = _vectors()
    np.savez(tmp_path / "v.npz", items=items, vectors=vectors)
    fits = tmp_path / "sem.nc"
    assert cli("fit-recall", lab, *LAB_OPTIONS, "--free", "T,Sff", "--pooled", "--no-progress",
               "--vectors", tmp_path / "v.npz", "-o", fits) == 0
    result = cmr.load_dataset(fits)
    assert np.isfinite(float(result["logl"].sum()))
    # the same similarities as a similarity file give the same fit
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.savez(tmp_path / "s.npz", items=items, similarity=np.clip(unit @ unit.T, -1, 1))
    again = tmp_path / "sim.nc"
    assert cli("fit-recall", lab, *LAB_OPTIONS, "--free", "T,Sff", "--pooled", "--no-progress",
               "--similarity", tmp_path / "s.npz", "-o", again) == 0
    np.testing.assert_array_equal(cmr.load_dataset(again)["logl"].values, result["logl"].values)
    # and loglik scores with them
    assert cli("loglik", lab, *LAB_OPTIONS, "--params", _params(tmp_path), "--vectors", tmp_path / "v.npz") == 0
    capsys.readouterr()


def test_vectors_refuse_category_patterns(tables, tmp_path):
    lab, _ = tables
    items, vectors = _vectors()
    np.savez(tmp_path / "v.npz", items=items, vectors=vectors)
    with pytest.raises(errors.ParameterError, match=r"^--vectors gives semantic similarities only; got --patterns category"):
        cli("loglik", lab, *LAB_OPTIONS, "--params", _params(tmp_path), "--vectors", tmp_path / "v.npz",
            "--patterns", "category")
