"""cmr.io.output_lock(wait=...): a second writer may wait for the first instead of failing at once."""
import subprocess
import sys
import textwrap
import time

import pytest

from cmr.errors import OutputError
from cmr.io import output_lock

pytest.importorskip("fcntl")


def test_a_busy_lock_fails_at_once_or_is_waited_for(tmp_path):
    target = tmp_path / "out.nc"
    held, done = tmp_path / "held", tmp_path / "done"
    script = textwrap.dedent(f"""
        import pathlib, time
        from cmr.io import output_lock

        with output_lock(pathlib.Path({str(target)!r})):
            pathlib.Path({str(held)!r}).touch()
            time.sleep(1.5)
            pathlib.Path({str(done)!r}).touch()
    """)
    holder = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not held.exists():
            if holder.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the holding process did not take the lock")
            time.sleep(0.05)
        with pytest.raises(OutputError, match="another process is writing"):
            with output_lock(target):
                pass
        with output_lock(target, wait=60):
            assert done.exists()  # the holder finished before the lock came to us
    finally:
        assert holder.wait(timeout=60) == 0
    assert not (tmp_path / ".out.nc.lock").exists()
