"""The environment the suite runs in: which warnings fail a test, and what a user's command does with a library's."""
from __future__ import annotations

import warnings

import pytest

from tests.conftest import require


def test_our_warnings_fail_a_test_and_a_library_warning_does_not():
    # pytest installs the filters of pyproject.toml around every test; warn_explicit names the module
    for module in ("cmr.profile_fit", "icl_cmr.adapters.published", "tests.unit.test_environment"):
        with pytest.raises(UserWarning):
            warnings.warn_explicit("ours", UserWarning, "ours.py", 1, module=module)
        with pytest.raises(RuntimeWarning):  # numpy's warnings inside our code count as ours
            warnings.warn_explicit("invalid value", RuntimeWarning, "ours.py", 1, module=module)
    for module, category in [("transformers.generation.utils", UserWarning),
                             ("transformer_lens.model_bridge", RuntimeWarning),
                             ("cmrx", UserWarning),  # a library whose name only starts like ours
                             ("icl_cmr.adapters.interventions", FutureWarning),  # a library's notice at our line
                             ("cmr.io", DeprecationWarning)]:
        warnings.warn_explicit(f"{module} {category.__name__}", category, "lib.py", 1, module=module)  # no raise


def test_a_library_deprecation_never_fails_a_users_command(tmp_path, monkeypatch):
    require("psifr")  # the command reads psifr's bundled data
    import cmr
    from icl_cmr.analyses.cli import main

    spc = cmr.spc

    def noisy(*args, **kwargs):
        warnings.warn("`x` is deprecated and will be removed in version 9", FutureWarning, stacklevel=2)
        warnings.warn("`y` is deprecated", DeprecationWarning, stacklevel=2)
        return spc(*args, **kwargs)

    monkeypatch.setattr(cmr, "spc", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as a user's PYTHONWARNINGS=error
        assert main(["spc", "psifr:Morton2013", "-o", str(tmp_path / "spc.csv")]) == 0
    assert (tmp_path / "spc.csv").is_file()
