"""Devices, dtypes, CPU threads and peak memory of a language-model run.

:func:`resolve_device` and :func:`resolve_dtype` check what a user asks for against what torch
can use here; :func:`measure_peak_memory` records the peak memory of a block (the run record of
docs/schema.md); :func:`set_threads` sets torch's CPU threads. torch is imported inside the
functions, so importing this module is cheap.
"""
from __future__ import annotations

import contextlib

from cmr.checks import integer

from ._model_files import DTYPES


def available_devices() -> list[str]:
    """Devices torch can use here: ``"cpu"``, then ``"cuda:0"``, ``"cuda:1"``, ..., then ``"mps"``."""
    import torch

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def resolve_device(device=None) -> str:
    """The device to run on, checked: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, or None/``"auto"``.

    None and ``"auto"`` pick the first CUDA GPU when there is one, else the CPU. ``"cuda"``
    means the current CUDA device. Returns a normalised name (``"cuda"`` -> ``"cuda:0"``).

    Raises
    ------
    cmr.errors.ParameterError
        An unknown or unavailable device; the message lists the available ones.
    """
    import torch
    from cmr.errors import ParameterError

    available = available_devices()
    if device is None or (isinstance(device, str) and device.strip().lower() == "auto"):
        return "cuda:0" if "cuda:0" in available else "cpu"
    try:
        parsed = torch.device(device.strip().lower() if isinstance(device, str) else device)
    except (RuntimeError, TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda", "mps"):
        raise ParameterError(f"device must be cpu, cuda, cuda:N, mps or auto; got {device!r} "
                             f"(available here: {', '.join(available)})")
    if parsed.type == "cuda":
        index = parsed.index
        if index is None and torch.cuda.is_available():
            index = torch.cuda.current_device()
        name = f"cuda:{index}" if index is not None else "cuda"
    else:
        name = parsed.type
    if name not in available:
        raise ParameterError(f"device {str(device)!r} is not available here; available: {', '.join(available)}")
    return name


def resolve_dtype(dtype=None):
    """``"float32"`` (None), ``"bfloat16"``, ``"float16"`` or the torch dtype -> ``(name, torch dtype)``.

    Raises
    ------
    cmr.errors.ParameterError
        Any other dtype; the message lists the supported ones.
    """
    import torch
    from cmr.errors import ParameterError

    if dtype is None:
        dtype = "float32"
    name = str(dtype).removeprefix("torch.") if isinstance(dtype, (str, torch.dtype)) else None
    if name not in DTYPES:
        raise ParameterError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    return name, getattr(torch, name)


def _reset_peak_memory(where) -> bool:
    """Start a new peak: CUDA's counter, or on Linux the process's resident peak (VmHWM)."""
    import torch

    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)
        return True
    if where.type == "cpu":
        try:  # writing 5 resets only the peak-RSS counter that getrusage reports
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
            return True
        except OSError:
            return False
    return False


def _peak_memory(where, reset: bool) -> dict:
    import sys

    import torch

    if where.type == "cuda":
        return {"peak_memory_bytes": int(torch.cuda.max_memory_allocated(where)),
                "peak_memory_measure": f"torch.cuda.max_memory_allocated({where}) during the run"}
    if where.type == "mps":
        return {"peak_memory_bytes": int(torch.mps.driver_allocated_memory()),
                "peak_memory_measure": "torch.mps.driver_allocated_memory() at the end of the run (no peak is kept)"}
    if reset:  # Linux: VmHWM is the peak that clear_refs reset (getrusage also keeps the peaks of exited threads)
        try:
            with open("/proc/self/status") as handle:
                hwm = next(line for line in handle if line.startswith("VmHWM:"))
            return {"peak_memory_bytes": int(hwm.split()[1]) * 1024,
                    "peak_memory_measure": "peak resident memory of the process during the run (VmHWM)"}
        except (OSError, StopIteration, ValueError, IndexError):
            pass
    try:
        import resource
    except ImportError:  # Windows
        return {"peak_memory_bytes": -1, "peak_memory_measure": "not measured (no resource module)"}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    since = "during the run" if reset else "since the process started"
    return {"peak_memory_bytes": int(peak),
            "peak_memory_measure": f"peak resident memory of the process {since} (getrusage ru_maxrss)"}


@contextlib.contextmanager
def measure_peak_memory(device):
    """Measure the peak memory of the block: yields a dict filled on exit.

    Keys ``peak_memory_bytes`` (int; -1 where nothing can be measured) and
    ``peak_memory_measure`` (how). CUDA: ``torch.cuda.max_memory_allocated`` after
    ``reset_peak_memory_stats`` (tensors on that GPU, the weights included). CPU: the peak
    resident memory of the whole process (weights, libraries and data): on Linux ``VmHWM``,
    reset at the start through ``/proc/self/clear_refs``; elsewhere ``resource.getrusage``,
    counted from the start of the process. MPS: torch keeps no peak there, so the memory its driver holds at
    the end. Both resets are process-wide: a measurement inside the block restarts this one.
    """
    import torch

    where = torch.device(device)
    reset = _reset_peak_memory(where)
    record = {}
    yield record
    record.update(_peak_memory(where, reset))


def set_threads(n_threads: int | None) -> int:
    """Set torch's CPU thread count (None keeps torch's choice); return the count in use."""
    import torch

    if n_threads is not None:
        torch.set_num_threads(integer(n_threads, "threads"))
    return int(torch.get_num_threads())
