"""The exceptions of simple_pmu: one hierarchy, rooted in simple_pmu.Error.

    Error                     every error simple_pmu raises on purpose; .code is stable
    +- UsageError             a bad argument (also a ValueError)
    +- CounterUnavailable     the counters asked for cannot be used here (also a
    |                         RuntimeError); str() says why, .reasons are the reasons
    +- CounterFault           a guarded counter read faulted (SIGILL/SIGSEGV): user
    |                         access is off on this CPU (also an OSError; .signal)
    +- PerfError              perf_event_open() failed (also an OSError; .errno)

The C extension raises CounterFault and CounterUnavailable from this module (it imports
it when it loads), so `except simple_pmu.CounterFault` catches exactly the faulting
reads, with or without the extension, and never an unrelated OSError. This module needs
the standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence


class Error(Exception):
    """Base of every simple_pmu error. code: a stable identifier (docs/simple-pmu.1)."""

    code = "error"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        # A reasons.Reason as the message brings its own code.
        code = getattr(args[0], "code", None) if args else None
        if isinstance(code, str):
            self.code = code


class UsageError(Error, ValueError):
    """A bad argument: unknown backend, count below 1, ..."""

    code = "usage"


class CounterUnavailable(Error, RuntimeError):
    """The requested counters cannot be used here; str() says why.

    code: the code of the first reason (or "counter_unavailable"); reasons: every
    reason (reasons.Reason: str with .code) when there are several."""

    code = "counter_unavailable"

    def __init__(self, message: str, code: str | None = None,
                 reasons: Sequence[str] = ()) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.reasons: tuple[str, ...] = tuple(reasons)
        # For each reason, the backends that have it (when the reasons are grouped).
        self.backends: tuple[tuple[str, ...], ...] = ()


class CounterFault(Error, OSError):
    """A guarded counter read faulted: user access to the counters is off on this CPU
    (module not loaded, or on arm64 perf used the PMU there less than 2 * recheck_ms
    ago). signal: "SIGILL" (arm64) or "SIGSEGV" (x86)."""

    code = "counter_fault"
    signal: str = ""


class PerfError(Error, OSError):
    """perf_event_open() failed: errno is the kernel's, str() the reason in full."""

    code = "perf_open_failed"

    def __init__(self, event: str, err: int, reason: str) -> None:
        super().__init__(err, reason)
        self.event = event
        self.reason = reason

    def __reduce__(self) -> tuple[type[PerfError], tuple[str, int, str]]:
        # OSError pickles its (errno, strerror) args; this class takes three.
        return type(self), (self.event, self.errno or 0, self.reason)

    def __str__(self) -> str:
        return self.reason
