"""recall_task.word_pool: each source read once, every call a list of its own."""
from __future__ import annotations

import os

import pytest

from cmr.errors import DataSourceError
from icl_cmr.adapters import recall_data
from icl_cmr.adapters.lm import recall_task as task


@pytest.fixture
def reads(monkeypatch):
    """The sources read from disk during the test (the pools cached before it are set aside)."""
    monkeypatch.setattr(task, "_POOLS", {})
    seen, read = [], recall_data.read_recall_table

    def counted(source, **keywords):
        seen.append(str(source))
        return read(source, **keywords)

    monkeypatch.setattr(recall_data, "read_recall_table", counted)
    return seen


def _table(path, items):
    rows = ["subject,list,trial_type,position,item"]
    rows += [f"1,1,study,{p},{w}" for p, w in enumerate(items, 1)] + [f"1,1,recall,1,{items[0]}"]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_bundled_pool_is_read_once_and_a_caller_cannot_change_it(reads):
    first = task.word_pool("cymr:sample1")
    assert first == sorted(set(first)) and first and all(w == w.lower() for w in first)
    first.append("zzz-not-studied")
    first[0] = "changed"
    second = task.word_pool("cymr:sample1")
    assert second == sorted(set(second)) and "zzz-not-studied" not in second and "changed" not in second
    assert second is not task.word_pool("cymr:sample1")  # a new list every call
    assert reads == ["cymr:sample1"]


def test_a_file_is_read_again_once_it_changes(reads, tmp_path):
    path = _table(tmp_path / "pool.csv", ["Dog", "'=cat", "emu"])  # the apostrophe write_table puts before '='
    assert task.word_pool(str(path)) == ["=cat", "dog", "emu"]
    assert task.word_pool(path) == ["=cat", "dog", "emu"] and len(reads) == 1  # a str and a Path: one file
    stat = path.stat()
    _table(path, ["Dog", "'=cat", "emu", "yak"])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert task.word_pool(path) == ["=cat", "dog", "emu", "yak"] and len(reads) == 2


def test_a_missing_source_is_refused_every_time_and_never_cached(reads, tmp_path):
    for _ in range(2):
        with pytest.raises(DataSourceError, match="no such recall-data file"):
            task.word_pool(str(tmp_path / "missing.csv"))
        with pytest.raises(DataSourceError, match="unknown bundled recall data set"):
            task.word_pool("psifr:no_such_set")
    assert task._POOLS == {}


def test_the_cache_keeps_the_latest_sources(reads, tmp_path):
    paths = [_table(tmp_path / f"pool{i}.csv", [f"w{i}a", f"w{i}b"]) for i in range(task._POOL_CACHE_SIZE + 2)]
    for i, path in enumerate(paths):
        assert task.word_pool(path) == [f"w{i}a", f"w{i}b"]
    assert len(task._POOLS) == task._POOL_CACHE_SIZE
    task.word_pool(paths[-1])
    task.word_pool(paths[0])  # the oldest left the cache: read again
    assert reads == [str(p) for p in paths] + [str(paths[0])]
