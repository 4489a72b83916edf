"""simple_pmu: read the CPU's cycle and instruction counters from Python.

    import simple_pmu
    report = simple_pmu.probe()        # every backend: usable, or exactly why not
    with simple_pmu.measure() as m:    # the best usable backend
        work()
    m.cycles, m.instructions, m.time_ns

The counter reads live in the C extension simple_pmu._native, built from
include/cycles.h; the rest is the standard library only.
"""

from simple_pmu.measure import CounterFault, CounterUnavailable, Measurement, measure
from simple_pmu.native import native, native_error
from simple_pmu.probe import Backend, Report, probe

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
        raise RuntimeError(native_error)
    native.known_loop(n)


__all__ = [
    "KNOWN_LOOP_INSNS_PER_ITER",
    "Backend",
    "CounterFault",
    "CounterUnavailable",
    "Measurement",
    "Report",
    "known_loop",
    "measure",
    "probe",
]
