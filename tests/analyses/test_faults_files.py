"""Hostile files: special files and sizes, HDF5 files that reach outside themselves, damaged arrays,
outputs that collide.

Each class is one test, parametrised over every loader or command of that class: every case ends
in one typed error with a one-line message naming what the path is, read nothing it did not have
to (a named pipe never blocks, a 2 GiB sparse file is refused by its size) and leaves nothing
behind.
"""
from __future__ import annotations

import io
import os
import re

import numpy as np
import pytest

import cmr
from cmr import errors
from cmr.files import SIZE_LIMITS, check_hdf5_file, check_input_file, read_arrays

from tests.conftest import one_typed_line, two_subject_table


def _item_similarity(path):
    from icl_cmr.adapters.item_pools import read_item_similarity

    return read_item_similarity(path)


def _item_vectors(path):
    from icl_cmr.adapters.item_pools import read_item_vectors

    return read_item_vectors(path)


def _recall_data(path):
    from icl_cmr.adapters.recall_data import load_recall_data

    return load_recall_data(path, list_length=3)


def _distances(path):
    from icl_cmr.adapters.recall_data import load_item_distances

    return load_item_distances(path)


def _grid(path):
    from icl_cmr.adapters.published_grid import load_published_grid

    return load_published_grid(path)


def _profiles(path):
    from icl_cmr.adapters.published import read_published_profiles

    return read_published_profiles(path)


def _text(path):
    from icl_cmr.adapters.text_corpus import read_text_file

    return read_text_file(path)


def _documents(path):
    from icl_cmr.adapters.text_corpus import read_documents

    return read_documents(path)


#: every reader of a user's file: (name, file name it is given, call, kind of cap)
READERS = [
    ("recall table", "recall.csv", _recall_data, "text"),
    ("recall matrix .npy", "recall.npy", _recall_data, "array"),
    ("recall matrix .npz", "recall.npz", _recall_data, "array"),
    ("item distances", "distances.npz", _distances, "array"),
    ("word vectors (text)", "vectors.txt", _item_vectors, "text"),
    ("word vectors (.npz)", "vectors.npz", _item_vectors, "array"),
    ("similarity (csv)", "similarity.csv", _item_similarity, "text"),
    ("similarity (.npz)", "similarity.npz", _item_similarity, "array"),
    ("parameter file", "params.json", cmr.read_parameters, "json"),
    ("network file", "network.json", cmr.read_network, "json"),
    ("netCDF result", "result.nc", cmr.load_dataset, "hdf5"),
    ("pattern file", "patterns.h5", cmr.load_patterns, "hdf5"),
    ("published CMR grid", "grid.npz", _grid, "array"),
    ("published head profiles", "profiles.csv", _profiles, "text"),
    ("text file", "words.txt", _text, "text"),
    ("text source", "corpus.txt", _documents, "text"),
]


def _fifo(path):
    os.mkfifo(path)
    return r"is a named pipe \(FIFO\), which could block the read forever; expected a regular file"


def _dev_zero(path):
    os.symlink("/dev/zero", path)
    return r"is a character device \(such as /dev/zero\), which has no end; expected a regular file"


def _dangling(path):
    os.symlink(path.parent / "nowhere", path)
    return r"is a symbolic link to '.*nowhere', which does not exist"


SPECIAL = [("named pipe", _fifo), ("link to /dev/zero", _dev_zero)]


@pytest.mark.parametrize("special", SPECIAL, ids=[s[0] for s in SPECIAL])
@pytest.mark.parametrize("reader", READERS, ids=[r[0] for r in READERS])
def test_special_file_is_named_as_what_it_is(tmp_path, reader, special):
    """A pipe blocks a reader forever and /dev/zero never ends: both are refused by stat(), never opened."""
    _, name, call, _ = reader
    path = tmp_path / name
    pattern = special[1](path)
    one_typed_line(lambda: call(path), errors.DataSourceError, pattern)


def _sparse(path, size):
    with open(path, "wb") as handle:
        handle.truncate(size)  # a hole: no disk used, nothing to read but zeros
    return path


@pytest.mark.parametrize("reader", [r for r in READERS if r[3] in ("text", "json")],
                         ids=[r[0] for r in READERS if r[3] in ("text", "json")])
def test_file_over_its_cap_is_refused_by_its_size(tmp_path, monkeypatch, reader):
    """A 2 GiB sparse file is refused by stat() alone: reading it would fail if it were tried."""
    _, name, call, kind = reader
    path = _sparse(tmp_path / name, 2 << 30)
    real_open = open

    def no_read(file, *args, **kwargs):
        if str(file) == str(path):
            raise AssertionError(f"{file} was opened")
        return real_open(file, *args, **kwargs)
    monkeypatch.setattr("builtins.open", no_read)
    monkeypatch.setattr(type(path), "read_bytes", lambda self: pytest.fail("read_bytes"))
    cap = SIZE_LIMITS[kind]
    one_typed_line(lambda: call(path), errors.DataSourceError,
                    rf"is 2\.0 GiB; expected at most {cap >> 20 if cap < 1 << 30 else cap >> 30}\.0 [MG]iB "
                    rf"\(the cap for {kind} files, set by cmr\.files\.SIZE_LIMITS\['{kind}'\]; set ICL_CMR_MAX_INPUT_BYTES")


@pytest.mark.parametrize("reader", [r for r in READERS if r[3] in ("array", "hdf5")],
                         ids=[r[0] for r in READERS if r[3] in ("array", "hdf5")])
def test_sparse_binary_file_is_refused_without_reading_it(tmp_path, reader):
    """Arrays and HDF5 files are read by their headers: 2 GiB of zeros is refused at once as not that format."""
    _, name, call, _ = reader
    path = _sparse(tmp_path / name, 2 << 30)
    with pytest.raises(errors.FileFormatError) as info:
        call(path)
    assert "\n" not in str(info.value)


def test_dangling_link_is_named(tmp_path):
    path = tmp_path / "p.json"
    pattern = _dangling(path)
    one_typed_line(lambda: check_input_file(path, "parameter file"), errors.DataSourceError, pattern)
    one_typed_line(lambda: check_input_file(tmp_path / "none.json", "parameter file"), errors.DataSourceError,
                    r"no such file: '.*none\.json' \(parameter file not found\)")


def test_size_cap_is_overridable(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    path.write_text('{"B_enc": 0.5}')
    monkeypatch.setenv("ICL_CMR_MAX_INPUT_BYTES", "4")
    one_typed_line(lambda: cmr.read_parameters(path), errors.DataSourceError,
                    r"is 14 bytes; expected at most 4 bytes \(the cap for json files, set by ICL_CMR_MAX_INPUT_BYTES")
    monkeypatch.setenv("ICL_CMR_MAX_INPUT_BYTES", "lots")
    one_typed_line(lambda: cmr.read_parameters(path), errors.DataSourceError,
                    r"ICL_CMR_MAX_INPUT_BYTES must be a whole number of bytes >= 1; got 'lots'")
    monkeypatch.delenv("ICL_CMR_MAX_INPUT_BYTES")
    assert cmr.read_parameters(path) == {"B_enc": 0.5}
    assert check_input_file(path, max_bytes=100) == path
    one_typed_line(lambda: check_input_file(path, "file", max_bytes=10), errors.DataSourceError, r"set by the caller")


# --- .npy / .npz: headers are checked before an array is allocated -----------------------------------

def _npy_header(shape, descr="<f8"):
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def _pickled(path):
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return path


ARRAY_FAULTS = [
    ("damaged .npy", lambda p: p.write_bytes(b"\x93NUMPY garbage" * 4),
     r"is not a valid \.npy array file \(its header does not read"),
    ("not an array file", lambda p: p.write_bytes(b"subject,list\n1,1\n"),
     r"is not a valid \.npy or \.npz array file \(neither signature found\)"),
    ("Python objects", _pickled, r"is not a valid \.npy array file: it holds Python objects, which are never unpickled"),
    ("declares 1 TiB", lambda p: p.write_bytes(_npy_header((1 << 37,))),
     r"declares 1\.0 TiB of array data; expected data that fit in the .* of memory available"),
    ("declares more than it holds", lambda p: p.write_bytes(_npy_header((1000,)) + bytes(80)),
     r"is not a valid \.npy array file: it declares 7\.8 KiB of data but holds 80 bytes \(truncated\?\)"),
]


@pytest.mark.parametrize("case", ARRAY_FAULTS, ids=[c[0] for c in ARRAY_FAULTS])
def test_array_file_faults(tmp_path, case):
    """No message repeats numpy's hint to load with allow_pickle; nothing beyond the header is allocated."""
    _, make, pattern = case
    path = tmp_path / "recall.npy"
    make(path)
    one_typed_line(lambda: read_arrays(path, "recall-matrix file"), errors.FileFormatError, pattern)
    with pytest.raises(errors.FileFormatError) as info:
        _recall_data(path)
    assert "allow_pickle" not in str(info.value) and "pickle.load" not in str(info.value)


def test_npz_array_faults(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, items=np.array(["a", "b"]))
    one_typed_line(lambda: read_arrays(path, "distance file", names=("items", "distances")), errors.FileFormatError,
                    r"distance file '.*d\.npz' has no array 'distances'; it has 'items'")
    np.savez(path, items=np.array([{"a": 1}], dtype=object), distances=np.ones((1, 1)))
    one_typed_line(lambda: _distances(path), errors.FileFormatError,
                    r"\(array 'items'\) is not a valid \.npy array file: it holds Python objects")
    np.savez(path, items=np.array(["a", "b"]), distances=np.ones((2, 2)))
    assert read_arrays(path, names=("distances",))["distances"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    np.save(tmp_path / "m.npy", np.arange(6).reshape(2, 3))
    assert read_arrays(tmp_path / "m.npy")[""].tolist() == [[0, 1, 2], [3, 4, 5]]


# --- HDF5: one guard for every reader ------------------------------------------------------------------

def _patterns_with(path, extra):
    import h5py

    cmr.save_patterns(path, ["a", "b"], loc=np.eye(2))
    with h5py.File(path, "a") as f:
        extra(f, path)
    return path


def _external_storage(f, path):
    target = path.parent / "outside.bin"
    target.write_bytes(np.eye(2).tobytes())
    del f["vector/loc"]
    f.create_dataset("vector/loc", shape=(2, 2), dtype="f8", external=[(str(target), 0, 32)])


def _external_link(f, path):
    import h5py

    target = path.parent / "outside.h5"
    with h5py.File(target, "w") as other:
        other["x"] = np.eye(2)
    del f["vector/loc"]
    f["vector/loc"] = h5py.ExternalLink(str(target), "/x")


def _dangling_soft_link(f, path):
    import h5py

    del f["vector/loc"]
    f["vector/loc"] = h5py.SoftLink("/nowhere")


def _declares_1_tib(f, path):
    del f["vector/loc"]
    f.create_dataset("vector/loc", shape=(1 << 20, 1 << 17), dtype="f8", chunks=(1, 1024))


def _virtual(f, path):
    import h5py

    target = path.parent / "outside.h5"
    with h5py.File(target, "w") as other:
        other["x"] = np.eye(2)
    layout = h5py.VirtualLayout(shape=(2, 2), dtype="f8")
    layout[:] = h5py.VirtualSource(str(target), "x", shape=(2, 2))
    del f["vector/loc"]
    f.create_virtual_dataset("vector/loc", layout)


HDF5_FAULTS = [
    ("external storage", _external_storage, r"variable '/vector/loc' is stored outside the file \(external storage "
                                             r"in '.*outside\.bin'\); expected every variable's data inside the file"),
    ("external link", _external_link, r"'/vector/loc' is stored outside the file \(an external link to '.*outside\.h5'\)"),
    ("dangling soft link", _dangling_soft_link, r"'/vector/loc' is a link to '/nowhere', which is not in the file"),
    ("virtual dataset", _virtual, r"stored outside the file \(a virtual dataset mapped onto other files\)"),
    ("declares 1 TiB", _declares_1_tib, r"declares 1\.0 TiB of data \(variable '/vector/loc': shape \(1048576, 131072\), "
                                        r"1\.0 TiB\); expected data that fit in the .* of memory available"),
]
HDF5_READERS = [("load_patterns", cmr.load_patterns, "pattern file"), ("load_dataset", cmr.load_dataset, "netCDF file"),
                ("check_hdf5_file", check_hdf5_file, "file")]


@pytest.mark.parametrize("reader", HDF5_READERS, ids=[r[0] for r in HDF5_READERS])
@pytest.mark.parametrize("case", HDF5_FAULTS, ids=[c[0] for c in HDF5_FAULTS])
def test_hdf5_file_reaching_outside_itself_is_refused(tmp_path, case, reader):
    """Every HDF5 reader (netCDF results, item-pattern files) shares one guard, run before any data is read."""
    _, extra, pattern = case
    _, call, what = reader
    path = _patterns_with(tmp_path / "patterns.h5", extra)
    one_typed_line(lambda: call(path), errors.FileFormatError, rf"^{what} '.*patterns\.h5'.*{pattern}")


def test_a_plain_pattern_file_still_loads(tmp_path):
    path = cmr.save_patterns(tmp_path / "p.h5", ["a", "b"], loc=np.eye(2))
    check_hdf5_file(path)
    assert cmr.load_patterns(path)["vector"]["loc"].tolist() == [[1.0, 0.0], [0.0, 1.0]]


# --- the command line: the same guards, one line, no traceback ---------------------------------------

def _csv(path):
    two_subject_table().to_csv(path, index=False)
    return path


def _params(path):
    path.write_text('{"B_enc": 0.5}')
    return path


COMMANDS = [
    ("lag-crp SOURCE", lambda t, bad: ["lag-crp", bad("recall.csv"), "-o", t / "o.nc"]),
    ("fit-recall --vectors", lambda t, bad: ["fit-recall", _csv(t / "r.csv"), "--free", "B_enc",
                                             "--vectors", bad("v.txt"), "-o", t / "o.nc"]),
    ("fit-recall --similarity", lambda t, bad: ["fit-recall", _csv(t / "r.csv"), "--free", "B_enc",
                                                "--similarity", bad("s.csv"), "-o", t / "o.nc"]),
    ("fit-recall --fixed", lambda t, bad: ["fit-recall", _csv(t / "r.csv"), "--free", "B_enc", "--fixed", bad("p.json"),
                                          "-o", t / "o.nc"]),
    ("loglik --params", lambda t, bad: ["loglik", _csv(t / "r.csv"), "--params", bad("p.json")]),
    ("plot RESULT", lambda t, bad: ["plot", bad("r.nc"), "-o", t / "f.png"]),
    ("export RESULT", lambda t, bad: ["export", bad("r.nc"), "-o", t / "o.csv"]),
    ("fit PROFILES", lambda t, bad: ["fit", bad("p.nc"), "-o", t / "o.nc"]),
    ("recall-analyses --distances", lambda t, bad: ["recall-analyses", _csv(t / "r.csv"), "--distances",
                                                    bad("d.npz"), "-o", t / "o.nc"]),
    ("run --recall", lambda t, bad: ["run", "-o", t / "study", "--recall", bad("r.csv"), "--model", "tiny-llama"]),
    ("run --grid", lambda t, bad: ["run", "-o", t / "study", "--grid", bad("g.nc"), "--model", "tiny-llama"]),
    ("recall-lm --pool", lambda t, bad: ["recall-lm", "tiny-llama", "--pool", bad("pool.txt"), "-o", t / "o.csv"]),
]


@pytest.mark.parametrize("special", SPECIAL, ids=[s[0] for s in SPECIAL])
@pytest.mark.parametrize("case", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_command_names_a_special_file(tmp_path, monkeypatch, capsys, case, special):
    from icl_cmr.analyses.cli import main

    monkeypatch.chdir(tmp_path)
    made = []

    def bad(name):
        made.append(tmp_path / name)
        special[1](tmp_path / name)
        return tmp_path / name
    argv = [str(a) for a in case[1](tmp_path, bad)]
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"icl-cmr {argv[0]}: error: "), err
    assert ("named pipe" in err) if special[0] == "named pipe" else ("character device" in err), err
    assert not (tmp_path / "o.nc").exists() and not (tmp_path / "o.csv").exists() and not (tmp_path / "study").exists()


# --- CSV cells a spreadsheet would run as formulas -----------------------------------------------------

HOSTILE = ['=HYPERLINK("http://example.com","open")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]


def _events_of(subjects):
    rows = []
    for subject in subjects:
        for lst in (1, 2):
            rows += [(subject, lst, "study", p, f"w{lst}{p}") for p in range(1, 5)]
            rows += [(subject, lst, "recall", k, f"w{lst}{p}") for k, p in enumerate((4, 3, 1), 1)]
    import pandas as pd

    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])


def test_csv_cells_that_would_run_are_neutralised_and_read_back(tmp_path, capsys):
    """lag-crp -o x.csv with hostile subject names: every text cell that starts a formula gets an apostrophe,
    numbers (negative lags, -0.5) stay numbers, and the recall-table reader gives the names back as written."""
    import csv

    from icl_cmr.adapters.recall_data import read_recall_table
    from icl_cmr.analyses.cli import main

    table = _events_of(HOSTILE + ["'=already quoted", "-5", "plain"])
    cmr.io.write_table(table, tmp_path / "r.csv")
    assert main(["lag-crp", str(tmp_path / "r.csv"), "-o", str(tmp_path / "x.csv")]) == 0
    with open(tmp_path / "x.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    subjects = {row["subject"] for row in rows}
    assert subjects == {"'" + s for s in HOSTILE} | {"''=already quoted", "-5", "plain"}
    assert {row["lag"] for row in rows} >= {"-1", "1"}  # numbers are never touched
    assert all(not cell.startswith(("=", "+", "@", "\t", "\r")) for row in rows for cell in row.values())
    events_csv = tmp_path / "events.csv"
    cmr.write_result(cmr.from_table(table), events_csv)
    back = read_recall_table(events_csv)
    assert sorted(map(str, back["subject"].unique())) == sorted(map(str, table["subject"].unique()))


def test_neutralising_is_undone_exactly():
    from hypothesis import given, settings, strategies as st

    from cmr.csv_safety import FORMULA_START, neutralised, restored

    @settings(max_examples=60, deadline=None)
    @given(st.text(alphabet=st.sampled_from(list("'=+-@\t\r0123456789.eE ab")), max_size=8) | st.text(max_size=8))
    def check(text):
        written = neutralised(text)
        assert restored(written) == text
        assert not written.startswith(FORMULA_START) or re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", written)
    check()


def test_every_csv_writer_goes_through_write_table():
    """One CSV writer: a ``to_csv`` anywhere else in the packages would skip the formula rule."""
    from tests.conftest import REPO_ROOT

    found = [f"{path.relative_to(REPO_ROOT)}:{n}" for folder in ("cmr", "adapters", "analyses")
             for path in (REPO_ROOT / folder).rglob("*.py")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(", line)]
    assert found == ["cmr/io.py:" + found[0].split(":")[1]] and len(found) == 1, found


# --- outputs: one collision check for every command with several ------------------------------------

def _all_parsers():
    import argparse

    from icl_cmr.analyses.cli import build_parser

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield " ".join((*prefix, name)), sub
                    yield from walk(sub, (*prefix, name))
    return list(walk(build_parser(), ()))


def _is_output(action) -> bool:
    """An option naming a file or folder the command writes, as the help texts say it."""
    return bool(action.option_strings) and ("-o" in action.option_strings or action.dest == "figure"
                                            or action.dest.endswith("_out")
                                            or re.search(r"\b(write|save)\b.*\bhere\b|^also write", action.help or ""))


def test_every_output_option_is_checked_against_the_others():
    """Every option that names an output is in the command's output_args, so the collision check sees it."""
    from icl_cmr.analyses.cli import OUTPUT_ARGS

    missed = {name: [a.dest for a in parser._actions if _is_output(a)
                     and a.dest not in (parser.get_default("output_args") or OUTPUT_ARGS)]
              for name, parser in _all_parsers()}
    assert not {name: dests for name, dests in missed.items() if dests}
    several = {name for name, parser in _all_parsers() if len([a for a in parser._actions if _is_output(a)]) > 1}
    assert several >= {"composition", "fit-population", "reproduce recovery", "reproduce model-comparison",
                       "reproduce published-fits"}


def _recall_csv(t):
    return _csv(t / "r.csv")


COLLISIONS = [
    ("reproduce recovery: --figure is -o", lambda t: ["reproduce", "recovery", "-o", t / "r.png", "--figure", t / "r.png"],
     r"-o '.*r\.png' and --figure '.*r\.png' name the same file; each output needs its own name"),
    ("reproduce recovery: the default figure is -o", lambda t: ["reproduce", "recovery", "-o", t / "r.png"],
     r"-o '.*r\.png' and --figure '.*r\.png' name the same file"),
    ("reproduce model-comparison: --figure is -o", lambda t: ["reproduce", "model-comparison", "-o", t / "m",
                                                             "--figure", t / "." / "m"],
     r"-o '.*m' and --figure '.*m' name the same file"),
    ("reproduce published-fits: --fits-dir is -o", lambda t: ["reproduce", "published-fits", "-o", t / "x.md",
                                                             "--fits-dir", t / "x.md"],
     r"-o '.*x\.md' and --fits-dir '.*x\.md' name the same file"),
    ("fit-population: --check is -o", lambda t: ["fit-population", _recall_csv(t), "--free", "B_enc", "-o", t / "f.nc",
                                                 "--check", t / "f.nc"],
     r"-o '.*f\.nc' and --check '.*f\.nc' name the same file"),
    ("composition: --figure is --causal", lambda t: ["composition", "-o", t / "c.nc", "--causal", t / "k.png",
                                                     "--figure", t / "k.png"],
     r"--causal '.*k\.png' and --figure '.*k\.png' name the same file"),
]


@pytest.mark.parametrize("case", COLLISIONS, ids=[c[0] for c in COLLISIONS])
def test_two_outputs_of_one_name_are_refused_before_anything_is_written(tmp_path, monkeypatch, capsys, case):
    from icl_cmr.analyses.cli import main

    _, argv, pattern = case
    monkeypatch.chdir(tmp_path)
    args = [str(a) for a in argv(tmp_path)]
    before = sorted(os.listdir(tmp_path))
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and re.search(pattern, err), err
    assert sorted(os.listdir(tmp_path)) == before


def test_no_default_figure_is_written_under_the_working_directory(tmp_path, monkeypatch):
    """The default figures lie next to -o, its name with .png."""
    from icl_cmr.analyses.cli import build_parser

    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    for argv, figure in ((["reproduce", "recovery", "-o", "out/fits.nc"], "out/fits.png"),
                         (["reproduce", "recovery"], "results/recall_recovery.png"),
                         (["reproduce", "model-comparison", "-o", "mc"], "mc.png"),
                         (["reproduce", "model-comparison"], "results/model_comparison.png"),
                         (["reproduce", "recovery", "--figure", "f.png"], "f.png")):
        assert parser.parse_args(argv).figure == figure
    for name, parser in _all_parsers():
        for action in parser._actions:
            assert "docs/" not in str(action.default), f"{name} {action.dest} writes under docs/ by default"


# --- text from the user that reaches matplotlib -------------------------------------------------------

TITLES = ["$\\frac{1}{$", "cost $5 and $6", "$x$", "\\$ one $", "$$", "$\\undefinedcommand$"]


def _long_crp():
    import pandas as pd

    rows = []
    for subject in ("a", "b"):
        for lst in (1, 2):
            rows += [(subject, lst, "study", p, f"w{lst}{p}") for p in range(1, 9)]
            rows += [(subject, lst, "recall", k, f"w{lst}{p}") for k, p in enumerate((8, 7, 3, 4, 5), 1)]
    return cmr.lag_crp(cmr.from_table(pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])))


@pytest.mark.parametrize("title", TITLES)
def test_user_text_reaches_matplotlib_as_written(tmp_path, capsys, title):
    """plot --title, a caller's series labels and any text of a figure that is broken mathtext are drawn as
    written; the house mathtext labels still render as mathtext."""
    import matplotlib

    matplotlib.use("Agg")
    from icl_cmr.analyses import plots
    from icl_cmr.analyses.cli import main

    crp = _long_crp()
    if title == TITLES[0]:  # the command line, once
        cmr.save_dataset(crp, tmp_path / "crp.nc")
        assert main(["plot", str(tmp_path / "crp.nc"), "--title", title, "-o", str(tmp_path / "f.png")]) == 0
        assert (tmp_path / "f.png").stat().st_size > 0
    fig = plots.standard_figure(crp, title=title)
    shown = fig._suptitle
    assert shown.get_text().replace("\\$", "$") == title.replace("\\$", "$") and not shown._preprocess_math(
        shown.get_text())[1]
    fig = plots.lag_crp({title: crp})
    plots.save_figure(fig, tmp_path / "g.png")
    fig, ax = plots.new_figure()
    ax.set_title(f"model {title}")
    ax.set_xlabel(r"$\beta_{enc}$")
    plots.save_figure(fig, tmp_path / "h.png")  # broken mathtext from anywhere: drawn as written, never raised
    assert ax.get_xlabel() == r"$\beta_{enc}$"
