"""The README's command-line section stays true: its quick commands run, every command parses,
and the run directory it describes is what `icl-cmr run` writes."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pandas as pd

from icl_cmr.analyses.cli import build_parser, main
from tests.conftest import REPO_ROOT, require

# the sentence that introduces the block of commands the tests run
RUN_MARKER = "The test suite runs each of\nthese lines in order"


def command_section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index("## Command line")
    return text[start:text.index("\n## ", start + 1)]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def commands(block: str) -> list[list[str]]:
    """Each line of a bash block as argv, its trailing comment removed."""
    return [shlex.split(line, comments=True) for line in block.strip().splitlines() if line.strip()]


def quick_block() -> str:
    section = command_section()
    assert RUN_MARKER in section, "the README must introduce the commands the tests run"
    return bash_blocks(section[section.index(RUN_MARKER):])[0]


def test_every_command_of_the_section_parses():
    lines = [argv for block in bash_blocks(command_section()) for argv in commands(block)]
    assert len(lines) >= 20
    parser = build_parser()
    for argv in lines:
        if argv[0] == "icl-cmr":
            args = parser.parse_args(argv[1:])
            assert getattr(args, "func", None), argv


def test_the_quick_commands_run_in_order(tmp_path, monkeypatch, capsys):
    require("psifr")
    monkeypatch.chdir(tmp_path)
    lines = commands(quick_block())
    assert [argv[1] for argv in lines if argv[0] == "icl-cmr"] == [
        "lag-crp", "lag-crp", "spc", "pfr", "fit", "fit", "export", "loglik", "fit-recall"]
    for argv in lines:
        if argv[0] == "icl-cmr":
            assert main(argv[1:]) == 0, argv
        else:
            assert argv[:2] == ["python", "-c"], argv
            subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, check=True)
    out = capsys.readouterr().out
    assert '"total_logl": -' in out  # loglik printed its JSON
    subjects = pd.read_csv(tmp_path / "subjects.csv")
    assert len(subjects) == 40 and subjects.columns[0] == "subject"
    assert {"paper_distance", "lsq_distance", "lsq_beta_enc", "paper_gaussian_aic"} <= set(subjects)
    assert len(pd.read_csv(tmp_path / "crp.csv")) == 40 * 47
    assert len(pd.read_csv(tmp_path / "recall_fit.csv")) == 1


def test_the_run_directory_table_lists_every_file_a_run_writes():
    from icl_cmr.analyses.study.pipeline import MANIFEST
    from icl_cmr.analyses.study.stages import DEMO_SETTINGS, build_stages

    section = command_section()
    assert "icl-cmr run --model path/to/model --recall my_experiment.csv -o results" in section
    settings = {**DEMO_SETTINGS, "recall": ["my_experiment.csv"], "model": "path/to/model"}
    written = {MANIFEST, "report.html", "figures/"}
    for stage in build_stages(settings):
        written |= {"figures/" if name.startswith("figures/") else name for name in stage.outputs}
    listed = set(re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)?", section, flags=re.M))
    listed = {name for pair in listed for name in pair if name}
    assert written == listed
