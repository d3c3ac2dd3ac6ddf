"""The layout holds: no import cycles, no private names across modules, layers in one direction,
imports inside the upper layers relative and at module level, the command line alone parsing
arguments, library defaults in the library.

Read from the source with ``ast`` (lazy imports inside functions count: a cycle through a
function-level import is still two modules that need each other; so does ``importlib.import_module``
of a literal name, or of an f-string whose literal prefix names modules).
"""
from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# repository folder -> installed package name
PACKAGES = {"cmr": "cmr", "adapters": "icl_cmr.adapters", "analyses": "icl_cmr.analyses", "data": "icl_cmr.data"}
HEAVY_LM = ("torch", "transformer_lens", "transformers", "tokenizers", "gguf")
# the one adapters folder whose modules may import torch, transformers and TransformerLens
LM_PACKAGE = "icl_cmr.adapters.lm"


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The parsed module (parsed once for every check; the trees are only read)."""
    return ast.parse(path.read_text(), filename=str(path))


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _imports(name: str, path: Path, with_alias: bool = False):
    """(imported module, imported name or None, line[, bound name]) for every import of a module."""
    tree = _tree(path)
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                yield (target, None, node.lineno, bound) if with_alias else (alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                bound = alias.asname or alias.name
                yield (source, alias.name, node.lineno, bound) if with_alias else (source, alias.name, node.lineno)


def _dynamic_imports(path: Path):
    """(module name or prefix, is_prefix, line) of every ``import_module("...")`` / ``import_module(f"...{x}")``."""
    for node in ast.walk(_tree(path)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called != "import_module":
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            yield arg.value, False, node.lineno
        elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
            yield arg.values[0].value, True, node.lineno


def _edges():
    """Internal import edges: module -> imported internal module (submodule when it is one); an
    ``import_module`` of an f-string is an edge to every module its literal prefix can name."""
    edges = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for source, item, _ in _imports(name, path):
            target = f"{source}.{item}" if item and f"{source}.{item}" in MODULES else source
            if target in MODULES and target != name:
                edges[name].add(target)
        for target, is_prefix, _ in _dynamic_imports(path):
            found = {m for m in MODULES if m.startswith(target)} if is_prefix else {target} & set(MODULES)
            edges[name] |= found - {name}
    return edges


def _cycles(edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return result


def test_the_scan_sees_the_whole_package():
    assert {"cmr", "cmr.crp", "cmr.textbook.likelihood", "icl_cmr.adapters.lm.loading",
            "icl_cmr.analyses.cli"} <= set(MODULES)


def test_no_import_cycles():
    assert _cycles(_edges()) == []


def test_the_cycle_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_dynamic_imports_are_edges(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import importlib\nfrom importlib import import_module\n"
                    "def f(name):\n    importlib.import_module('icl_cmr.analyses.cli')\n"
                    "    return import_module(f'icl_cmr.analyses.commands.{name}')\n")
    assert list(_dynamic_imports(path)) == [("icl_cmr.analyses.cli", False, 4),
                                            ("icl_cmr.analyses.commands.", True, 5)]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_imported_across_modules():
    offences = []
    for name, path in MODULES.items():
        for source, item, line in _imports(name, path):
            if source is None or source.split(".")[0] not in ("cmr", "icl_cmr"):
                continue
            if item and _private(item) and f"{source}.{item}" not in MODULES:
                offences.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {item} from {source}")
        # attribute access to a private name of an imported internal module: module._name
        tree = _tree(path)
        aliases = {}
        for source, item, _, bound in _imports(name, path, with_alias=True):
            full = f"{source}.{item}" if item else source
            if full in MODULES:
                aliases[bound] = full
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                module = aliases.get(node.value.id)
                if module and f"{module}.{node.attr}" not in MODULES:
                    offences.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert offences == []


def _top_level_imports(name, path):
    return {(source or "").split(".")[0] for source, _, _ in _imports(name, path)} | {
        ".".join((source or "").split(".")[:2]) for source, _, _ in _imports(name, path)
    }


def test_layers_point_one_way():
    offences = []
    for name, path in MODULES.items():
        imported = _top_level_imports(name, path)
        if name.startswith("cmr"):
            bad = imported & {"icl_cmr", "matplotlib", *HEAVY_LM}
        elif name.startswith("icl_cmr.adapters"):
            bad = (imported & {"icl_cmr.analyses", "matplotlib"})
            if not (name == LM_PACKAGE or name.startswith(LM_PACKAGE + ".")):
                bad |= imported & set(HEAVY_LM)
        else:
            bad = imported & set(HEAVY_LM)
        if bad:
            offences.append(f"{name} imports {sorted(bad)}")
    assert offences == []


def test_tests_import_the_installed_names_only():
    """A checkout also has top-level folders adapters/ and analyses/: importing them by those
    names would load a second copy of every module (two PromptError classes, ...)."""
    offences = []
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        tree = _tree(path)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offences += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in ("adapters", "analyses")]
    assert offences == []


def test_no_module_shares_its_function_name():
    offences = []
    for name, path in MODULES.items():
        last = name.rpartition(".")[2]
        tree = _tree(path)
        if any(isinstance(node, ast.FunctionDef) and node.name == last for node in tree.body):
            offences.append(name)
    assert offences == []


def test_pyproject_lists_every_package():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    packages = {name for name in MODULES if _is_package(name)}
    assert packages - listed == set(), "add these packages to [tool.setuptools] packages"
    assert listed - packages == set()
    for package, folder in config["package-dir"].items():
        assert (REPO_ROOT / folder).is_dir(), package


@pytest.mark.parametrize("name", ["lag_crp", "spc", "pnr", "pfr", "lag_crp_compound", "lag_rank", "from_table",
                                  "to_table", "from_recall_matrix", "log_likelihood", "simulate_free_recall",
                                  "fit_recall", "fit_profiles", "paper_mc_grid", "paper_teacher_forced_grid",
                                  "textbook_teacher_forced_grid", "save_dataset", "load_dataset", "unit_table",
                                  "to_dataframe"])
def test_the_flat_api_names_every_concept(name):
    import cmr

    assert name in cmr.__all__ and callable(getattr(cmr, name))


def test_every_name_of_the_flat_api_exists():
    import cmr

    assert [name for name in cmr.__all__ if not hasattr(cmr, name)] == []


COMMANDS_PACKAGE = "icl_cmr.analyses.commands"
SHARED_COMMAND_MODULES = {COMMANDS_PACKAGE, f"{COMMANDS_PACKAGE}.options"}


def test_commands_never_import_each_other():
    """A command module imports only the shared options among the commands: what two commands share
    is a library function or an option of ``commands/options.py``."""
    offences = []
    for name, path in MODULES.items():
        if not name.startswith(COMMANDS_PACKAGE + ".") or name in SHARED_COMMAND_MODULES:
            continue
        for source, item, line in _imports(name, path):
            target = f"{source}.{item}" if item and f"{source}.{item}" in MODULES else source
            if (target or "").startswith(COMMANDS_PACKAGE) and target not in SHARED_COMMAND_MODULES:
                offences.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {target}")
    assert offences == []


# the layers: a private module path (a component starting with "_") is shared inside its layer only
LAYERS = ("cmr", "icl_cmr.adapters", "icl_cmr.analyses", "icl_cmr.data")


def _layer(name: str) -> str:
    return next(layer for layer in LAYERS if name == layer or name.startswith(layer + "."))


def _imported_module(source: str, item: str | None) -> str:
    return f"{source}.{item}" if item and f"{source}.{item}" in MODULES else source


def test_the_upper_layers_import_their_own_modules_relatively():
    """Inside ``icl_cmr`` every import of ``icl_cmr`` is relative (``from ..causal import ...``):
    an absolute one, ``from icl_cmr.x import y`` or ``import icl_cmr.x``, fails."""
    offences = []
    for name, path in MODULES.items():
        if not name.startswith("icl_cmr"):
            continue
        for node in ast.walk(_tree(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offences += [f"{path.relative_to(REPO_ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] == "icl_cmr"]
    assert offences == []


def test_no_private_module_is_imported_from_another_layer():
    """``from cmr._x import y`` in ``icl_cmr.adapters`` fails: what an upper layer needs has a public home
    (``cmr.jit``, ``icl_cmr.adapters.lm.loading.DEFAULT_MODEL``); inside one layer private modules are shared."""
    offences = []
    for name, path in MODULES.items():
        for source, item, line in _imports(name, path):
            if not source or source.split(".")[0] not in ("cmr", "icl_cmr"):
                continue
            target = _imported_module(source, item)
            if target not in MODULES or _layer(target) == _layer(name):
                continue
            private = [part for part in target[len(_layer(target)):].split(".") if _private(part)]
            if private:
                offences.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {target}")
    assert offences == []


# where a function may import a product module or a library: the command modules and the command
# line (a command's libraries load when it runs, so `icl-cmr --help` stays fast) and the language-model
# adapters (torch and the model libraries; tests/project/test_import_hygiene.py imports every lm module
# without torch)
LAZY_PLACES = ("icl_cmr.analyses.commands", "icl_cmr.analyses.cli", "icl_cmr.adapters.lm")
# libraries any module of icl_cmr may import inside a function: heavy (the model libraries,
# matplotlib and its cycler, dask, scipy's submodules: scipy.stats alone loads some 500 modules, which
# `icl-cmr --help` does not need), the reference implementations benchmarks and bundled data sets read
# (psifr, cymr), optional ones (h5py) and one platform's (resource)
LAZY_LIBRARIES = {"torch", "transformers", "transformer_lens", "tokenizers", "gguf", "matplotlib", "cycler", "dask",
                  "distributed", "scipy", "psifr", "cymr", "h5py", "resource"}


def _lazy(name: str) -> bool:
    return any(name == place or name.startswith(place + ".") for place in LAZY_PLACES)


def _function_level_imports(path: Path):
    """(imported top-level name, line) of every import inside a function, outside ``try`` (an
    optional dependency's fallback); relative imports give ``"."``."""
    tree = _tree(path)
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        guarded = {id(n) for t in ast.walk(function) if isinstance(t, ast.Try) for s in t.body for n in ast.walk(s)}
        for node in ast.walk(function):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Import):
                yield from ((alias.name.split(".")[0], node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                yield ("." if node.level else (node.module or "").split(".")[0]), node.lineno


def test_functions_import_only_heavy_libraries_outside_the_commands_and_lm():
    """Product modules (``cmr``, relative ``icl_cmr``) and light libraries are imported at module level;
    inside a function only where a heavy dependency needs it (:data:`LAZY_PLACES`, :data:`LAZY_LIBRARIES`)."""
    offences = []
    for name, path in MODULES.items():
        if not name.startswith("icl_cmr") or _lazy(name):
            continue
        for imported, line in _function_level_imports(path):
            if imported not in LAZY_LIBRARIES:
                offences.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {imported} inside a function")
    assert offences == []


def test_the_lazy_import_scan_sees_function_level_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import json\ndef f():\n    from . import x\n    import torch\n    try:\n        import h5\n"
                    "    except ImportError:\n        pass\n")
    assert list(_function_level_imports(path)) == [(".", 3), ("torch", 4)]


def test_only_the_command_line_parses_arguments():
    """argparse belongs to ``analyses/cli.py`` and ``analyses/commands/``: a library module of the upper
    layers takes its options as arguments."""
    offences = []
    for name, path in MODULES.items():
        if not name.startswith("icl_cmr") or name == "icl_cmr.analyses.cli" or name.startswith(COMMANDS_PACKAGE):
            continue
        for source, item, line in _imports(name, path):
            if (source or "").split(".")[0] == "argparse":
                offences.append(f"{path.relative_to(REPO_ROOT)}:{line} imports argparse")
    assert offences == []


def _defaults_tables(path: Path) -> list[str]:
    """Module-level defaults tables: a name with DEFAULT or PRESET bound to a dict, list, tuple or set,
    or any name bound to ``dict(key=value, ...)`` (a table of option values)."""
    found = []
    for node in _tree(path).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        value = node.value
        container = isinstance(value, (ast.Dict, ast.List, ast.Tuple, ast.Set))
        keyword_table = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
            and bool(value.keywords)
        for target in names:
            if keyword_table or (container and any(word in target.upper() for word in ("DEFAULT", "PRESET"))):
                found.append(f"{target} (line {node.lineno})")
    return found


def test_no_defaults_table_lives_under_commands():
    """Library defaults (option values, presets) belong to the library module that uses them; a
    command reads them from there, so the library and the command line cannot disagree."""
    offences = {}
    for name, path in MODULES.items():
        if name.startswith(COMMANDS_PACKAGE + ".") and (tables := _defaults_tables(path)):
            offences[name] = tables
    assert offences == {}


def test_the_defaults_table_scan_finds_tables(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("_DEFAULTS = dict(n=6)\nSTUDY_PRESETS = {'cpu': 1}\nCHOICES = ('a', 'b')\nHELP = 'x'\n")
    assert _defaults_tables(path) == ["_DEFAULTS (line 1)", "STUDY_PRESETS (line 2)"]
