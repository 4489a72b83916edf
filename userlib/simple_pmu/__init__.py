"""simple_pmu: read the CPU's cycle and instruction counters from Python.

    import simple_pmu
    report = simple_pmu.probe()        # every backend: usable, or exactly why not
    with simple_pmu.measure() as m:    # the best usable backend
        work()
    m.cycles, m.instructions, m.time_ns
    m.scope, m.rings, m.running_ratio  # what the counts cover
    m.ok, m.reason, m.exact            # both counts there; why not; exact or advisory
    with simple_pmu.Counters() as c:   # raw reads: Sample, and Sample - Sample a Delta
        a = c.read(); work(); d = c.read() - a
    with simple_pmu.Window() as w:     # cycles.h's window: bare reads, checked at the end
        a = w.cycles(); work(); b = w.cycles()
    n = w.delta(a, b)                  # only if w.valid (else CounterUnavailable)

Errors: every exception simple_pmu raises on purpose is a simple_pmu.Error (see
simple_pmu.errors): UsageError (a bad argument; also ValueError), CounterUnavailable
(also RuntimeError), CounterFault (a guarded read faulted; also OSError, never a plain
one), PerfError (perf_event_open failed; also OSError). Each has a stable .code.

The counter reads live in the C extension simple_pmu._native, built from
include/cycles.h (simple_pmu.native is that extension, or None where it is missing: see
native_error); the rest is the standard library only.

Modules: the public names are the package's (simple_pmu.probe is the function,
simple_pmu.measure the class); the modules that define them are private (_probe,
_measure, _extension), so no public name is both a module and what it exports.
"""

from simple_pmu._extension import native, native_error
from simple_pmu._measure import Measurement, measure
from simple_pmu._probe import Backend, Report, probe
from simple_pmu.counters import Counters, Delta, Sample
from simple_pmu.errors import (
    CounterFault,
    CounterUnavailable,
    Error,
    PerfError,
    UsageError,
)
from simple_pmu.window import Window, WindowResult

__version__ = "0.1.0"  # the one place: userlib/ and root pyproject.toml read it

KNOWN_LOOP_INSNS_PER_ITER = 2


def known_loop(n: int) -> None:
    """Run a loop of exactly two instructions per iteration n times (n >= 1).

    x86-64: ``1: sub $1, %reg; jnz 1b``; arm64: ``1: subs xN, xN, #1; b.ne 1b``.
    Instructions retired around a call are ``2 * n + C``, C being the same for every n
    (the call path and the counter reads): under exact emulation (QEMU -icount) the
    difference between two calls is exactly ``2 * (n2 - n1)``.
    """
    if native is None:
        raise CounterUnavailable(native_error, "no_native")
    native.known_loop(n)  # ValueError for n < 1: nothing else here, the count is exact


__all__ = [
    "KNOWN_LOOP_INSNS_PER_ITER",
    "Backend",
    "CounterFault",
    "CounterUnavailable",
    "Counters",
    "Delta",
    "Error",
    "Measurement",
    "PerfError",
    "Report",
    "Sample",
    "UsageError",
    "Window",
    "WindowResult",
    "known_loop",
    "measure",
    "native",
    "native_error",
    "probe",
]
