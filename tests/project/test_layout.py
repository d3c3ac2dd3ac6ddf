"""The layout holds: no import cycles, no private names across modules, layers in one direction.

Read from the source with ``ast`` (lazy imports inside functions count: a cycle through a
function-level import is still two modules that need each other).
"""
from __future__ import annotations

import ast
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


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _imports(name: str, path: Path, with_alias: bool = False):
    """(imported module, imported name or None, line[, bound name]) for every import of a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
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


def _edges():
    """Internal import edges: module -> imported internal module (submodule when it is one)."""
    edges = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for source, item, _ in _imports(name, path):
            target = f"{source}.{item}" if item and f"{source}.{item}" in MODULES else source
            if target in MODULES and target != name:
                edges[name].add(target)
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
        tree = ast.parse(path.read_text())
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
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offences += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in ("adapters", "analyses")]
    assert offences == []


def test_no_module_shares_its_function_name():
    offences = []
    for name, path in MODULES.items():
        last = name.rpartition(".")[2]
        tree = ast.parse(path.read_text())
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
