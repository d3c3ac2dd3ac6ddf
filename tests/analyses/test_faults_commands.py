"""Faults of the commands: each ends in one line ``icl-cmr CMD: error: ...`` (exit 1, no traceback)
naming the input and what was expected, leaving no output, temporary file or lock behind; or in
a correct result.

Every case runs ``icl-cmr`` as a user does (:func:`icl_cmr.analyses.cli.main`). The commands
that load a model get the tiny random Llama of ``conftest.py`` instead, so each case takes
seconds.
"""
from __future__ import annotations

import errno
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import two_subject_table


def _table():
    return two_subject_table()


def _csv(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    _table().to_csv(path, index=False)
    return path


def _damaged_npz(tmp: Path) -> Path:
    path = tmp / "distances.npz"
    np.savez(path, items=np.array(["a", "b", "c"]), distances=np.ones((3, 3)))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut short: no zip directory
    return path


def _random_bytes(tmp: Path) -> Path:
    path = tmp / "text.txt"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 20000, dtype=np.uint8).tobytes())
    return path


def _reference_without_metrics(tmp: Path) -> Path:
    from icl_cmr.adapters.published import published_file

    folder = tmp / "reference"
    folder.mkdir()
    (folder / "head_profiles.csv.gz").write_bytes(published_file("head_profiles.csv.gz").read_bytes())
    return folder


def _with_tiny_model(request, monkeypatch):
    tiny = request.getfixturevalue("tiny")
    monkeypatch.setattr("icl_cmr.adapters.lm.loading.load_model", lambda *a, **k: tiny)


def _weights_disk_full(monkeypatch):
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                              'message: "No space left on device" })')

    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", full)


def _disk_full_in_a_writer(monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)


def _toy_text(tmp: Path) -> Path:
    words = "the cat sat on a mat and dog ran to house river old red green tree bird sang over hill".split()
    rng = np.random.default_rng(0)
    path = tmp / "toy.txt"
    path.write_text(" ".join(" ".join(rng.choice(words, 8)).capitalize() + "." for _ in range(600)))
    return path


_TINY_TOY = ("--steps", "2", "--checkpoints", "2", "--no-scan", "--threads", "1")
_RUN = ("--model", "tiny-llama", "--ablation-passages", "0", "--recall-lists", "0")


# (id, argv(tmp) -> list, setup(request, monkeypatch) or None, exact line pattern after "icl-cmr CMD: error: ")
CASES = [
    # --- what used to end in a traceback -----------------------------------------------------------
    ("recall-analyses: damaged distances .npz",
     lambda t: ["recall-analyses", _csv(t / "recall.csv"), "--distances", _damaged_npz(t), "-o", t / "out.nc"], None,
     r"'.*distances\.npz' is not a distance file \(expected an \.npz with arrays 'items' and 'distances'\): "),
    ("recall-lm: word pool not UTF-8",
     lambda t: ["recall-lm", "tiny-llama", "--pool", _write(t / "pool.txt", b"cat\ndog\n\xff\xfe\n"), "-o", t / "r.csv"],
     None, r"word pool file '.*pool\.txt' must be UTF-8 text; byte 0xff at offset 8 is not$"),
    ("recall-lm: ablated head outside the model",
     lambda t: ["recall-lm", "--ablate", "L9.H9", "--n-lists", "1", "--list-length", "2", "--pool",
                _write(t / "pool.txt", b"cat\ndog\nsun\n"), "-o", t / "r.csv"], _with_tiny_model,
     r"head L9\.H9 is outside the model \(2 layers x 4 heads\)$"),
    ("train-toy: disk full while writing weights",
     lambda t: ["train-toy", "-o", t / "toy", "--text", _toy_text(t), *_TINY_TOY],
     lambda r, m: _weights_disk_full(m),
     r"cannot write '.*toy/checkpoints/step_000000/model\.safetensors': .*No space left on device"),
    ("top-heads: reference folder without head_metrics.csv.gz",
     lambda t: ["top-heads", "--reference", _reference_without_metrics(t)], None,
     r"the study's published file head_metrics\.csv\.gz is not in '.*reference'$"),
    # --- outputs that replaced another output or each other without a word ---------------------------
    ("composition: --causal is -o",
     lambda t: ["composition", "-o", t / "c.nc", "--causal", t / "c.nc"], None,
     r"-o '.*c\.nc' and --causal '.*c\.nc' name the same file; each output needs its own name"),
    ("composition: --cmr is -o under another spelling",
     lambda t: ["composition", "-o", t / "c.nc", "--causal", t / "k.nc", "--cmr", t / "." / "c.nc"], None,
     r"-o '.*c\.nc' and --cmr '.*c\.nc' name the same file"),
    ("composition: --figure is an existing input",
     lambda t: ["composition", _write(t / "model", b""), "-o", t / "c.nc", "--figure", t / "model"], None,
     r"output '.*model' is also an input \(argument model\); writing it \(--figure\) would replace the input"),
    ("run: two recall files of one name",
     lambda t: ["run", "-o", t / "study", "--recall", _csv(t / "a" / "data.csv"), _csv(t / "b" / "data.csv"), *_RUN],
     None, r"recall data '.*a/data\.csv' and '.*b/data\.csv' \(--recall\) would both be written to "
           r"human_lag_crp_data\.nc; expected data sets whose file names differ"),
    ("run: 'my exp.csv' and 'my_exp.csv'",
     lambda t: ["run", "-o", t / "study", "--recall", _csv(t / "my exp.csv"), _csv(t / "my_exp.csv"), *_RUN],
     None, r"'.*my exp\.csv' and '.*my_exp\.csv' \(--recall\) would both be written to human_lag_crp_my_exp\.nc"),
    # --- impossible options ----------------------------------------------------------------------------
    ("ablate: --top-fraction 0",
     lambda t: ["ablate", "--heads-from", t / "fits.nc", "--top-fraction", "0", "-o", t / "a.nc"], None,
     r"--top-fraction must be a share in \(0, 1\]; got 0\.0$"),
    ("ablate: --top-fraction 1.5",
     lambda t: ["ablate", "--heads", "L0.H0", "--top-fraction", "1.5", "-o", t / "a.nc"], None,
     r"--top-fraction must be a share in \(0, 1\]; got 1\.5$"),
    ("ablate: --top-fraction nan",
     lambda t: ["ablate", "--heads", "L0.H0", "--top-fraction", "nan", "-o", t / "a.nc"], None,
     r"--top-fraction must be a share in \(0, 1\]; got nan$"),
    ("ablate: --batch-size 0",
     lambda t: ["ablate", "--heads", "L0.H0", "--batch-size", "0", "-o", t / "a.nc"], None,
     r"--batch-size must be an integer >= 1; got 0$"),
    ("ablate: late window past the passage",
     lambda t: ["ablate", "--heads", "L0.H0", "--n-tokens", "100", "-o", t / "a.nc"], None,
     r"windows 50\+-5 and 500\+-5 must be disjoint and lie in 0\.\.99"),
    ("ablate: --time-budget 0",
     lambda t: ["ablate", "--heads", "L0.H0", "--time-budget", "0", "-o", t / "a.nc"], None,
     r"--time-budget must be a positive number of minutes; got 0$"),
    ("heads: --n-words 0",
     lambda t: ["heads", "tiny-llama", "--n-words", "0", "-o", t / "h.nc"], None,
     r"--n-words must be an integer >= 2; got 0$"),
    ("heads: --n-prompts 0",
     lambda t: ["heads", "tiny-llama", "--n-prompts", "0", "-o", t / "h.nc"], None,
     r"--n-prompts must be an integer >= 1; got 0$"),
    ("run: --n-words 1 before any stage",
     lambda t: ["run", "-o", t / "study", "--n-words", "1"], None, r"--n-words\) must be an integer >= 2; got 1$"),
    ("composition: --n-words 1",
     lambda t: ["composition", "--n-words", "1", "-o", t / "c.nc"], None, r"--n-words must be an integer >= 2; got 1$"),
    ("composition: --top 0",
     lambda t: ["composition", "--top", "0", "-o", t / "c.nc"], None, r"--top must be an integer >= 1; got 0$"),
    ("train-toy: --n-prompts 0 before training",
     lambda t: ["train-toy", "-o", t / "toy", "--n-prompts", "0"], None, r"--n-prompts must be an integer >= 1; got 0$"),
    ("recall-lm: --batch-size 0",
     lambda t: ["recall-lm", "--batch-size", "0", "-o", t / "r.csv"], None, r"--batch-size must be an integer >= 1; got 0$"),
    # --- messages: text that is not text, a full disk that names no file --------------------------------
    ("train-toy: random bytes as training text",
     lambda t: ["train-toy", "-o", t / "toy", "--text", _random_bytes(t), *_TINY_TOY], None,
     r"text source '.*text\.txt' is not text: \d+% of its characters are undecodable or control characters "
     r"\(at most 10% expected\)"),
    ("ablate: random bytes as ablation text",
     lambda t: ["ablate", "--heads", "L0.H0", "--n-random", "1", "--n-matched", "0", "--mode", "zero",
                "--n-passages", "2", "--n-tokens", "40", "--early", "5", "--late", "30", "--window", "2",
                "--text", _random_bytes(t), "-o", t / "a.nc"], _with_tiny_model,
     r"text source '.*text\.txt' is not text: \d+% of its characters are undecodable"),
    ("spc: disk full inside a third-party writer",
     lambda t: ["spc", _csv(t / "recall.csv"), "-o", t / "spc.csv"], lambda r, m: _disk_full_in_a_writer(m),
     r"No space left on device while writing '.*spc\.csv' \(OSError\)$"),
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): None if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_command_fault_is_one_typed_line(tmp_path, monkeypatch, capsys, request, case):
    from icl_cmr.analyses.cli import main

    name, argv, setup, pattern = case
    monkeypatch.chdir(tmp_path)
    args = [str(a) for a in argv(tmp_path)]
    if setup is not None:
        setup(request, monkeypatch)
    before = _snapshot(tmp_path)
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err
    line = re.split(r"[\r\n]", err.rstrip("\n"))[-1] + "\n"  # the last line: after a progress bar, if one was drawn
    assert "Traceback" not in err and err.endswith(line) and err.count("error") == line.count("error"), err
    assert line.startswith(f"icl-cmr {args[0]}: error: "), err
    assert re.search(pattern, line.rstrip("\n")), f"{pattern!r} not in {line!r}"
    after = _snapshot(tmp_path)
    assert not [p for p in after if ".partial-" in p or p.endswith(".lock")], sorted(after)
    if "disk full while writing weights" not in name:  # a run stopped by a full disk keeps its finished parts
        assert after == before, f"written or changed: {sorted(set(after.items()) ^ set(before.items()))}"


# --- correct results where a fault could have changed them -------------------------------------------


def test_default_recall_file_names_are_kept():
    from icl_cmr.analyses.study.layout import human_files
    from icl_cmr.analyses.study.stages import check_settings

    settings = {"recall": ["psifr:Morton2013", "psifr:peers_notask"]}
    check_settings(settings)
    assert human_files(settings) == {"psifr:Morton2013": "human_lag_crp_Morton2013.nc",
                                     "psifr:peers_notask": "human_lag_crp_peers_notask.nc"}


def test_text_is_read_unchanged_and_suspicious_text_warns(tmp_path):
    from icl_cmr.adapters import text_corpus

    prose = "Éléphant and the cat sat on a mat; naïve words, tabs\tand lines.\n" * 50
    (tmp_path / "prose.txt").write_text(prose, encoding="utf-8")
    assert text_corpus.read_documents(tmp_path / "prose.txt") == [prose]  # no warning (warnings are errors)
    numbers = "values 1 2 3 4 and 5 6 7 8 9 10\n" * 50  # 10 of 12 tokens have no letter: not prose
    (tmp_path / "numbers.txt").write_text(numbers)
    with pytest.raises(text_corpus.DataSourceError, match="83% of its whitespace-separated tokens have no letter"):
        text_corpus.read_documents(tmp_path / "numbers.txt")
    mixed = "The river ran under the old bridge near 1 small boat.\n" * 30 + "\x00\x01" * 10
    (tmp_path / "mixed.txt").write_text(mixed)
    with pytest.warns(text_corpus.TextSourceWarning, match="of its characters are undecodable or control"):
        assert text_corpus.read_documents(tmp_path / "mixed.txt") == [mixed]


def test_damaged_training_log_is_redone_on_resume(tmp_path, capsys):
    from icl_cmr.adapters.lm import toy_model
    from icl_cmr.analyses.cli import main
    from tests.conftest import require

    require("torch")
    text = _toy_text(tmp_path)
    out = tmp_path / "toy"
    assert main(["train-toy", "-o", str(out), "--text", str(text), *_TINY_TOY]) == 0
    log = out / toy_model.LOG_FILE
    record = json.loads(log.read_text())
    log.write_text(log.read_text()[:40])  # cut short, as by a full disk under another program
    capsys.readouterr()
    assert main(["train-toy", "-o", str(out), "--text", str(text), "--resume", *_TINY_TOY]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"training log '.*training_log\.json' is damaged \(JSONDecodeError: .*\); training again", printed)
    again = json.loads(log.read_text())
    assert again["train_loss"] == record["train_loss"]  # seeded: the redone run is the same run
    assert [c["step"] for c in again["checkpoints"]] == again["checkpoint_steps"]
