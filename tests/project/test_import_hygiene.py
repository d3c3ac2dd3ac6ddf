"""`import cmr` is the standalone modelling toolkit: no torch, transformer_lens or matplotlib, no kernel compiled."""
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

FORBIDDEN = ("torch", "transformer_lens", "transformers", "matplotlib", "icl_cmr", "adapters", "analyses")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_import_cmr_gives_the_flat_api_without_heavy_or_upper_layer_modules():
    code = (
        "import sys, json, cmr\n"
        "cmr.lag_crp, cmr.fit_recall, cmr.fit_profiles, cmr.spc\n"
        f"print(json.dumps(sorted(m for m in {FORBIDDEN!r} if m in sys.modules)))"
    )
    assert json.loads(_run(code)) == []


def test_every_cmr_module_imports_without_heavy_modules():
    code = (
        "import sys, json, pkgutil, importlib, cmr\n"
        "for m in pkgutil.walk_packages(cmr.__path__, 'cmr.'):\n"
        "    importlib.import_module(m.name)\n"
        f"print(json.dumps(sorted(m for m in {FORBIDDEN!r} if m in sys.modules)))"
    )
    assert json.loads(_run(code)) == []


def test_importing_cmr_compiles_no_kernel():
    # kernels without explicit signatures compile (or load their cache) on first call, so the
    # import stays cheap; its time is a benchmark (`icl-cmr bench import-cmr`), not a test
    code = (
        "import sys, json, pkgutil, importlib, cmr\n"
        "from numba.core.dispatcher import Dispatcher\n"
        "for m in pkgutil.walk_packages(cmr.__path__, 'cmr.'):\n"
        "    importlib.import_module(m.name)\n"
        "kernels = {f'{name}.{attr}': bool(value.signatures) for name, module in list(sys.modules.items())\n"
        "           if name == 'cmr' or name.startswith('cmr.') for attr, value in vars(module).items()\n"
        "           if isinstance(value, Dispatcher)}\n"
        "print(json.dumps(kernels))"
    )
    kernels = json.loads(_run(code))
    assert kernels, "no numba kernel found in cmr"
    assert [name for name, compiled in kernels.items() if compiled] == []


LM_MODULES = ["icl_cmr.adapters.lm"] + sorted(
    f"icl_cmr.adapters.lm.{path.stem}" for path in (REPO_ROOT / "adapters" / "lm").glob("*.py") if path.stem != "__init__")


@pytest.mark.parametrize("module", ["icl_cmr.adapters", "icl_cmr.analyses", "icl_cmr.analyses.cli", *LM_MODULES])
def test_upper_layers_import_without_torch(module):
    code = f"import sys, {module}; print('torch' in sys.modules)"
    assert _run(code) == "False"


def test_the_command_line_parser_loads_no_heavy_library():
    """``icl-cmr --help`` builds every subcommand's parser: the commands' module-level imports stay
    light (heavy libraries load inside the function that runs a command)."""
    heavy = ("torch", "transformers", "transformer_lens", "matplotlib", "scipy.stats", "dask.distributed")
    code = (
        "import sys, json\n"
        "from icl_cmr.analyses.cli import build_parser\n"
        "build_parser()\n"
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))"
    )
    assert json.loads(_run(code)) == []


def test_the_upper_layers_live_under_one_namespace():
    code = (
        "import json, importlib.util\n"
        "print(json.dumps([importlib.util.find_spec(n) is not None for n in ('icl_cmr.adapters', 'icl_cmr.analyses')]))"
    )
    assert json.loads(_run(code)) == [True, True]
