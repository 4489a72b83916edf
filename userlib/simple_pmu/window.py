"""Window: raw counter reads at the bare instruction's cost, validated at the edges.

    with simple_pmu.Window() as w:         # scope "thread" (perf) or "cpu" (the module)
        a = w.cycles()                     # raw values: one rdpmc / mrs each
        work()
        b = w.cycles()
    if w.valid:
        n = w.delta(a, b)                  # b - a modulo the counter's width

    w = simple_pmu.Window(scope="cpu")     # the same without a with block
    w.begin()                              # CounterUnavailable if none can begin now
    ...
    result = w.end()                       # WindowResult: valid, exact, path, reason

This is include/cycles.h's window API (cycles_window_begin/read/end/delta), through the
extension: begin() resolves the path, the counters and their sequence once; a read is
the bare instruction; end() checks that nothing moved (perf's mmap page `lock`
unchanged; on the module path the same CPU, the same generation, no fault) and says
valid or invalid with the reason. Reads are raw: only differences within one valid
window mean anything, and delta() refuses (CounterUnavailable, code window_invalid)
rather than give a difference from an invalid window. An invalid window is normal
(perf multiplexed, the thread was moved): begin another.

A window belongs to the thread that begins it (cycles.h's per-thread perf events and
fault guard) and to its process: reads in another thread or a forked child raise; in a
child, end() says invalid. Each thread, and a forked child, gets its own events on its
first window (cycles.h sets them up lazily, per thread, again after fork()).

Scope "thread" counts this thread with perf self-monitoring (x86 rdpmc at 1; arm64
>= 5.17 with kernel.perf_user_access=1); where perf grants no user reads cycles.h falls
back to the module if it is usable (WindowResult.path says so), else there is no window
(begin() says why: only perf read(2) is possible). Scope "cpu" counts this CPU with the
simple-pmu module's counters: pin the thread first (os.sched_setaffinity), or the window
is invalid as soon as it moves; exact on arm64 >= 5.17, advisory elsewhere
(WindowResult.exact False), and advisory too where this thread had perf events with user
reads open meanwhile (its own scope "thread" state, measure(), Counters: perf then grants
the thread the counters itself) or was switched out inside the window (the CPU's counts
then hold the other tasks' work). While a scope "thread" window is open, its thread cannot
use scope "cpu" (begin(), measure(scope="cpu")): CounterUnavailable says so; end it first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from simple_pmu import perf, reasons
from simple_pmu._extension import native, native_error
from simple_pmu.errors import CounterUnavailable, UsageError
from simple_pmu.reasons import Reason

SCOPES = {"thread": 0, "cpu": 1}
VALID, EXACT = 0x1, 0x2  # cycles.h's CYCLES_VALID, CYCLES_EXACT
MODULE_PATH = 3  # cycles.h's CYCLES_PATH_MODULE
COUNTERS = ("cycles", "instructions")


class NativeWindow(Protocol):
    """What Window needs of _native.Window (tests give a fake one)."""

    def begin(self) -> bool: ...
    def cycles(self) -> int: ...
    def instructions(self) -> int: ...
    def end(self) -> int: ...
    def delta(self, counter: str, first: int, second: int, /) -> int: ...
    def info(self) -> dict[str, int | str]: ...


@dataclass(frozen=True)
class WindowResult:
    """What end() found: valid (the reads belong together), exact (the count is exactly
    the work's: perf, or the module on arm64 >= 5.17), the path read, and why not."""

    valid: bool
    exact: bool
    scope: str
    path: str
    reason: Reason | None = None  # None when valid


class Window:
    """A window of raw reads on this thread's path of scope ("thread" or "cpu").

    cycles() and instructions() are the extension's own methods (no Python frame in
    between); instructions() is 0 where the path has no instructions counter."""

    cycles: Callable[[], int]
    instructions: Callable[[], int]

    def __init__(self, scope: str = "thread", *, _native: NativeWindow | None = None
                 ) -> None:
        if scope not in SCOPES:
            raise UsageError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
        if _native is None:
            if native is None:
                raise CounterUnavailable(native_error, reasons.NO_NATIVE.code)
            _native = native.Window(SCOPES[scope])
        self.scope = scope
        self._w = _native
        self.cycles = _native.cycles
        self.instructions = _native.instructions
        self.result: WindowResult | None = None  # set by end()
        self._open = False
        self._user_reads = (0, 0)

    def begin(self) -> Window:
        """Begin; CounterUnavailable (code window_not_begun) if no window can begin now."""
        if self._open:
            raise UsageError("Window.begin: this window is open; end() it first")
        self.result = None
        self._user_reads = perf.user_reads_token()
        if not self._w.begin():
            info = self._w.info()
            why = reasons.WINDOW_NOT_BEGUN.format(scope=self.scope, path=info["path_name"],
                                                  why=info["reason"])
            self.result = WindowResult(False, False, self.scope, str(info["path_name"]), why)
            raise CounterUnavailable(why, why.code, (why,))
        self._open = True
        return self

    def end(self) -> WindowResult:
        """End the window (a second end() returns the same result)."""
        if not self._open:
            if self.result is None:
                raise UsageError("Window.end: begin() first")
            return self.result
        flags = self._w.end()
        self._open = False
        info = self._w.info()
        path = str(info["path_name"])
        if flags & VALID:
            # The module path beside this thread's own perf user reads: not exact
            # (cycles.h sees only its own events; see _measure.PERF_USER_READS_ADVISORY).
            exact = bool(flags & EXACT) and not (
                info.get("path") == MODULE_PATH
                and perf.user_reads_between(self._user_reads, perf.user_reads_token()))
            self.result = WindowResult(True, exact, self.scope, path)
        else:
            why = reasons.WINDOW_INVALID.format(scope=self.scope, path=path,
                                                why=info["reason"] or "cycles.h said so")
            self.result = WindowResult(False, False, self.scope, path, why)
        return self.result

    @property
    def valid(self) -> bool:
        """The window ended and held (False while open, and after a failed begin)."""
        return self.result is not None and self.result.valid

    def delta(self, first: int, second: int, counter: str = "cycles") -> int:
        """second - first of two reads of counter in this window, modulo its width.
        UsageError while the window is open; CounterUnavailable if it is invalid."""
        if counter not in COUNTERS:
            raise UsageError(f"counter {counter!r} is not one of {', '.join(COUNTERS)}")
        if self._open or self.result is None:
            raise UsageError(reasons.WINDOW_OPEN.format())
        why = self.result.reason
        if not self.result.valid:
            assert why is not None
            raise CounterUnavailable(why, why.code, (why,))
        return self._w.delta(counter, first, second)

    def info(self) -> dict[str, int | str]:
        """The path, CPU, generation, counter indices and widths cycles.h resolved."""
        return self._w.info()

    def __enter__(self) -> Window:
        return self.begin()

    def __exit__(self, typ: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.end()


__all__ = ["Window", "WindowResult"]
