"""Every numba kernel compiles with the one set of settings, cmr.jit.JIT."""
from __future__ import annotations

import ast
from pathlib import Path

from cmr.jit import JIT
from tests.conftest import REPO_ROOT

_SPELLED_OUT = set(JIT)  # settings a decorator must take from JIT, never restate


def _jit_decorators(path: Path):
    """(line, decorator source, keywords) of every ``njit``/``jit`` decorator in a file."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in ("njit", "jit"):
                yield decorator.lineno, ast.unparse(decorator), call.keywords if call else []


def _offences(path: Path, root: Path = REPO_ROOT) -> list[str]:
    found = []
    for line, source, keywords in _jit_decorators(path):
        spelled = [k.arg for k in keywords if k.arg in _SPELLED_OUT]
        uses_jit = any(k.arg is None and ast.unparse(k.value) == "JIT" for k in keywords)
        if spelled or not uses_jit:
            found.append(f"{path.relative_to(root)}:{line} @{source}")
    return found


def _kernel_files() -> list[Path]:
    return [path for folder in ("cmr", "adapters", "analyses") for path in sorted((REPO_ROOT / folder).rglob("*.py"))]


def test_every_kernel_takes_its_settings_from_jit():
    offences = [offence for path in _kernel_files() for offence in _offences(path)]
    assert offences == []


def test_the_scan_sees_the_kernels():
    decorated = sum(1 for path in _kernel_files() for _ in _jit_decorators(path))
    assert decorated > 50


def test_the_scan_refuses_settings_spelled_out(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("from numba import njit\n\n\n@njit(cache=True, nogil=True)\ndef f(x):\n    return x\n\n\n"
                    "@njit\ndef g(x):\n    return x\n\n\n@njit(**JIT, inline='always')\ndef h(x):\n    return x\n")
    assert [offence.split()[0] for offence in _offences(path, tmp_path)] == ["probe.py:4", "probe.py:9"]


def test_the_settings_cache_kernels_and_release_the_gil():
    assert JIT == {"cache": True, "nogil": True}
