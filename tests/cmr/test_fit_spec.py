"""cmr.FitSpec: one checked, immutable model specification shared by the fitters; the separate
model arguments still work for one release, with a DeprecationWarning, and give identical fits."""
from __future__ import annotations

import dataclasses
import json
import pickle
import warnings

import numpy as np
import pytest
import xarray as xr

import cmr
from cmr.errors import FitWarning, ParameterError, RecallDataError
from cmr.events import to_table

FAST_DE = dict(popsize=5, tol=0.05, maxiter=6)


@pytest.fixture(scope="module")
def events():
    truths = {"a": dict(cmr.default_parameters(), B_enc=0.4, T=0.3), "b": dict(cmr.default_parameters(), B_enc=0.8)}
    return cmr.from_table(cmr.simulate_free_recall(truths, 6, 6, rng=2))


def same_fit(a: xr.Dataset, b: xr.Dataset) -> None:
    """Identical datasets but for the wall time and the creation stamp."""
    a, b = a.drop_vars("seconds", errors="ignore"), b.drop_vars("seconds", errors="ignore")
    for ds in (a, b):
        provenance = json.loads(ds.attrs["provenance"])
        provenance.pop("created_utc")
        ds.attrs["provenance"] = json.dumps(provenance)
    xr.testing.assert_identical(a, b)


def test_default_spec_is_the_standard_ten():
    spec = cmr.FitSpec()
    assert spec.free == cmr.STANDARD_FREE and spec.k == 10
    assert dict(spec.fixed) == dict(spec.bounds) == dict(spec.tied) == {}
    assert spec.patterns is None and spec.pool_size is None


def test_spec_is_normalised_immutable_hashable_and_picklable():
    spec = cmr.FitSpec("T", fixed={"B_rec": 0.8}, bounds={"T": [0.05, 0.5]}, tied={"B_enc": "B_rec"})
    assert spec.free == ("T",) and spec.k == 1
    assert spec.bounds["T"] == (0.05, 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.free = ("B_enc",)
    with pytest.raises(TypeError):
        spec.fixed["T"] = 0.1
    same = cmr.FitSpec(["T"], {"B_rec": 0.8}, {"T": (0.05, 0.5)}, tied={"B_enc": "B_rec"})
    assert spec == same and hash(spec) == hash(same) and len({spec, same}) == 1
    assert spec != cmr.FitSpec(["T"])
    assert pickle.loads(pickle.dumps(spec)) == spec
    wider = dataclasses.replace(spec, free=["T", "P1"])
    assert wider.free == ("T", "P1") and wider.fixed == spec.fixed and wider.k == 2


def test_caller_mappings_are_copied():
    fixed = {"B_rec": 0.8}
    spec = cmr.FitSpec(["T"], fixed)
    fixed["B_rec"] = 0.1
    assert spec.fixed["B_rec"] == 0.8


def test_repr_names_only_what_was_given():
    assert repr(cmr.FitSpec(["B_enc", "T"])) == "FitSpec(free=('B_enc', 'T'))"
    spec = cmr.FitSpec(["T"], tied={"B_rec": "B_enc"}, pool_size=30)
    assert repr(spec) == "FitSpec(free=('T',), tied={'B_rec': 'B_enc'}, pool_size=30)"
    patterns = cmr.item_patterns(["a", "b", "c"], np.eye(3))
    assert "patterns=<3 items: similarity>" in repr(cmr.FitSpec(["Sff"], patterns=patterns))


def test_spec_raises_the_fitters_errors_when_made():
    with pytest.raises(ParameterError, match="both free and fixed"):
        cmr.FitSpec(["T"], fixed={"T": 0.2})
    with pytest.raises(ParameterError, match="unknown"):
        cmr.FitSpec(["gamma"])
    with pytest.raises(ParameterError, match="free parameters must be distinct"):
        cmr.FitSpec(["T", "T"])
    with pytest.raises(ParameterError, match="search bounds for CMR parameter T"):
        cmr.FitSpec(["T"], bounds={"T": (0.5, 0.1)})
    with pytest.raises(ParameterError, match="tied and also free"):
        cmr.FitSpec(["T", "B_rec"], tied={"B_rec": "B_enc"})
    with pytest.raises(ParameterError, match="need item patterns"):
        cmr.FitSpec(["Sff"])
    with pytest.raises(RecallDataError, match="patterns must come from cmr.item_patterns"):
        cmr.FitSpec(["T"], patterns={"a": 1})
    with pytest.raises(RecallDataError, match="pool_size must be an integer >= 1"):
        cmr.FitSpec(["T"], pool_size=0)
    with pytest.raises(RecallDataError, match="must be left out or equal the item pool's size"):
        cmr.FitSpec(["T"], patterns=cmr.item_patterns(["a", "b"], np.eye(2)), pool_size=3)


def test_pool_size_below_the_longest_list_is_found_with_the_data(events):
    with pytest.raises(RecallDataError, match="longest list"):
        cmr.fit_recall(events, cmr.FitSpec(["T"], pool_size=3), progress=False)


def test_deprecated_fit_recall_arguments_give_the_same_fit(events):
    options = dict(rng=3, progress=False, de_options=FAST_DE, polish=False)
    spec = cmr.FitSpec(["T"], {"B_rec": 0.8}, {"T": (0.05, 0.6)}, tied={"B_enc": "B_rec"}, pool_size=8)
    with pytest.warns(FitWarning, match="T at its upper bound 0.6 for subject a"):  # its maximum: T beyond 0.6
        new = cmr.fit_recall(events, spec, **options)
    with pytest.warns(DeprecationWarning, match="FitSpec") as record:
        old = cmr.fit_recall(events, ["T"], {"B_rec": 0.8}, {"T": (0.05, 0.6)}, tied={"B_enc": "B_rec"},
                             pool_size=8, **options)
    assert record[0].filename == __file__  # the warning points at the caller's line
    same_fit(new, old)
    with pytest.warns(DeprecationWarning, match="fit_recall's arguments free, fixed"):
        by_keyword = cmr.fit_recall(events, free=["T"], fixed={"B_rec": 0.8}, bounds={"T": (0.05, 0.6)},
                                    tied={"B_enc": "B_rec"}, pool_size=8, **options)
    same_fit(new, by_keyword)


def test_deprecated_cross_validate_arguments_give_the_same_result(events):
    options = dict(n_folds=2, rng=1, progress=False, de_options=FAST_DE, polish=False)
    new = cmr.cross_validate(events, cmr.FitSpec(["B_enc"], fixed={"T": 0.2}), **options)
    with pytest.warns(DeprecationWarning, match="FitSpec"):
        old = cmr.cross_validate(events, ["B_enc"], {"T": 0.2}, **options)
    same_fit(new, old)


def test_deprecated_parameter_recovery_arguments_give_the_same_result():
    options = dict(list_length=6, n_lists=4, rng=1, progress=False, de_options=FAST_DE)
    new = cmr.parameter_recovery(2, cmr.FitSpec(["B_enc"], {"T": 0.3}, tied={"B_rec": "B_enc"}),
                                 ranges={"B_enc": (0.3, 0.5)}, **options)
    with pytest.warns(DeprecationWarning, match="FitSpec"):
        old = cmr.parameter_recovery(2, ["B_enc"], {"T": 0.3}, {"B_enc": (0.3, 0.5)}, tied={"B_rec": "B_enc"},
                                     **options)
    same_fit(new, old)
    with pytest.raises(TypeError, match="multiple values for argument 'ranges'"):
        with pytest.warns(DeprecationWarning):
            cmr.parameter_recovery(2, ["B_enc"], {"T": 0.3}, {"B_enc": (0.3, 0.5)}, ranges={}, **options)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bounds'"):
        cmr.parameter_recovery(2, bounds={"T": (0.1, 0.2)}, **options)


def test_spec_and_separate_arguments_together_are_refused(events):
    spec = cmr.FitSpec(["T"])
    with pytest.raises(ParameterError, match="got spec and also tied"):
        cmr.fit_recall(events, spec, tied={"B_rec": "B_enc"}, progress=False)
    with pytest.raises(ParameterError, match="got spec and also fixed"):
        cmr.cross_validate(events, spec, {"B_rec": 0.5}, progress=False)
    with pytest.raises(ParameterError, match="got spec and also patterns"):
        cmr.parameter_recovery(2, spec, patterns=None, progress=False)


def test_unknown_surplus_and_repeated_arguments_are_type_errors(events):
    with pytest.raises(TypeError, match="unexpected keyword argument 'frees'"):
        cmr.fit_recall(events, frees=["T"])
    with pytest.raises(TypeError, match="at most 4 positional arguments; got 5"):
        cmr.fit_recall(events, ["T"], {}, {}, {})
    with pytest.raises(TypeError, match="multiple values for argument 'fixed'"):
        cmr.fit_recall(events, ["T"], {}, fixed={})


def test_the_command_line_and_recovery_use_no_deprecated_path(events, tmp_path):
    from icl_cmr.analyses.cli import main

    csv = tmp_path / "data.csv"
    to_table(events).to_csv(csv, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("ignore", FitWarning)  # a tiny recovery's flags are not what this checks
        assert main(["fit-recall", str(csv), "--free", "T", "--tie", "B_rec=B_enc", "--bounds", "T=0.05:0.5",
                     "--no-progress", "-o", str(tmp_path / "fits.nc")]) == 0
        recovered = cmr.parameter_recovery(2, cmr.FitSpec(["T"], pool_size=9), list_length=5, n_lists=3,
                                           progress=False, de_options=FAST_DE)
    assert json.loads(recovered.attrs["provenance"])["pool_size"] == 9
