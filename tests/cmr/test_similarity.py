"""Similarity matrices and word vectors that are not cosines: refused in one typed line, or warned
about inside the stated tolerances (cmr.similarity.SIMILARITY_TOLERANCES), on the library
(``cmr.item_patterns``), the file readers (``patterns_from_file``) and the commands (``--similarity``,
``--vectors``)."""
from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import FileFormatError, ParameterError, SimilarityWarning
from cmr.similarity import SIMILARITY_TOLERANCES, check_similarity

ITEMS = ["a", "b", "c", "d"]


def _items(matrix):
    return ITEMS if len(matrix) == 4 else [f"w{i}" for i in range(len(matrix))]


def _cosines() -> np.ndarray:
    vectors = np.random.default_rng(0).normal(size=(4, 3))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit @ unit.T


def _asymmetric(size):
    sim = _cosines()
    sim[0, 1] += size
    return sim


def _scaled(largest):
    sim = _cosines()
    sim[0, 0] = sim[1, 1] = largest
    return sim


def _indefinite(eigenvalue):
    """Cosines of 4 items in 3 dimensions (one zero eigenvalue) moved to ``eigenvalue`` along its
    eigenvector: symmetric, in [-1, 1], smallest eigenvalue ``eigenvalue``."""
    sim = _cosines()
    null = np.linalg.eigh(sim)[1][:, 0]
    return sim + eigenvalue * np.outer(null, null)


def _negatively_correlated(a):
    """Unit diagonal, every other value -a: eigenvalues 1 + a and 1 - 3a."""
    return (1 + a) * np.eye(4) - a * np.ones((4, 4))


def _clipped_cosines():
    """Cosines of 20 unit vectors in 5 dimensions with the negative ones set to 0 (not semi-definite)."""
    vectors = np.random.default_rng(2).normal(size=(20, 5))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.clip(vectors @ vectors.T, 0, 1)


# name: (matrix, "refused" | "warned" | "accepted", what the line names)
CASES = {
    "cosines": (_cosines(), "accepted", None),
    "rounding_asymmetry": (_asymmetric(1e-12), "accepted", None),
    "small_asymmetry": (_asymmetric(1e-4), "warned", r"not symmetric: max \|S - S.T\| = 0.0001"),
    "asymmetric": (_asymmetric(0.5), "refused", r"not symmetric: max \|S - S.T\| = 0.5"),
    "values_up_to_50": (_scaled(50.0), "refused", r"values outside \[-1, 1\]: up to 50 in size"),
    "values_just_above_1": (_scaled(1.0005), "warned", r"values outside \[-1, 1\]: up to 1.0005"),
    "not_semidefinite": (_negatively_correlated(0.6), "refused",
                         r"not positive semi-definite: smallest eigenvalue -0.8$"),
    "barely_not_semidefinite": (_indefinite(-1e-3), "warned", r"not positive semi-definite: smallest eigenvalue"),
    "clipped_cosines": (_clipped_cosines(), "warned", r"not positive semi-definite: smallest eigenvalue -0.172"),
}


def _library(matrix, tmp_path):
    return cmr.item_patterns(_items(matrix), matrix)


def _file(matrix, tmp_path):
    from icl_cmr.adapters.item_pools import patterns_from_file

    path = tmp_path / "similarity.npz"
    np.savez(path, items=np.array(_items(matrix)), similarity=matrix)
    return patterns_from_file(similarity=path)


def _command(matrix, tmp_path):
    from icl_cmr.analyses.cli import main

    path = tmp_path / "similarity.csv"
    items = _items(matrix)
    pd.DataFrame(matrix, index=items, columns=items).to_csv(path, float_format="%.17g")
    rows = [(1, 1, "study", p, w) for p, w in enumerate(items[:4], 1)]
    rows += [(1, 1, "recall", 1, items[2]), (1, 1, "recall", 2, items[0])]
    pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"]).to_csv(tmp_path / "r.csv",
                                                                                              index=False)
    (tmp_path / "p.json").write_text(json.dumps({**cmr.default_parameters(), "Sfc": 0.1}))
    return main(["loglik", str(tmp_path / "r.csv"), "--similarity", str(path), "--params", str(tmp_path / "p.json")])


WAYS_IN = {"item_patterns": _library, "patterns_from_file": _file, "loglik --similarity": _command}


@pytest.mark.parametrize("way_in", list(WAYS_IN), ids=list(WAYS_IN))
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_similarity_matrix_is_checked(case, way_in, tmp_path, capsys):
    matrix, verdict, named = CASES[case]
    call = WAYS_IN[way_in]
    if verdict == "refused":
        if way_in.startswith("loglik"):
            assert call(matrix, tmp_path) == 1
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and "error:" in err and re_search(named, err), err
        else:
            with pytest.raises(ParameterError, match=named) as info:
                call(matrix, tmp_path)
            assert "\n" not in str(info.value)
    elif verdict == "warned":
        with pytest.warns(SimilarityWarning, match=named) as record:
            call(matrix, tmp_path)
        assert len([w for w in record if issubclass(w.category, SimilarityWarning)]) == 1  # one line, not two
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SimilarityWarning)
            call(matrix, tmp_path)


def re_search(pattern, text):
    return re.search(pattern, text) is not None


def test_the_tolerances_are_the_documented_ones():
    assert SIMILARITY_TOLERANCES == {"symmetry": (1e-9, 1e-3), "range": (1e-9, 1e-3), "semidefinite": (1e-9, 5e-2)}
    assert check_similarity(np.eye(2)) is not None


@pytest.mark.parametrize("row, refused", [("1e308 1e308 1e308", False), ("1e308 -1e308 1e308 1e308", True),
                                          ("1e200 1e200 1e200", False)], ids=["1e308_x3", "1e308_x4", "1e200_x3"])
def test_vectors_too_large_to_normalise_are_refused(tmp_path, row, refused, recwarn):
    """A row whose length still fits a float64 gives its true cosines; one whose length does not
    is refused (before: an overflow warning and a similarity of 0 to every item, itself included)."""
    from icl_cmr.adapters.item_pools import patterns_from_file

    path = tmp_path / "vectors.txt"
    width = len(row.split())
    path.write_text(f"apple {' '.join(['1'] * width)}\nbird {row}\ncat {' '.join(['0.5'] * width)}\n")
    if refused:
        with pytest.raises(FileFormatError, match=r"1 item\(s\) have vectors too large to normalise .* 'bird'; "):
            patterns_from_file(vectors=path)
    else:
        sim = patterns_from_file(vectors=path).similarity
        assert sim[1, 1] == pytest.approx(1.0) and sim[0, 1] == pytest.approx(1.0) and sim[1, 2] == pytest.approx(1.0)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # no overflow warning
