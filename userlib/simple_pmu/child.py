"""Try something that may fault (RDPMC, mrs of a PMU register) in a forked child.

probe() reads in-process through the extension's guarded reads; this is its fallback
where a fault cannot be caught in-process (the calling thread blocks SIGSEGV/SIGILL:
the kernel then kills the process whatever its handler; see probe._in_process_safe).
The child runs the call and sends its result back through a pipe; the parent reads the
wait status, so only the child dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

# A child that neither finishes nor dies within this is killed and reported.
DEFAULT_TIMEOUT_S = 10.0
PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class ChildResult:
    ok: bool
    value: object = None  # what the call returned (JSON round trip) when ok
    signal: str | None = None  # "SIGILL", "SIGSEGV", ... when the child was killed
    error: str | None = None  # an exception the call raised, or a non-signal failure

    def describe(self) -> str:
        if self.ok:
            return "ok"
        if self.signal:
            return f"killed by {self.signal}"
        return self.error or "failed"


def run_in_child(call: Callable[[], object], timeout: float = DEFAULT_TIMEOUT_S) -> ChildResult:
    """Run call() in a forked child; its return value must be JSON-serialisable."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's code
        os.close(rfd)
        _no_core_dump()
        status = 0
        try:
            payload = json.dumps({"value": call()})
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent
            payload = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
            status = 1
        try:
            os.write(wfd, payload.encode())
        finally:
            os._exit(status)
    os.close(wfd)
    try:
        waited = _wait(pid, timeout)
        with os.fdopen(rfd, "rb") as pipe:
            data = pipe.read()
    except BaseException:
        _reap(pid)
        raise
    if waited is None:
        return ChildResult(False, error=f"did not finish within {timeout:g} s (killed)")
    status = waited
    if os.WIFSIGNALED(status):
        return ChildResult(False, signal=signal.Signals(os.WTERMSIG(status)).name)
    message = json.loads(data) if data else {}
    if os.WEXITSTATUS(status) == 0 and "value" in message:
        return ChildResult(True, value=message["value"])
    return ChildResult(False, error=message.get(
        "error", f"child exited with status {os.WEXITSTATUS(status)}"))


def _no_core_dump() -> None:
    """A fault we provoke on purpose is no crash: no core file, no fault traceback."""
    faulthandler.disable()
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    # PR_SET_DUMPABLE 0 also stops a core_pattern pipe helper.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            _reap(pid)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
