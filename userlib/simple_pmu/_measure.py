"""measure(): cycles, instructions and time of a block of Python code.

    with simple_pmu.measure() as m:
        work()
    print(m.cycles, m.instructions, m.time_ns)

Scope: what the counts cover. "thread" (the default, as perf stat): the calling thread
only, wherever it runs, exact; measure(scope="cpu"): every task on the CPU, with the
simple-pmu module's counters. Backend: the best usable one of the scope from probe()
(see _probe.py), or the one named (measure("driver") means scope "cpu"):
  perf-rdpmc  thread: perf self-monitoring; perf keeps per-task counts, no pinning
  perf-read   thread: one read(2) of the {cycles, instructions} perf group at each end
  driver      cpu: one RDPMC / mrs per counter; the thread is pinned inside the block, because
              the driver's counters are per CPU: to its CPU if probe() verified reads
              there, else to the first CPU where it did. The CPU's generation (sysfs
              cpuN/generation) is read before the first read and after the last, outside
              the measured span; if it changed (perf moved or reloaded a counter, the CPU
              was replugged, the settings changed) the counts are None and m.reason says
              so: measure again. Deltas are taken modulo the counter's width: arm64 64
              bits for PMCCNTR_EL0 (index 31), the driver's event_width for an event
              counter; x86 CPUID leaf 0xA's fixed or general counter width, as the RDPMC
              operand the driver published names a fixed or a general counter
  none        cycles and instructions are None and m.reason says why (for the thread
              scope, also whether scope "cpu" would count)
Every result says which path it came from (m.backend) and whether its counts are
exact (m.exact True: perf) or advisory (False: the driver on x86 and on arm64 before
5.17, where perf may move a counter and the driver notices only at its next check; also
the driver in a thread that had perf events with user reads open during the block, as
perf then grants that thread the counters itself and a moved one stays readable; and the
driver when the thread was switched out during the block, as the CPU's counts then hold
the work of the tasks that ran meanwhile; m.notes says so).
What the counts cover is in the result: m.scope "cpu" (the driver: everything that ran
on that CPU, every task) or "thread" (perf: this thread only), m.rings ("user",
"kernel"; None where the driver does not say), and for perf m.running_ratio, the
group's time_running / time_enabled over the block: below 1.0 the PMU was shared
(multiplexed) and the counts, given unscaled, cover only that part (m.notes says so,
and m.exact is False);
0 time running: counts None and m.reason says why.
With the driver, a read that faults (arm64: perf used the PMU on this CPU less than
2 * recheck_ms ago) raises no signal: the extension turns it into CounterFault. At the
start of the block measure() then retries for up to 2 * recheck_ms + 0.1 s, spinning
rather than sleeping (see _probe.retry_pause); if reads
have not come back by then, or at its end, it leaves the counts None and says why in
m.reason (strict=True raises CounterUnavailable instead).
If the module was unloaded since the probe, the default measure() probes again.
Threads and fork: the probe's report is shared by the process; the counters are per
thread. Each thread's first measure() opens that thread's own perf group (pid 0: it
counts that thread only, wherever it runs; a thread started inside the block is not
counted, as perf's events are not inherited), and a forked child drops the parent's and
opens its own on first use (os.register_at_fork).
time_ns is always CLOCK_MONOTONIC (time.perf_counter_ns) around the block. Counts
include the few hundred instructions of the measurement itself: compare two sizes of
the same work to cancel them (see known_loop).
"""

from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TypeVar

from simple_pmu import perf, reasons, sysinfo
from simple_pmu._extension import native
from simple_pmu._probe import (
    COUNTER_BACKENDS,
    DEFAULT_RECHECK_MS,
    DEFAULT_SCOPE,
    RETRY_MARGIN_S,
    SCOPES,
    Backend,
    Report,
    driver_refusal_transient,
    driver_rings,
    probe,
    reprobe_driver,
    retry_pause,
    scope_backends,
)
from simple_pmu.errors import CounterFault, CounterUnavailable, UsageError
from simple_pmu.perf import GroupReading, PerfGroup, SelfMonitor
from simple_pmu.reasons import Reason, as_reason
from simple_pmu.sysinfo import counter_width, read_int, x86_counter_width

COUNTER_BITS = 64  # what a counter value is read as: deltas are modulo this at most
# The driver beside this thread's own perf events with user reads (perf.user_reads_token).
PERF_USER_READS_ADVISORY = reasons.DRIVER_ADVISORY.format(
    why="this thread had perf events with user reads open (perf then grants it the "
        "counters itself, so a counter perf moved stays readable, without a fault)")

_T = TypeVar("_T")


@dataclass
class Measurement:
    backend: str | None  # None: no counter backend, only time
    cycles: int | None = None
    instructions: int | None = None
    time_ns: int | None = None  # set when the block exits
    reason: Reason | None = None  # why cycles or instructions are None; None: both counted
    cpu: int | None = None  # the CPU the block was pinned to (driver backend)
    generation: int | None = None  # driver: the CPU's generation the counts belong to
    scope: str | None = None  # "cpu": every task on that CPU (driver); "thread": perf
    rings: tuple[str, ...] | None = None  # "user", "kernel"; None: not known
    # True: the counts are exactly this block's (perf); False: advisory (the driver where a
    # counter perf moves is noticed only at the driver's next check: x86, arm64 < 5.17);
    # None: no counter backend
    exact: bool | None = None
    time_enabled_ns: int | None = None  # perf: the group's times over the block
    time_running_ns: int | None = None
    running_ratio: float | None = None  # time_running / time_enabled; None: not perf
    notes: tuple[Reason, ...] = ()  # e.g. the group was multiplexed

    @property
    def ok(self) -> bool:
        """Both counts are there (the block has ended and neither count is None), so
        reason is None."""
        return self.reason is None and self.cycles is not None and self.instructions is not None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values: every field, reason and notes as {"code", "text"} objects
        (reason None when there is none), rings a list, and "ok"."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["reason"] = None if self.reason is None else as_reason(self.reason).to_dict()
        data["notes"] = [as_reason(n).to_dict() for n in self.notes]
        data["rings"] = None if self.rings is None else list(self.rings)
        data["ok"] = self.ok
        return data


def wrap_delta(first: int, second: int, width: int = COUNTER_BITS) -> int:
    """second - first for a counter width bits wide that may have wrapped (once).

    Both values are taken modulo 2^width first: a raw read of a narrower counter may
    carry bits above its width (perf's sign extension on x86), and they mean nothing."""
    if not 1 <= width <= COUNTER_BITS:
        raise UsageError(f"counter width {width} is outside 1..{COUNTER_BITS}")
    mask = (1 << width) - 1
    return ((second & mask) - (first & mask)) & mask


@dataclass(eq=False)
class Reader:
    """How one backend reads each counter; None for a counter it lacks.

    Bound to the thread that opened it (perf events count that thread) and to its
    process; closed by close() or, at the latest, when it is garbage collected (e.g. the
    thread that held it as its default reader ended)."""

    backend: str | None
    cycles: Callable[[], int] | None = None
    instructions: Callable[[], int] | None = None
    pin: bool = False
    reason: Reason | None = None  # why a counter is missing (None: none is)
    widths: dict[str, int] = field(default_factory=dict)  # counter widths; 64 if absent
    cpus: tuple[int, ...] = ()  # pin: CPUs where probe() verified reads (empty: any)
    retry_s: float = 0.0  # how long a faulting first read is retried
    event_width: int | None = None  # arm64 driver: sysfs event_width
    x86_widths: tuple[int, int] | None = None  # x86 driver: (fixed, general) counter bits
    generation: Callable[[], int] | None = None  # driver: this CPU's generation
    group: PerfGroup | None = None  # perf: read(2) gives both counts and the group's times
    scope: str | None = None  # see Measurement
    rings: tuple[str, ...] | None = None
    exact: bool | None = None  # see Measurement
    notes: tuple[reasons.Reason, ...] = ()  # e.g. advisory
    _close: list[Callable[[], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._finalizer = weakref.finalize(self, _run_all, self._close)

    def delta(self, counter: str, first: int, second: int) -> int:
        """second - first modulo the counter's width (64 bits unless widths says)."""
        return wrap_delta(first, second, self.widths.get(counter, COUNTER_BITS))

    def placed_widths(self, cycle_index: int, insn_index: int) -> dict[str, int]:
        """The driver: the widths of the counters at these indices (cpuN/cycle_index,
        the INST_RETIRED entry of cpuN/event_index); self.widths elsewhere."""
        if self.x86_widths is not None:
            return {"cycles": x86_counter_width(cycle_index, *self.x86_widths),
                    "instructions": x86_counter_width(insn_index, *self.x86_widths)}
        if self.event_width is None:
            return self.widths
        return {"cycles": counter_width(cycle_index, self.event_width),
                "instructions": counter_width(insn_index, self.event_width)}

    def use_this_cpu(self) -> None:
        """The driver, pinned: take the widths of the counters this CPU reads."""
        placed = self.event_width is not None or self.x86_widths is not None
        if placed and native is not None:
            _cpu, cycle, insn = native.driver_indices()
            self.widths = self.placed_widths(cycle, insn)

    def target_cpu(self) -> int:
        """The CPU to pin to: the current one if verified, else the first verified."""
        assert native is not None
        current: int = native.current_cpu()
        if not self.cpus or current in self.cpus:
            return current
        allowed = os.sched_getaffinity(0)
        return next((c for c in self.cpus if c in allowed), self.cpus[0])

    def stale(self) -> bool:
        """The driver's module was unloaded since the probe."""
        return self.backend == "driver" and not sysinfo.SYSFS_DIR.is_dir()

    def close(self) -> None:
        self._finalizer()


def _run_all(closers: list[Callable[[], None]]) -> None:
    """Run and drop each closer (a Reader's finalizer: it must not refer to the Reader)."""
    while closers:
        closers.pop(0)()


def resolve_scope(backend: str | None, scope: str | None) -> str:
    """The scope a measurement counts: the one asked for, else the named backend's, else
    the default ("thread"); UsageError if they disagree or either is unknown."""
    if backend is not None and backend not in COUNTER_BACKENDS:
        raise UsageError(reasons.UNKNOWN_BACKEND.format(
            backend=backend, choices=", ".join(COUNTER_BACKENDS)))
    has = next((name for name in SCOPES if backend in scope_backends(name)), None)
    if scope is None:
        return has or DEFAULT_SCOPE
    scope_backends(scope)  # UsageError if unknown
    if has is not None and has != scope:
        raise UsageError(reasons.BACKEND_NOT_IN_SCOPE.format(backend=backend, has=has,
                                                             scope=scope))
    return scope


def open_reader(report: Report, backend: str | None = None,
                scope: str | None = None) -> Reader:
    """A Reader for the named backend, or the best usable one of scope (default:
    "thread"). Bound to the calling thread and process (see Reader)."""
    scope = resolve_scope(backend, scope)
    if backend is None:
        best = report.best("cycles", scope)
        if best is None:
            return Reader(None, reason=report.no_backend(scope), scope=scope)
        backend = best.name
    status = report.get(backend)
    if not status.usable:
        raise _unavailable(backend, str(status.reason or ""), status.reasons)
    assert native is not None
    # Only notes about a missing counter explain a None count (not e.g. a wait in probe).
    missing = "; ".join(n for n in status.notes if n.startswith("no instructions"))
    missing_reason = as_reason(missing, reasons.PERF_NO_INSN.code) if missing else None
    if backend == "driver":
        return _driver_reader(report, status, missing_reason)
    reader = Reader(backend, reason=missing_reason, scope=perf.SCOPE, rings=perf.RINGS,
                    exact=True)
    group = PerfGroup.open(status.counters, user_access=backend == "perf-rdpmc")
    reader.group = group
    reader._close.append(group.close)
    for counter in group.names:
        if backend == "perf-rdpmc":
            monitor = SelfMonitor.on(counter, group.fd(counter),
                                     fallback=functools.partial(group.count, counter))
            reader._close.insert(0, monitor.close)
            setattr(reader, counter, monitor.read)
        else:
            setattr(reader, counter, functools.partial(group.count, counter))
    return reader


def _unavailable(backend: str, text: str, why: tuple[str, ...] = ()) -> CounterUnavailable:
    """CounterUnavailable("backend: why"), coded by the first reason."""
    first = reasons.as_reason(why[0] if why else text)
    return CounterUnavailable(reasons.BACKEND_UNUSABLE.format(backend=backend, reason=text),
                              first.code, why or (first,))


def _driver_reader(report: Report, status: Backend, missing: Reason | None) -> Reader:
    assert native is not None
    recheck = status.facts.get("recheck_ms", DEFAULT_RECHECK_MS)
    recheck_ms = recheck if isinstance(recheck, int) else DEFAULT_RECHECK_MS
    reader = Reader("driver", native.driver_cycles, pin=True, reason=missing,
                    cpus=status.cpus, retry_s=2 * recheck_ms / 1000 + RETRY_MARGIN_S,
                    generation=native.driver_generation, scope="cpu", rings=status.rings)
    reader.exact, why = driver_exactness(native.ARCH)
    if not reader.exact:
        reader.notes = (reasons.DRIVER_ADVISORY.format(why=why),)
    if "instructions" in status.counters:
        reader.instructions = native.driver_instructions
    if native.ARCH == "x86_64" and report.cpu.perfmon:
        # Fixed counters are CPUID leaf 0xA EDX[12:5] bits wide, general ones EAX[23:16];
        # the driver's counters are usually fixed ones (and the 2011 fallback is).
        width = report.cpu.perfmon.fixed_width
        if not 1 <= width <= COUNTER_BITS:
            problem = reasons.DRIVER_MALFORMED.format(path="CPUID leaf 0xA EDX[12:5]",
                                                      value=width)
            raise _unavailable("driver", problem)
        reader.widths = {"cycles": width, "instructions": width}
        gp_width = report.cpu.perfmon.gp_width
        reader.x86_widths = (width, gp_width if 1 <= gp_width <= COUNTER_BITS else width)
    elif native.ARCH == "aarch64":
        if not sysinfo.SYSFS_DIR.is_dir():  # unloaded since the probe
            raise _unavailable("driver",
                               reasons.DRIVER_NOT_LOADED.format(path=sysinfo.SYSFS_DIR))
        # Per CPU: 64 for PMCCNTR_EL0, else what the driver says its counters are.
        path = sysinfo.SYSFS_DIR / "event_width"
        event_width = read_int(path)
        if event_width not in (32, 64):
            raise _unavailable("driver", reasons.DRIVER_MALFORMED.format(path=path,
                                                                         value=event_width))
        reader.event_width = event_width
        reader.rings = driver_rings(sysinfo.driver_attrs())
    return reader


# The probe's report is the machine's, shared by every thread of the process (and kept by
# a forked child); readers are per thread: a perf event opened with pid 0 counts the
# thread that opened it, and its mmap page is valid only in the process that mapped it.
def driver_exactness(arch: str) -> tuple[bool, str]:
    """Whether the driver's readings are exact here, and why not.

    arm64 from 5.17 (perf_user_access exists): perf withdraws EL0 access whenever it
    moves a counter, so a read across a move faults (guarded) or the CPU's generation
    changes, and the measurement is discarded. x86, and arm64 before 5.17: a move is
    seen only at the driver's next check (recheck_ms), so the readings are advisory."""
    if arch == "aarch64" and Path(sysinfo.PERF_USER_ACCESS).exists():
        return True, ""
    if arch == "aarch64":
        return False, "this arm64 kernel (before 5.17) lets a moved counter stay readable"
    return False, "x86 RDPMC reads whatever counter the published operand names"


_cache: dict[str, Report] = {}
_probe_lock = threading.Lock()


class _ThreadState(threading.local):
    def __init__(self) -> None:  # runs in each thread on its first use
        self.readers: dict[str, Reader] = {}  # scope -> this thread's default reader


_local = _ThreadState()
# Every open default reader of this process, whatever thread opened it: a forked child
# drops them all (see _after_fork_in_child). A thread's reader that outlives its thread
# is closed by its finalizer (see Reader.__post_init__).
_readers: weakref.WeakSet[Reader] = weakref.WeakSet()


@dataclass
class _Reprobe:
    """The driver's re-probe (see _default_report); under _probe_lock."""

    last: float = float("-inf")  # time.monotonic() at the last probe of the driver
    busy: bool = False  # a thread is probing it again now


REPROBE_INTERVAL_S = 1.0  # at most one re-probe of a transiently refused driver per second
_reprobe = _Reprobe()


def _default_report(scope: str | None = None) -> Report:
    """The process's probe report, probed on first use.

    For scope "cpu": a driver the report refused only because its trial reads kept
    faulting where perf withdraws access (arm64 >= 5.17: perf was using the PMU on
    every CPU tried; see _probe.driver_refusal_transient) is probed again, at most once
    every REPROBE_INTERVAL_S, so that it is not refused for the rest of the process.
    That call waits up to the probe's retry bound (2 * recheck_ms + 0.1 s, spinning);
    the others meanwhile use the report as it is."""
    with _probe_lock:
        report = _cache.get("report")
        if not isinstance(report, Report):
            report = _cache["report"] = probe()
            _reprobe.last = time.monotonic()
            return report
        if (scope != "cpu" or _reprobe.busy or not driver_refusal_transient(report)
                or time.monotonic() - _reprobe.last < REPROBE_INTERVAL_S):
            return report
        _reprobe.busy = True
    # Outside the lock: other threads' measure() must not wait for the spin.
    try:
        fresh = reprobe_driver(report)
    finally:
        with _probe_lock:
            _reprobe.busy = False
            _reprobe.last = time.monotonic()
    with _probe_lock:
        current = _cache.get("report")
        if current is report:  # not forgotten or replaced meanwhile
            _cache["report"] = fresh
            return fresh
        return current if isinstance(current, Report) else fresh


def _driver_gone(report: Report, scope: str) -> bool:
    """The report would pick the driver, but its module was unloaded since."""
    best = report.best("cycles", scope)
    return best is not None and best.name == "driver" and not sysinfo.SYSFS_DIR.is_dir()


def _default_reader(scope: str = DEFAULT_SCOPE) -> Reader:
    """This thread's reader of the best backend of scope, opened on its first use in the
    thread."""
    reader = _local.readers.get(scope)
    # The module went away since the probe (cached reader or report): probe again.
    if reader is not None and reader.stale() or _driver_gone(_default_report(), scope):
        forget()
        reader = None
    if reader is None:
        reader = open_reader(_default_report(scope), scope=scope)
        if reader.backend is None and scope == "cpu" and driver_refusal_transient(
                _default_report()):
            return reader  # not kept: the next measure() probes the driver again
        _local.readers[scope] = reader
        _readers.add(reader)
    return reader


def forget() -> None:
    """Drop the cached probe and this thread's readers: the next measure() probes again.
    (Other threads' readers stay open until they next need to probe.)"""
    readers, _local.readers = _local.readers, {}
    for reader in readers.values():
        _readers.discard(reader)
        reader.close()
    with _probe_lock:
        _cache.pop("report", None)


def _after_fork_in_child() -> None:
    """In a forked child: the parent's readers count the parent's threads and their mmap
    pages are not mapped here (VM_DONTCOPY; the extension forgets them without munmap).
    Close the child's copies of their descriptors; the child opens its own on first use."""
    global _local, _probe_lock
    for reader in list(_readers):
        reader.close()
    _readers.clear()
    _local = _ThreadState()
    # Another thread of the parent may have held it at the fork (a re-probe): the child
    # has no such thread, and would wait for ever.
    _probe_lock = threading.Lock()
    _reprobe.busy = False


os.register_at_fork(after_in_child=_after_fork_in_child)


class PinnedCpu:
    """Pin the thread to reader.target_cpu() (when reader.pin) and restore afterwards."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.saved: set[int] | None = None
        self.cpu: int | None = None

    def __enter__(self) -> PinnedCpu:
        if self.reader.pin:
            if native is not None:
                native.guard()  # a faulting read raises CounterFault, even if replaced
            self.saved = os.sched_getaffinity(0)
            self.cpu = self.reader.target_cpu()
            os.sched_setaffinity(0, {self.cpu})
            self.reader.use_this_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved is not None:
            os.sched_setaffinity(0, self.saved)
            self.saved = None


def _retrying(reader: Reader, call: Callable[[], _T]) -> _T:
    """call() once reads work: a CounterFault is retried for reader.retry_s, spinning
    between tries (see _probe.retry_pause: a sleeping reader may never get access)."""
    deadline = time.monotonic() + reader.retry_s
    while True:
        try:
            return call()
        except CounterFault as exc:
            if time.monotonic() >= deadline:
                raise CounterUnavailable(f"{reader.backend}: {exc}", exc.code) from None
            retry_pause()


def _start_when_readable(reader: Reader, span: native.DriverSpan) -> int:
    """Start the span once reads work; perf_counter_ns() just before its start.

    Waits for reads first (_retrying), then starts; a start whose reads fault again
    (perf used the PMU on that CPU once more) waits again, within one retry bound. So
    the start that succeeds is always reached, and returns, on the same path: a start
    retried from inside _retrying returned through it and its handler, which the block
    counted (46 on trixie: 4538 against 4511 for the same loop)."""
    assert native is not None
    deadline = time.monotonic() + reader.retry_s
    while True:
        _retrying(reader, native.driver_cycles)
        t0 = time.perf_counter_ns()  # after the wait: time_ns is the block's
        try:
            span.start()  # the last thing before the block
            return t0
        except CounterFault as exc:
            if time.monotonic() >= deadline:
                raise CounterUnavailable(f"{reader.backend}: {exc}", exc.code) from None


def first_read(reader: Reader) -> tuple[int, int]:
    """(instructions, cycles) once reads work (see _retrying)."""
    def read() -> tuple[int, int]:
        i0 = reader.instructions() if reader.instructions else 0
        c0 = reader.cycles() if reader.cycles else 0
        return i0, c0
    return _retrying(reader, read)


class measure:  # noqa: N801 - used as a function: with measure() as m
    """Measure the block; see the module docstring for how the backend is chosen.

    backend: "driver", "perf-rdpmc" or "perf-read" to insist on one (CounterUnavailable
    if it cannot be used here); None for the best of the scope. scope: "thread" (the
    default, unless backend is "driver") or "cpu". strict: raise CounterUnavailable
    (with the reason's code) instead of giving a result without both counts: at the
    start when the backend cannot count both, at the end when the counts were
    discarded (not when an exception leaves the block). The first call probes (~0.5 s;
    up to 2 * recheck_ms more with the module loaded, see _probe.py).

    A class, not a generator: the last reads are the first thing __exit__ does, so the
    code between the first and the last read is the same every time (exact counts).
    """

    def __init__(self, backend: str | None = None, *, scope: str | None = None,
                 strict: bool = False) -> None:
        self.scope = resolve_scope(backend, scope)  # UsageError now, not at the block
        self.backend = backend
        self.strict = strict
        self.reader: Reader | None = None

    def __enter__(self) -> Measurement:
        backend = self.backend
        if backend is None:
            reader = _default_reader(self.scope)
        else:
            report = _default_report(self.scope)
            if backend == "driver" and not sysinfo.SYSFS_DIR.is_dir():
                forget()
                report = _default_report(self.scope)
            reader = open_reader(report, backend)
        self.reader = reader
        if self.strict and (reader.cycles is None or reader.instructions is None):
            why = reader.reason or reasons.NO_INSN_COUNTER.format()
            if self.backend is not None:
                reader.close()
            raise CounterUnavailable(why, why.code, (why,))
        self.result = result = Measurement(reader.backend, reason=reader.reason,
                                           scope=reader.scope, rings=reader.rings,
                                           exact=reader.exact, notes=reader.notes)
        self.g0: GroupReading | None = None
        self.user_reads = perf.user_reads_token()
        # The driver: all four reads in C, no Python object made between first and last.
        self.span = span = (native.DriverSpan(reader.instructions is not None)
                            if reader.backend == "driver" and native is not None else None)
        self.pinned = PinnedCpu(reader)
        self.i0 = self.c0 = 0
        self.unavailable: Reason | None = None
        self.t0 = time.perf_counter_ns()
        try:
            result.cpu = self.pinned.__enter__().cpu
            if span is None:
                self.t0 = time.perf_counter_ns()
                if reader.group is not None and reader.backend == "perf-read":
                    # One read(2): both counts and the group's times together.
                    self.g0 = g0 = reader.group.read()
                    self.i0 = g0.counts.get("instructions", 0)
                    self.c0 = g0.counts.get("cycles", 0)
                    return result
                if reader.group is not None:  # perf-rdpmc: the times just outside
                    self.g0 = reader.group.read()
                self.i0, self.c0 = first_read(reader)
                return result
            self.t0 = _start_when_readable(reader, span)
        except CounterUnavailable as err:
            # Reads did not come back within the retry time (perf keeps using the PMU
            # on that CPU): a result without counts and with the reason, as for any
            # other failure; raised only when strict.
            if self.strict:
                self._close()
                raise
            self.unavailable = as_reason(str(err), err.code)
        except BaseException:
            self._close()
            raise
        return result

    def __exit__(self, typ: object, value: object, tb: object) -> None:
        # Named parameters: *args would allocate a tuple before the reads.
        if self.unavailable is not None:
            self._finish(self.unavailable, 0, 0, strict=False)
            return
        span = self.span
        if span is not None:
            try:
                span.stop()
            except CounterFault as err:
                self._finish(as_reason(str(err), err.code), 0, 0, strict=typ is None)
                return
            self._finish(None, 0, 0, strict=typ is None)
            return
        self._exit_python_reads(strict=typ is None)

    def _exit_python_reads(self, strict: bool) -> None:
        reader = self.reader
        assert reader is not None
        fault: Reason | None = None
        c1 = i1 = 0
        group, g1 = reader.group, None
        try:
            if group is not None and reader.backend == "perf-read":
                g1 = group.read()
                c1, i1 = g1.counts.get("cycles", 0), g1.counts.get("instructions", 0)
            else:
                c1 = reader.cycles() if reader.cycles else 0
                i1 = reader.instructions() if reader.instructions else 0
                if group is not None:
                    g1 = group.read()
        except CounterFault as err:  # access withdrawn during the block
            fault = as_reason(str(err), err.code)
        self._finish(fault, c1, i1, g1, strict=strict)

    def _finish(self, fault: Reason | None, c1: int, i1: int, g1: GroupReading | None = None,
                *, strict: bool = False) -> None:
        """The result from the last reads; strict (and no exception leaving the block):
        CounterUnavailable if it has not both counts."""
        self._result(fault, c1, i1, g1)
        result = self.result
        if strict and self.strict and not result.ok:
            why = result.reason or reasons.NO_INSN_COUNTER.format()
            raise CounterUnavailable(why, why.code, (why,))

    def _result(self, fault: Reason | None, c1: int, i1: int,
                g1: GroupReading | None = None) -> None:
        span, reader, result = self.span, self.reader, self.result
        assert reader is not None
        t1 = time.perf_counter_ns()
        self._close()
        result.time_ns = t1 - self.t0
        if fault:
            result.reason = fault
            return
        if self.g0 is not None and g1 is not None and not self._group_times(self.g0, g1):
            return
        c0, i0 = self.c0, self.i0
        widths = reader.widths
        if span is not None:
            c0, c1, i0, i1 = span.values()
            info = span.info()
            before, after = info["generation_before"], info["generation_after"]
            if before != after:
                result.reason = reasons.MEASURE_GENERATION_CHANGED.format(
                    cpu=info["cpu"], before=before, after=after)
                return
            if not info["valid"]:  # cycles.h's window: the CPU changed or a read faulted
                result.reason = reasons.MEASURE_WINDOW_INVALID.format(cpu=info["cpu"])
                return
            result.generation = after or None
            widths = reader.placed_widths(info["cycle_index"], info["insn_index"])
        if reader.backend == "driver" and result.exact and perf.user_reads_between(
                self.user_reads, perf.user_reads_token()):
            result.exact = False
            result.notes += (PERF_USER_READS_ADVISORY,)
        if span is not None and result.exact and not info["exact"]:
            # cycles.h's window said valid, not exact: say why where it is known.
            result.exact = False
            result.notes += (reasons.MEASURE_SWITCHED_OUT.format(cpu=info["cpu"])
                             if info["switched"]
                             else reasons.MEASURE_NOT_EXACT.format(cpu=info["cpu"]),)
        if reader.cycles:
            result.cycles = wrap_delta(c0, c1, widths.get("cycles", COUNTER_BITS))
        if reader.instructions:
            result.instructions = wrap_delta(i0, i1, widths.get("instructions", COUNTER_BITS))
        elif not result.reason:
            result.reason = reasons.NO_INSN_COUNTER.format()

    def _group_times(self, g0: GroupReading, g1: GroupReading) -> bool:
        """The perf group's times over the block into the result; False (counts None,
        reason set) if the group never ran."""
        result = self.result
        enabled = g1.time_enabled - g0.time_enabled
        running = g1.time_running - g0.time_running
        result.time_enabled_ns, result.time_running_ns = enabled, running
        result.running_ratio = perf.interval_ratio(g0, g1)
        if running <= 0:
            result.reason = reasons.PERF_NOT_SCHEDULED.format(enabled=enabled)
            return False
        if running < enabled:
            # The counts cover only the time on the PMU: not this block's exact count.
            result.exact = False
            result.notes += (reasons.PERF_MULTIPLEXED.format(
                percent=100 * running / enabled, running=running, enabled=enabled),)
        return True

    def _close(self) -> None:
        self.pinned.__exit__()
        if self.backend is not None and self.reader is not None:
            self.reader.close()
