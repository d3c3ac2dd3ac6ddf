"""One name per idea and options by keyword, across the public API of every package.

The public API: every module-level function of a public module (no path component starting with
``_``; the CLI's ``commands`` and ``cli`` are not API) and the methods of its public classes,
read through ``inspect.signature`` (which follows ``__wrapped__``, so a deprecation wrapper shows
the function's own signature). A dataclass's generated ``__init__`` is left out: its parameters
are the fields.

Two rules:

1. A source of randomness is called ``rng`` (an int seed, a numpy Generator or None, as in
   Scientific Python SPEC 7); no public function takes ``seed``, ``random_state`` or ``random_seed``.
2. Options are keyword-only: every parameter with a default comes after ``*``, except a
   function's first parameter (the data, when it has a default: ``load_model(name=DEFAULT_MODEL)``)
   and the few functions in :data:`ALLOWED`, each with the reason its defaulted argument is data.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

#: the packages whose public API is checked
PACKAGES = ("cmr", "icl_cmr.adapters", "icl_cmr.analyses")
SEED_NAMES = {"seed", "random_state", "random_seed"}

_DATA_AFTER_DATA = "a second data argument with a neutral default, not a setting"
_CHECK_HELPER = "an argument check read as a sentence: integer(value, 'n_lists', 1)"
#: function -> why a parameter with a default may be passed by position
ALLOWED = {
    # the grid's three axes are the data (pinned positional in tests/cmr/test_names.py)
    "cmr.paper_mc_grid": "the grid's axes beta_enc, beta_rec, gamma are the data",
    "cmr.paper_teacher_forced_grid": "the grid's axes beta_enc, beta_rec, gamma are the data",
    # the model fitted (or recovered) is the second data argument: fit_recall(events, spec)
    "cmr.fit_recall": "the model spec fitted is data",
    "cmr.fit_cmr2": "the model spec fitted is data",
    "cmr.fit_network": "the model spec fitted is data (the old model keywords handled in the body)",
    "cmr.fit_population": "the model spec fitted is data",
    "cmr.cross_validate": "the model spec fitted is data",
    "cmr.parameter_recovery": "the model spec recovered is data (old positional options handled in the body)",
    "cmr.cmr2.fit.session_objective": "the model spec fitted is data",
    "cmr.compare_models": "the cross-validated fits compared are data",
    "cmr.comparison_spec": "the item patterns of the semantic variants are data",
    "cmr.item_patterns": "the similarity matrix and features are the patterns (data)",
    "cmr.testing.spacing.simulate_first_weighted": "the generating parameters are data",
    "cmr.testing.PlainCMR.log_likelihood": "the presentation order is data (psifr's pres_itemnos)",
    "cmr.testing.PlainCMR.sequence_probabilities": "the presentation order is data",
    "cmr.testing.repeated.ReferenceNetwork.__init__": "the item pool and its similarity are data",
    "cmr.from_recall_matrix": "subject, list and study items label the recall matrix (data)",
    "cmr.context_decay": "the model named selects the formula (the deprecated 'variant' name is tested)",
    # the kind a dataset is read or checked as is part of what is read
    "cmr.load_dataset": "the dataset kind expected names the data read",
    "cmr.validate": "the dataset kind expected names the data checked",
    "cmr.events.as_events": "the analysis named in an error message labels the data",
    # argument checks: the value, its name in the message, its bounds
    "cmr.checks.index": _CHECK_HELPER,
    "cmr.checks.integer": _CHECK_HELPER,
    "cmr.checks.parse_json": _CHECK_HELPER,
    "cmr.files.check_input_file": _CHECK_HELPER,
    "cmr.files.check_hdf5_file": _CHECK_HELPER,
    "cmr.files.read_arrays": _CHECK_HELPER,
    "cmr.similarity.check_similarity": _CHECK_HELPER,
    "icl_cmr.adapters.lm.composition.composition_from_weights": "kv_of_head is the fifth weight factor: "
                                                                + _DATA_AFTER_DATA,
    "icl_cmr.adapters.lm.loading.as_loaded_model": "the tokenizer goes with the model: " + _DATA_AFTER_DATA,
    "icl_cmr.adapters.text_corpus.load_passages": "the tokenizer goes with the source: " + _DATA_AFTER_DATA,
    "icl_cmr.analyses.reproduce.null_shares.benjamini_hochberg": "a deprecated alias keeps its old call for one release",
}


def public_modules(package: str):
    """The package and its public modules, imported (commands and the CLI left out)."""
    root = importlib.import_module(package)
    yield root
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        parts = info.name[len(package) + 1:].split(".")
        if any(part.startswith("_") for part in parts) or parts[0] in ("commands", "cli"):
            continue
        yield importlib.import_module(info.name)


def public_functions(package: str) -> dict[str, object]:
    """Public name -> function, for the public functions and methods of ``package`` defined in it.

    A function is named where it is first found (the package itself first): ``cmr.fit_recall``,
    not the private module that defines it.
    """
    found, seen = {}, set()

    def keep(function, name):
        if inspect.isfunction(function) and (function.__module__ or "").startswith(package) and function not in seen:
            seen.add(function)
            found[name] = function

    for module in public_modules(package):
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            value = vars(module).get(name)
            if inspect.isclass(value) and (value.__module__ or "").startswith(package):
                for attr, member in vars(value).items():
                    if attr.startswith("_") and not (attr == "__init__" and not dataclasses.is_dataclass(value)):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    keep(member, f"{module.__name__}.{name}.{attr}")
            else:
                keep(value, f"{module.__name__}.{name}")
    return found


def _parameters(function):
    parameters = list(inspect.signature(function).parameters.values())
    if "." in function.__qualname__ and parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]  # a method: its first argument is the instance
    return parameters


def seed_offenders(functions) -> list[str]:
    return sorted(f"{name}({p.name})" for name, function in functions.items()
                  for p in _parameters(function) if p.name in SEED_NAMES)


def positional_option_offenders(functions) -> list[str]:
    out = []
    for name, function in functions.items():
        if name in ALLOWED:
            continue
        positional = [p for p in _parameters(function) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        options = [p.name for p in positional[1:] if p.default is not p.empty]
        if options:
            out.append(f"{name}({', '.join(options)})")
    return sorted(out)


@pytest.fixture(scope="module", params=PACKAGES)
def functions(request):
    return public_functions(request.param)


def test_the_scan_sees_the_public_api(functions):
    assert len(functions) > 100
    assert not [name for name in functions if any(part.startswith("_") and not part.endswith("__")
                                                   for part in name.split("."))]


def test_randomness_is_called_rng(functions):
    assert seed_offenders(functions) == [], "rename to rng (an int seed, a Generator or None)"


def test_options_are_keyword_only(functions):
    assert positional_option_offenders(functions) == [], "put these options after * (cmr.deprecation.keyword_only)"


def test_every_allowed_function_exists_and_still_needs_its_exception():
    everything = {}
    for package in PACKAGES:
        everything.update(public_functions(package))
    stale = [name for name in ALLOWED if name.startswith(PACKAGES) and name not in everything]
    assert stale == []
    unneeded = []
    for name in ALLOWED:
        if name in everything:
            positional = [p for p in _parameters(everything[name]) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if not any(p.default is not p.empty for p in positional[1:]):
                unneeded.append(name)
    assert unneeded == []


def test_the_rules_catch_what_they_are_about():
    """The checks can fail: a seed parameter and a positional option are reported by name."""
    def sample(events, lags=3, *, seed=0):
        return events

    def fine(events=None, *, lags=3, rng=0):
        return events

    functions = {"pkg.sample": sample, "pkg.fine": fine}
    assert seed_offenders(functions) == ["pkg.sample(seed)"]
    assert positional_option_offenders(functions) == ["pkg.sample(lags)"]
