"""probe(): which counter backend works here, and precisely why each other one does not.

Backends, best first:
  driver      the simple-pmu module: the counters perf placed the driver's events in, per
              CPU (sysfs cpuN/cycle_index, cpuN/event_index): on x86 RDPMC of the operand
              published for cycles and INST_RETIRED.ANY (0xc0), on arm64 mrs of the
              cycle counter and INST_RETIRED (0x08); read through cycles.h
  perf-rdpmc  perf self-monitoring: a perf event's mmap page plus RDPMC / mrs
  perf-read   perf_event_open() and read(2): one system call per reading
  timer       the time-stamp counter (x86) / generic timer (arm64): time, not cycles

Every read that can fault (RDPMC, mrs of a PMU register, even the timer) is tried
in-process through the extension's guarded reads, which turn SIGSEGV/SIGILL into
CounterFault: the thread is pinned to each allowed CPU in turn (sched_setaffinity),
reads, and gets its affinity back. Probing forks no child and never kills the caller,
so a multi-threaded caller is safe (no fork-with-threads DeprecationWarning). Only where
a fault could not be caught in-process, see _in_process_safe(), is the read tried in a
forked child instead (simple_pmu.child).

Order (arm64): any perf event that runs on a CPU makes the kernel's arm_pmu driver
withdraw EL0 counter access there (PMUSERENR_EL0 = 0); the simple-pmu module puts it back
within 2 * recheck_ms. probe() therefore tries the perf backends first and the driver
last, retrying the driver's trial read on each CPU until it works or that bound (plus a
margin) has passed: when probe() says the driver is usable, its counters are readable on
the CPUs listed in Backend.cpus right now, and nothing in probe() touches perf after that.
A CPU where the driver's events have no readable counter (cpuN/cycle_index or an entry of
cpuN/event_index is -1), or whose cpuN/user_access is 0 (x86), is not tried: the driver
keeps user access closed there. Where the module reads only for members (sysfs access
"members"), a process that cannot open its device node (/dev/simple-pmu: the node's group
and mode are the admin's choice) is not let in: not_let_in() says so, with the group, and
the driver is not tried. On x86 the probe also maps the node as cycles.h does to let the
process in, and unmaps it at once (the page is never touched; nothing is read while it is
mapped): the module's answer is exact (EPERM: perf allows no user RDPMC, and the cpu
PMU's rdpmc attribute says which rule). The trial reads then let the process in through
cycles.h (arm64: each reading thread), and it stays in (x86: until it exits, which keeps
the module loaded meanwhile).
"""

from __future__ import annotations

import errno
import os
import pwd
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from simple_pmu import perf, reasons, sysinfo
from simple_pmu._extension import native, native_error
from simple_pmu.child import ChildResult, run_in_child
from simple_pmu.errors import CounterFault, CounterUnavailable, PerfError, UsageError
from simple_pmu.perf import PerfGroup, SelfMonitor
from simple_pmu.reasons import Reason
from simple_pmu.sysinfo import (
    EVENT_SOURCE,
    NO_INDEX,
    PARANOID,
    PERF_USER_ACCESS,
    X86_CPU_PMUS,
    CpuInfo,
    CpuPlacement,
    cpu_info,
    cpu_pmus,
    driver_attrs,
    driver_placement,
    parse_events,
    rdpmc_mode,
    rdpmc_modes,
    read_int,
)
from simple_pmu.timer import timer_frequency

COUNTER_BACKENDS = ("driver", "perf-rdpmc", "perf-read")
# What each scope of measure() may use, best first: "thread" (the default, like perf
# stat) counts the calling thread; "cpu" every task on the CPU (the module's counters).
SCOPES: dict[str, tuple[str, ...]] = {"thread": ("perf-rdpmc", "perf-read"),
                                      "cpu": ("driver",)}
DEFAULT_SCOPE = "thread"
SPIN_ITERATIONS = 100_000  # known_loop iterations between two trial reads
INST_RETIRED = 0x08  # arm64's architected event
X86_INST_RETIRED = 0xC0  # INST_RETIRED.ANY in perf's x86 raw encoding (event | umask << 8)
DEFAULT_RECHECK_MS = 100  # the module's default period (sysfs recheck_ms)
RETRY_MARGIN_S = 0.1  # beyond the documented 2 * recheck_ms
RETRY_PAUSE_S = 0.0001  # between two trial reads, spinning (see retry_pause)
CHILD_RETRY_PAUSE_S = 0.01  # between two trials in forked children (see _Retry.run)
# What the driver counts (sysfs ring, arm64): bit 0 kernel, bit 1 user.
RING_BITS = (("user", 2), ("kernel", 1))


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    usable: bool
    reasons: tuple[Reason, ...] = ()  # why it is not usable, most basic first
    notes: tuple[Reason, ...] = ()  # limits of a usable backend, or context
    counters: tuple[str, ...] = ()  # what it reads when usable
    facts: dict[str, object] = field(default_factory=dict)  # docs/simple-pmu.1 FACTS
    cpus: tuple[int, ...] = ()  # driver: the CPUs where a trial read just worked
    scope: str | None = None  # what a count covers: "cpu" (every task), "thread"; None: time
    rings: tuple[str, ...] | None = None  # "user", "kernel"; None: unknown or not counted

    @property
    def reason(self) -> Reason | None:
        """Why it is unusable, as one Reason (the same shape as everywhere else): the
        texts joined by "; ", the first one's code and remedy; None when usable."""
        if not self.reasons:
            return None
        first = reasons.as_reason(self.reasons[0])
        return Reason(first.code, "; ".join(self.reasons), first.remedy)

    def to_dict(self) -> dict[str, object]:
        """The JSON form (docs/simple-pmu.1 JSON OUTPUT; schema/simple-pmu.schema.json)."""
        return {
            "name": self.name,
            "description": self.description,
            "usable": self.usable,
            "counters": list(self.counters),
            "scope": self.scope,
            "rings": None if self.rings is None else list(self.rings),
            "cpus": list(self.cpus),
            "reasons": [reasons.as_reason(r).to_dict() for r in self.reasons],
            "reason": None if self.reason is None else self.reason.to_dict(),
            "notes": [reasons.as_reason(n).to_dict() for n in self.notes],
            "facts": dict(self.facts),
        }


@dataclass(frozen=True)
class Report:
    cpu: CpuInfo
    backends: tuple[Backend, ...]
    native_error: str = ""

    def get(self, name: str) -> Backend:
        for backend in self.backends:
            if backend.name == name:
                return backend
        raise KeyError(name)

    def best(self, counter: str = "cycles", scope: str = DEFAULT_SCOPE) -> Backend | None:
        """The first usable backend of scope ("thread" or "cpu") that reads counter."""
        for name in scope_backends(scope):
            backend = self.get(name)
            if backend.usable and counter in backend.counters:
                return backend
        return None

    def unusable_summary(self, scope: str | None = None) -> str:
        """Why each unusable counter backend (of scope, if given) is unusable."""
        names = COUNTER_BACKENDS if scope is None else scope_backends(scope)
        return "; ".join(f"{b.name}: {b.reason}" for b in self.backends
                         if b.name in names and not b.usable)

    def grouped_reasons(self, scope: str | None = None
                        ) -> list[tuple[Reason, tuple[str, ...]]]:
        """Every distinct reason of the unusable counter backends (of scope, if given),
        once, with the names of the backends that have it, in order."""
        names = COUNTER_BACKENDS if scope is None else scope_backends(scope)
        grouped: dict[tuple[str, str], tuple[Reason, list[str]]] = {}
        for b in self.backends:
            if b.name not in names or b.usable:
                continue
            for r in b.reasons:
                why = reasons.as_reason(r)
                grouped.setdefault((why.code, str(why)), (why, []))[1].append(b.name)
        return [(why, tuple(owners)) for why, owners in grouped.values()]

    def unusable_reasons(self) -> tuple[Reason, ...]:
        """Every reason of every unusable counter backend."""
        return tuple(r for b in self.backends if b.name in COUNTER_BACKENDS and not b.usable
                     for r in b.reasons)

    def no_backend(self, scope: str = DEFAULT_SCOPE) -> Reason:
        """Why measure(scope=scope) has no counter backend here; for the thread, whether
        measure(scope="cpu") would count (the whole CPU)."""
        reason = reasons.NO_COUNTER_BACKEND.format(scope=scope,
                                                  summary=self.unusable_summary(scope))
        cpu = self.best("cycles", "cpu") if scope == "thread" else None
        if cpu is not None:
            return reason.extended(reasons.CPU_SCOPE_HINT.format(backend=cpu.name),
                                   'measure(scope="cpu") or read --scope cpu')
        # The first remedy of the scope's backends, best first.
        remedy = next((r.remedy for b in self.backends if b.name in scope_backends(scope)
                       for r in b.reasons if getattr(r, "remedy", "")), "")
        return reason.extended("", remedy)

    def to_dict(self) -> dict[str, object]:
        best = self.best("cycles")
        return {
            "cpu": self.cpu.to_dict(),
            "native_error": (reasons.as_reason(self.native_error, reasons.NO_NATIVE.code)
                             .to_dict() if self.native_error else None),
            "measure": {"backend": best.name if best else None,
                        "reason": None if best else self.no_backend().to_dict()},
            "backends": [b.to_dict() for b in self.backends],
        }


def scope_backends(scope: str) -> tuple[str, ...]:
    """The backends of a measure() scope, best first (UsageError for an unknown one)."""
    try:
        return SCOPES[scope]
    except KeyError:
        raise UsageError(reasons.UNKNOWN_SCOPE.format(
            scope=scope, choices=", ".join(SCOPES))) from None


def _is_x86(cpu: CpuInfo) -> bool:
    return cpu.arch == "x86_64"


def _allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _pinned(cpu: int, call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        os.sched_setaffinity(0, {cpu})
        return call()
    return run


def _in_process_safe() -> bool:
    """Whether a faulting trial read can be caught in this process.

    A guarded read catches SIGSEGV/SIGILL with the extension's handler. The kernel
    delivers a fault it raises even when the signal is blocked, but then with the
    default action: the process dies. So where this thread blocks SIGSEGV or SIGILL, or
    the handler cannot be installed, trials run in a forked child as before (the child
    dies, the caller learns the signal). Nowhere else does probing fork."""
    if native is None:
        return False
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if signal.SIGSEGV in blocked or signal.SIGILL in blocked:
        return False
    try:
        native.guard()
    except OSError:
        return False
    return True


def _run_on(cpu: int, call: Callable[[], object]) -> ChildResult:
    """call() with this thread pinned to cpu, its affinity restored after; in-process
    where safe, else in a child (see _in_process_safe)."""
    if not _in_process_safe():
        return run_in_child(_pinned(cpu, call))
    saved = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {cpu})
        return ChildResult(True, value=call())
    except CounterFault as exc:
        return ChildResult(False, signal=exc.signal or "SIGSEGV")
    except Exception as exc:  # noqa: BLE001 - reported as the trial's failure
        return ChildResult(False, error=f"{type(exc).__name__}: {exc}")
    finally:
        os.sched_setaffinity(0, saved)


def _two_reads(read: Callable[[], int]) -> Callable[[], object]:
    """Read, run the known loop, read again; the reads may fault.

    A guarded read raises CounterFault instead of dying: reported as the signal.
    """
    def run() -> object:
        assert native is not None
        try:
            first = read()
            native.known_loop(SPIN_ITERATIONS)
            return [first, read()]
        except CounterFault as exc:
            return {"fault": exc.signal or "SIGILL"}
    return run


def _trial_one(what: str, cpu: int, call: Callable[[], object]
               ) -> tuple[Reason | None, bool]:
    """Run call pinned to cpu: (why it failed or None, whether retrying may help)."""
    result = _run_on(cpu, call)
    if result.signal:
        return reasons.TRIAL_FAULT.format(what=what, cpu=cpu, signal=result.signal), True
    if not result.ok:
        return reasons.TRIAL_FAILED.format(what=what, cpu=cpu, error=result.error), False
    if isinstance(result.value, dict) and "fault" in result.value:
        return reasons.TRIAL_FAULT.format(what=what, cpu=cpu, signal=result.value["fault"]), True
    if isinstance(result.value, dict) and "refused" in result.value:
        return reasons.DRIVER_REFUSES.format(cpu=cpu), False
    if isinstance(result.value, list) and len(result.value) == 2:
        first, second = result.value
        if second == first:  # frozen after perf until the module's next check
            return reasons.NOT_COUNTING.format(what=what, cpu=cpu, first=first,
                                               second=second), True
    return None, False


def _trial(what: str, cpus: list[int], call: Callable[[], object]) -> list[Reason]:
    """Run call on each CPU; the reasons it failed (none if it worked)."""
    return [problem for cpu in cpus
            if (problem := _trial_one(what, cpu, call)[0]) is not None]


@dataclass
class _Retry:
    """The driver's trial on one CPU, retried until it works or the deadline passes."""

    deadline: float
    started: float
    waited_ms: dict[int, int] = field(default_factory=dict)  # CPU -> ms until it worked

    def run(self, what: str, cpu: int, call: Callable[[], object]) -> Reason | None:
        attempts = 0
        while True:
            attempts += 1
            problem, transient = _trial_one(what, cpu, call)
            if problem is None:
                if attempts > 1:
                    self.waited_ms[cpu] = max(self.waited_ms.get(cpu, 0), self._elapsed_ms())
                return None
            if not transient or time.monotonic() >= self.deadline:
                if attempts > 1:
                    problem = problem.extended(reasons.RETRIED.format(
                        attempts=attempts, ms=self._elapsed_ms()))
                return problem
            if _in_process_safe():
                retry_pause()
            else:  # each trial forks a child: spinning gains nothing, forks cost
                time.sleep(CHILD_RETRY_PAUSE_S)

    def _elapsed_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)


def retry_pause(seconds: float = RETRY_PAUSE_S) -> None:
    """Wait between two trial reads of the driver's counters, running, not asleep.

    arm64 from 5.17: every context switch of a task with perf events on the CPU makes
    perf withdraw EL0 access there, and the module restores it from a timer on that CPU.
    A reader that sleeps comes back after the other task ran and finds access withdrawn
    again: while perf is used on the CPU all the time, it would never read. Spinning,
    the reader is running when the module's timer fires, and a short pause tries again
    before the scheduler switches to the other task (46 on trixie: ten 10 ms pauses
    found no opening, where back-to-back reads found one in 24 ms). At most the bound
    (2 * recheck_ms + RETRY_MARGIN_S) is spent this way, and only while reads fault."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _no_vpmu(cpu: CpuInfo) -> list[Reason]:
    if cpu.hypervisor and not cpu_pmus():
        return [reasons.HYPERVISOR_NO_VPMU.format(hypervisor=cpu.hypervisor)]
    return []


def probe_driver(cpu: CpuInfo) -> Backend:
    name = "driver"
    counters: tuple[str, ...] = ("cycles", "instructions")
    description = ("simple-pmu driver: RDPMC of the counters perf placed its events in,"
                   " per CPU" if _is_x86(cpu)
                   else "simple-pmu driver: the cycle and INST_RETIRED counters perf placed"
                   " its events in, per CPU")
    sysfs = sysinfo.SYSFS_DIR
    attrs = driver_attrs(sysfs)
    facts: dict[str, object] = {"module_loaded": sysfs.is_dir(), "sysfs": str(sysfs)}
    facts.update({f"sysfs.{k}": v for k, v in attrs.items() if "\n" not in v})
    found: list[Reason] = []
    notes: list[Reason] = []
    cpus = _allowed_cpus()
    rings = driver_rings(attrs)
    if native is None:
        return Backend(name, description, False, (_no_native(),), facts=facts,
                       scope="cpu", rings=rings)
    if not sysfs.is_dir():
        found.append(reasons.DRIVER_NOT_LOADED.format(path=sysfs))
    if _is_x86(cpu):
        found += _x86_driver_hardware(cpu, facts)
        mode = rdpmc_mode()
        facts["rdpmc"], facts["rdpmc_path"] = (mode[1], str(mode[0])) if mode else (None, None)
        if sysfs.is_dir():
            found += _x86_driver_settings(attrs)
    elif sysfs.is_dir():
        found += not_let_in(attrs)
    if sysfs.is_dir() and not found:
        placement = driver_cpu_placement(cpu.arch, sysfs, attrs, cpus, facts)
        found += placement.found
        notes += placement.notes
        counters = placement.counters
        if not found and not placement.cpus:  # every allowed CPU has a problem
            found += placement.cpu_problems
        elif not found:
            notes += [reasons.DRIVER_NOT_ON_CPU.format(problem=p)
                      for p in placement.cpu_problems]
            cpus = placement.cpus
    if found:
        return Backend(name, description, False, tuple(found), tuple(notes), facts=facts,
                       scope="cpu", rings=rings)
    return _driver_trials(Backend(name, description, False, (), tuple(notes), counters, facts,
                                  scope="cpu", rings=rings), attrs, cpus)


def _user_name() -> str:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def not_let_in(attrs: dict[str, str], node: Path | None = None,
               x86: bool = False) -> list[Reason]:
    """Why this process cannot be let in to read the driver's counters, where the module
    reads only for members (sysfs access "members"): a reader is let in through the
    device node, which it must be able to open for reading (its group and mode are the
    admin's choice). Decided by opening it and closing it again (arm64: nothing is asked
    of the module, nothing privileged is tried); x86 (x86=True): where it opens, by the
    mapping that lets the process in, too, unmapped at once (sysinfo.let_in_mapping():
    the module's own answer; EPERM means perf allows no user RDPMC, and the cpu PMU's
    rdpmc attribute says which rule). [] when it would be let in, or nobody needs
    letting in ("everyone", or a module without access)."""
    if not sysinfo.members_only(attrs):
        return []
    dev = sysinfo.dev_node(node, let_in=x86)
    if dev.error is None:
        return [] if dev.map_error is None else [_not_mapped(dev)]
    if dev.error == errno.ENOENT:
        return [reasons.NO_DEV_NODE.format(node=dev.path)]
    name = reasons.errno_name(dev.error)
    if dev.error not in (errno.EACCES, errno.EPERM):
        return [reasons.DEV_NODE_FAILED.format(node=dev.path, errname=name,
                                               error=os.strerror(dev.error))]
    user = _user_name()
    group = dev.group or sysinfo.DEV_GROUP
    reason = reasons.NOT_LET_IN.format(
        node=dev.path, group=group, errname=name, user=user,
        mode="unknown" if dev.mode is None else f"{dev.mode:04o}")
    if dev.mode is not None and not dev.group_readable:
        reason = reason.extended("", reasons.NODE_WITHOUT_GROUP_FIX.format(
            node=dev.path, group=sysinfo.DEV_GROUP, user=user))
    return [reason]


def _not_mapped(dev: sysinfo.DevNode) -> Reason:
    """x86: why the node opened but the mapping that lets the process in was refused."""
    assert dev.map_error is not None
    if dev.map_error != errno.EPERM:
        return reasons.LET_IN_REFUSED.format(node=dev.path,
                                             errname=reasons.errno_name(dev.map_error),
                                             error=os.strerror(dev.map_error))
    modes = rdpmc_modes()
    for path, value in modes:
        if value == 0:
            return reasons.NOT_LET_IN_RDPMC_OFF.format(node=dev.path, path=path)
    path, value = modes[0] if modes else (EVENT_SOURCE / "cpu" / "rdpmc", None)
    return reasons.NOT_LET_IN_RDPMC_NOT_ALWAYS.format(node=dev.path, path=path,
                                                      value=value)


def _x86_driver_settings(attrs: dict[str, str]) -> list[Reason]:
    """Why the loaded x86 driver's counters cannot be read on any CPU: the counters off
    (rdpmc_fixed, where present, not 1); a module with sysfs access: this process cannot
    be let in (not_let_in(), where access is "members"; "everyone" means the cpu PMU's
    rdpmc is 2); an older one, without access: user RDPMC not always allowed (every cpu
    PMU's rdpmc must be 2: cpu, or cpu_core and cpu_atom)."""
    found = []
    if "access" not in attrs:
        for path, value in rdpmc_modes():
            if value != 2:
                found.append(reasons.RDPMC_NOT_ALWAYS.format(path=path, value=value))
    fixed = attrs.get("rdpmc_fixed")
    if fixed is not None and fixed.strip() != "1":
        found.append(reasons.DRIVER_FIXED_OFF.format(value=fixed.strip()))
    if "access" in attrs:
        found += not_let_in(attrs, x86=True)
    return found


def driver_rings(attrs: dict[str, str]) -> tuple[str, ...] | None:
    """What the driver's counters count, from its ring attribute (arm64); None where the
    driver does not say (x86, not loaded, unparsable)."""
    try:
        ring = int(attrs["ring"].strip(), 0)
    except (KeyError, ValueError):
        return None
    return tuple(name for name, bit in RING_BITS if ring & bit) or None


def _no_native() -> Reason:
    return reasons.as_reason(native_error, reasons.NO_NATIVE.code)


@dataclass
class DriverPlacement:
    """What the driver's sysfs says about reading its counters here."""

    found: list[Reason] = field(default_factory=list)  # the driver is unusable: why
    notes: list[Reason] = field(default_factory=list)
    counters: tuple[str, ...] = ("cycles", "instructions")
    cpus: list[int] = field(default_factory=list)  # allowed CPUs whose counters are placed
    cpu_problems: list[Reason] = field(default_factory=list)  # why each other allowed CPU is not


def arm64_placement(sysfs: Path, attrs: dict[str, str], allowed: list[int],
                    facts: dict[str, object]) -> DriverPlacement:
    """driver_cpu_placement() of the arm64 driver."""
    return driver_cpu_placement("aarch64", sysfs, attrs, allowed, facts)


def x86_placement(sysfs: Path, attrs: dict[str, str], allowed: list[int],
                  facts: dict[str, object]) -> DriverPlacement:
    """driver_cpu_placement() of the x86 driver."""
    return driver_cpu_placement("x86_64", sysfs, attrs, allowed, facts)


def driver_cpu_placement(arch: str, sysfs: Path, attrs: dict[str, str], allowed: list[int],
                         facts: dict[str, object]) -> DriverPlacement:
    """Check the driver's settings and its per-CPU placement (cpuN/) for the CPUs this
    process may run on; fill facts with a summary. x86
    (docs/ABI/sysfs-devices-system-simple-pmu): indices are RDPMC operands, instructions
    are event 0xc0, there is no event_width, and a CPU whose cpuN/user_access is 0 is
    closed; arm64: instructions are 0x08, and user_access and event_width are the
    driver's (top level)."""
    x86 = sysinfo.is_x86(arch)
    result = DriverPlacement()
    access = attrs.get("user_access")
    if not x86 and access is not None and access.strip() != "1":
        result.found.append(reasons.DRIVER_USER_ACCESS_OFF.format(value=access.strip()))
    per_cpu = driver_placement(sysfs, arch)
    needed = (("events", "events" in attrs),
              *(() if x86 else (("event_width", "event_width" in attrs),)),
              ("cpuN/ directories", bool(per_cpu)))
    missing = [what for what, present in needed if not present]
    if missing:
        result.found.append(reasons.DRIVER_OLD_ABI.format(missing=", ".join(missing)))
        return result
    try:
        events = parse_events(attrs["events"])
    except ValueError:
        result.found.append(reasons.DRIVER_MALFORMED.format(path=sysfs / "events",
                                                            value=attrs["events"]))
        return result
    if not x86:
        width = attrs["event_width"].strip()
        if width not in ("32", "64"):
            result.found.append(reasons.DRIVER_MALFORMED.format(path=sysfs / "event_width",
                                                                value=width))
    insn = X86_INST_RETIRED if x86 else INST_RETIRED
    if insn not in events:
        result.counters = ("cycles",)
        result.notes.append(reasons.DRIVER_NO_INSN.format(event=f"{insn:#04x}",
                                                          value=attrs["events"].strip()))
    for cpu in allowed:
        problem = _cpu_problem(sysfs, cpu, per_cpu.get(cpu), events, x86)
        if problem is None:
            result.cpus.append(cpu)
        else:
            result.cpu_problems.append(problem)
    facts["placement"] = placement_summary(per_cpu, events)
    facts["interventions"] = sum(p.interventions or 0 for p in per_cpu.values())
    facts["kvm_deferrals"] = sum(p.kvm_deferrals or 0 for p in per_cpu.values())
    return result


def _cpu_problem(sysfs: Path, cpu: int, place: CpuPlacement | None,
                 events: list[int], x86: bool = False) -> Reason | None:
    """Why the driver's counters cannot be read on cpu, or None."""
    path = sysfs / f"cpu{cpu}"
    if place is None:
        return reasons.DRIVER_CPU_ABSENT.format(cpu=cpu, path=path)
    access = place.raw.get("user_access")
    if x86 and access is not None and access.strip() != "1":
        # The driver's own verdict for this CPU (every slot placed; an older one: rdpmc 2).
        return reasons.DRIVER_USER_ACCESS_OFF.format(
            value=f"{access.strip()} in {path / 'user_access'}")
    if place.cycle_index is None:
        return reasons.DRIVER_MALFORMED.format(path=path / "cycle_index",
                                               value=place.raw.get("cycle_index", ""))
    if place.cycle_index == NO_INDEX:
        return reasons.DRIVER_CPU_NOT_PLACED.format(cpu=cpu, path=path / "cycle_index")
    raw_events = place.raw.get("event_index", "")
    if place.event_index is None or len(place.event_index) != len(events):
        return reasons.DRIVER_MALFORMED.format(path=path / "event_index", value=raw_events)
    for event, idx in zip(events, place.event_index, strict=True):
        if idx == NO_INDEX:
            return reasons.DRIVER_CPU_EVENT_NOT_PLACED.format(
                cpu=cpu, event=f"{event:#x}", path=path / "event_index", value=raw_events)
    return None


def placement_summary(per_cpu: dict[int, CpuPlacement], events: list[int]) -> str:
    """Where the counters are: "every CPU: cycles 31, 0x8 5", else one entry per CPU."""
    def one(place: CpuPlacement) -> str:
        if place.cycle_index is None or place.event_index is None:
            return "unreadable"
        return ", ".join([f"cycles {place.cycle_index}"] +
                         [f"{ev:#x} {idx}" for ev, idx in
                          zip(events, place.event_index, strict=False)])
    shown = {cpu: one(place) for cpu, place in per_cpu.items()}
    if len(set(shown.values())) == 1:
        return f"every CPU: {next(iter(shown.values()))}"
    return "; ".join(f"cpu{cpu}: {text}" for cpu, text in shown.items())


def _recheck_ms(attrs: dict[str, str]) -> int:
    try:
        return max(0, int(attrs.get("recheck_ms", "").strip()))
    except ValueError:
        return DEFAULT_RECHECK_MS


def _driver_reads(read: Callable[[], int]) -> Callable[[], object]:
    """In the child: cycles.h's perfmon_available() on this CPU first, then two reads."""
    reads = _two_reads(read)

    def run() -> object:
        assert native is not None
        available = native.driver_available()
        if available <= 0:
            return {"refused": available}
        return reads()
    return run


def _driver_trials(backend: Backend, attrs: dict[str, str], cpus: list[int]) -> Backend:
    """Trial reads on the given CPUs; usable where they work (see the module docstring).

    A CPU where perf ran a moment ago faults (or its counters stand still) until the
    module's next check: each CPU is retried until 2 * recheck_ms + RETRY_MARGIN_S after
    the first attempt. The driver is usable when at least one CPU worked; Backend.cpus
    lists those, and the notes name the others.
    """
    assert native is not None
    recheck_ms = _recheck_ms(attrs)
    started = time.monotonic()
    retry = _Retry(started + 2 * recheck_ms / 1000 + RETRY_MARGIN_S, started)
    reads = [("the cycle counter", _driver_reads(native.driver_cycles))]
    if "instructions" in backend.counters:
        reads.append(("the instructions counter", _driver_reads(native.driver_instructions)))
    good: list[int] = []
    failed: list[Reason] = []
    for cpu in cpus:
        problem = None
        for what, call in reads:
            problem = retry.run(what, cpu, call)
            if problem is not None:
                break
        if problem is None:
            good.append(cpu)
        else:
            failed.append(problem)
    facts = dict(backend.facts, recheck_ms=recheck_ms, verified_cpus=good)
    if not good:
        return Backend(backend.name, backend.description, False, tuple(failed), backend.notes,
                       facts=facts, scope=backend.scope, rings=backend.rings)
    notes = list(backend.notes)
    if retry.waited_ms:
        notes.append(reasons.DRIVER_WAITED.format(
            cpus=",".join(map(str, sorted(retry.waited_ms))),
            ms=max(retry.waited_ms.values()), recheck_ms=recheck_ms))
    notes += [reasons.DRIVER_NOT_ON_CPU.format(problem=p) for p in failed]
    return Backend(backend.name, backend.description, True, (), tuple(notes), backend.counters,
                   facts, tuple(good), backend.scope, backend.rings)


def _x86_driver_hardware(cpu: CpuInfo, facts: dict[str, object]) -> list[Reason]:
    pm = cpu.perfmon
    if pm is None:
        return []
    facts.update(perfmon_version=pm.version, fixed_counters=pm.num_fixed,
                 fixed_width=pm.fixed_width, gp_counters=pm.num_gp, gp_width=pm.gp_width)
    if pm.version == 0:
        found = [reasons.X86_NO_PERFMON.format(vendor=cpu.vendor, version=pm.version)]
        if cpu.vendor == "GenuineIntel" and cpu.hypervisor:
            found.append(reasons.HYPERVISOR_NO_VPMU.format(hypervisor=cpu.hypervisor))
        return found
    if pm.version == 1:
        return [reasons.X86_PERFMON_V1.format()]
    found = []
    for index, event in ((0, "instructions retired"), (1, "core cycles")):
        if not pm.fixed_mask >> index & 1:
            found.append(reasons.X86_NO_FIXED.format(index=index, event=event))
    for bit, event in ((0, "core cycles"), (1, "instructions retired")):
        if pm.events_unavailable >> bit & 1:
            found.append(reasons.X86_EVENT_UNAVAILABLE.format(event=event))
    return found


def _perf_facts() -> dict[str, object]:
    return {"perf_event_paranoid": read_int(PARANOID), "cpu_pmus": cpu_pmus()}


def _no_pmu_reasons(cpu: CpuInfo) -> list[Reason]:
    if cpu_pmus():
        return []
    names = ", ".join(X86_CPU_PMUS) if _is_x86(cpu) else "armv8_*/armv9_* (with a cpus file)"
    return [reasons.NO_CPU_PMU.format(path=EVENT_SOURCE, names=names)]


def _perf_backend(name: str, description: str, usable: bool, found: list[Reason],
                  notes: list[Reason], counters: tuple[str, ...],
                  facts: dict[str, object]) -> Backend:
    return Backend(name, description, usable, tuple(found), tuple(notes),
                   counters if usable else (), facts, scope=perf.SCOPE, rings=perf.RINGS)


@dataclass
class _GroupTrial:
    """What opening and reading the {cycles, instructions} perf group showed."""

    found: list[Reason] = field(default_factory=list)  # cycles cannot be read: why
    notes: list[Reason] = field(default_factory=list)
    counters: tuple[str, ...] = ()


def _open_group(cpu: CpuInfo, trial: _GroupTrial, user_access: bool,
                facts: dict[str, object]) -> PerfGroup | None:
    """The group, or None with trial.found saying why (ENOENT: and why that is)."""
    try:
        group = PerfGroup.open(user_access=user_access)
    except PerfError as exc:
        trial.found.append(reasons.as_reason(exc.reason, exc.code))
        if exc.errno == errno.ENOENT:
            trial.found += _no_pmu_reasons(cpu) + _no_vpmu(cpu)
        return None
    except CounterUnavailable as exc:
        trial.found.append(reasons.as_reason(str(exc), exc.code))
        return None
    facts["group"] = list(group.names)
    for problem in group.problems.values():
        trial.notes.append(reasons.PERF_NO_INSN.format(detail=problem))
    return group


def _group_reads(group: PerfGroup, trial: _GroupTrial, facts: dict[str, object],
                 where: str = "any") -> None:
    """Two read(2)s of the group around the known loop: which counters advance, whether
    the group ran (time_running), and the running ratio so far."""
    assert native is not None
    try:
        first = group.read()
        native.known_loop(SPIN_ITERATIONS)
        second = group.read()
    except (OSError, CounterUnavailable) as exc:
        trial.found.append(reasons.READ_FAILED.format(event=group.names[0], error=exc))
        return
    facts["running_ratio"] = second.ratio
    if second.time_running == first.time_running:
        trial.found.append(reasons.PERF_NOT_SCHEDULED.format(
            enabled=second.time_enabled - first.time_enabled))
        return
    counters = []
    for event in group.names:
        a, b = first.counts[event], second.counts[event]
        if a != b:
            counters.append(event)
            continue
        problem = reasons.NOT_COUNTING.format(what=f"the perf {event} event", cpu=where,
                                              first=a, second=b)
        if event == "cycles":
            trial.found.append(problem)
        else:
            trial.notes.append(reasons.PERF_NO_INSN.format(detail=problem))
    trial.counters = tuple(counters)


def probe_perf_rdpmc(cpu: CpuInfo) -> Backend:
    name = "perf-rdpmc"
    description = ("perf self-monitoring: mmap page + RDPMC" if _is_x86(cpu)
                   else "perf self-monitoring: mmap page + mrs at EL0")
    facts = _perf_facts()
    if _is_x86(cpu):
        mode = rdpmc_mode()
        facts["rdpmc"], facts["rdpmc_path"] = (mode[1], str(mode[0])) if mode else (None, None)
    else:
        facts["perf_user_access"] = read_int(PERF_USER_ACCESS)
    if native is None:
        return _perf_backend(name, description, False, [_no_native()], [], (), facts)
    trial = _GroupTrial()
    if _is_x86(cpu):
        mode = rdpmc_mode()
        if mode is not None and mode[1] == 0:
            trial.found.append(reasons.RDPMC_OFF.format(path=mode[0]))
    else:
        access = facts["perf_user_access"]
        if access is None:
            trial.found.append(reasons.PERF_USER_ACCESS_ABSENT.format(path=PERF_USER_ACCESS))
        elif access == 0:
            trial.found.append(reasons.PERF_USER_ACCESS_OFF.format(path=PERF_USER_ACCESS,
                                                                   value=access))
    group = _open_group(cpu, trial, True, facts)
    if group is not None:
        try:
            _group_reads(group, trial, facts)
            _rdpmc_pages(group, trial)
        finally:
            group.close()
    if not trial.found:
        trial.found += _trial("a perf cycles event", _allowed_cpus(),
                              _self_monitor_reads("cycles"))
    return _perf_backend(name, description, not trial.found, trial.found, trial.notes,
                         trial.counters, facts)


def _rdpmc_pages(group: PerfGroup, trial: _GroupTrial) -> None:
    """Whether each counting member's mmap page allows user-space reads now."""
    counters = []
    for event in trial.counters:
        try:
            monitor = SelfMonitor.on(event, group.fd(event))
        except OSError as exc:
            problem: Reason | None = reasons.MMAP_FAILED.format(event=event, error=exc)
        else:
            try:
                problem = monitor.problem()
            finally:
                monitor.close()
        if problem is None:
            counters.append(event)
        elif event == "cycles":
            trial.found.append(problem)
        else:
            trial.notes.append(reasons.PERF_NO_INSN.format(detail=problem))
    trial.counters = tuple(counters)


def _self_monitor_reads(event: str) -> Callable[[], object]:
    """Open the event, read its page twice, close: fresh in a child too (the perf mmap
    is not inherited: VM_DONTCOPY)."""
    def run() -> object:
        monitor = SelfMonitor.open(event)
        try:
            return _two_reads(monitor.read)()
        finally:
            monitor.close()
    return run


def probe_perf_read(cpu: CpuInfo) -> Backend:
    name, description = "perf-read", "perf_event_open() and read(2) of one group"
    facts = _perf_facts()
    if native is None:
        return _perf_backend(name, description, False, [_no_native()], [], (), facts)
    trial = _GroupTrial()
    group = _open_group(cpu, trial, False, facts)
    if group is not None:
        try:
            _group_reads(group, trial, facts)
        finally:
            group.close()
    return _perf_backend(name, description, not trial.found, trial.found, trial.notes,
                         trial.counters, facts)


def probe_timer(cpu: CpuInfo) -> Backend:
    name = "timer"
    description = ("time-stamp counter (RDTSC)" if _is_x86(cpu)
                   else "generic timer (CNTVCT_EL0)")
    facts: dict[str, object] = {}
    if native is None:
        return Backend(name, description, False, (_no_native(),), facts=facts)
    notes: list[Reason] = []
    if _is_x86(cpu):
        invariant = {"constant_tsc", "nonstop_tsc"} <= cpu.flags
        facts["invariant"] = invariant
        if "tsc" not in cpu.flags:
            return Backend(name, description, False, (reasons.NO_TSC.format(),), facts=facts)
        if not invariant:
            notes.append(reasons.TSC_NOT_INVARIANT.format())
    found = _trial("the timer", _allowed_cpus()[:1], _two_reads(native.guarded_tsc))
    if found:
        return Backend(name, description, False, tuple(found), facts=facts)
    freq = timer_frequency()
    facts.update(frequency_hz=freq.hz, frequency_source=freq.source)
    return Backend(name, description, True, (), tuple(notes), ("ticks",), facts)


def probe() -> Report:
    """Probe every backend. Takes a few hundred ms (trial reads on each CPU, timer
    calibration, and with the module loaded up to 2 * recheck_ms waiting for access
    after perf)."""
    cpu = cpu_info()
    if cpu.arch not in ("x86_64", "aarch64"):
        reason = (reasons.ARCH_UNSUPPORTED.format(arch=cpu.arch),)
        names = (*COUNTER_BACKENDS, "timer")
        return Report(cpu, tuple(Backend(n, n, False, reason) for n in names), native_error)
    # perf first, the driver last: see the module docstring.
    rdpmc, read, timer = probe_perf_rdpmc(cpu), probe_perf_read(cpu), probe_timer(cpu)
    return Report(cpu, (probe_driver(cpu), rdpmc, read, timer), native_error)


def driver_refusal_transient(report: Report) -> bool:
    """The report's driver is unusable only because its trial reads faulted until the
    retry bound, where that is transient: arm64 with perf_user_access (5.17+), where
    perf withdraws EL0 access whenever it uses the PMU on a CPU (it was using it all
    along) and the module gives it back. Elsewhere a fault does not pass by itself
    (x86: RDPMC trapped; arm64 before 5.17 perf leaves access alone), and counters that
    stand still (not_counting) are a mismatch, not a moment."""
    driver = report.get("driver")
    return (report.cpu.arch == "aarch64" and Path(sysinfo.PERF_USER_ACCESS).exists()
            and not driver.usable and bool(driver.reasons)
            and all(reasons.as_reason(r).code == reasons.TRIAL_FAULT.code
                    for r in driver.reasons))


def reprobe_driver(report: Report) -> Report:
    """The report with the driver probed again (the perf backends as they were)."""
    driver = probe_driver(report.cpu)
    return Report(report.cpu, tuple(driver if b.name == "driver" else b
                                    for b in report.backends), report.native_error)
