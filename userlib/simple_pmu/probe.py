"""probe(): which counter backend works here, and precisely why each other one does not.

Backends, best first:
  driver      the simple-pmu module: RDPMC of Intel fixed counters / on arm64 the counters
              perf placed the driver's CPU_CYCLES and INST_RETIRED events in, per CPU
              (sysfs cpuN/cycle_index, cpuN/event_index), read through cycles.h
  perf-rdpmc  perf self-monitoring: a perf event's mmap page plus RDPMC / mrs
  perf-read   perf_event_open() and read(2): one system call per reading
  timer       the time-stamp counter (x86) / generic timer (arm64): time, not cycles

Every instruction that can fault is first tried in a forked child (simple_pmu.child):
probing never kills the caller.

Order (arm64): any perf event that runs on a CPU makes the kernel's arm_pmu driver
withdraw EL0 counter access there (PMUSERENR_EL0 = 0); the simple-pmu module puts it back
within 2 * recheck_ms. probe() therefore tries the perf backends first and the driver
last, retrying the driver's trial read on each CPU until it works or that bound (plus a
margin) has passed: when probe() says the driver is usable, its counters are readable on
the CPUs listed in Backend.cpus right now, and nothing in probe() touches perf after that.
A CPU where the driver's events have no readable counter (cpuN/cycle_index or an entry of
cpuN/event_index is -1) is not tried: the driver keeps user access closed there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from simple_pmu import reasons, sysinfo
from simple_pmu.child import ChildResult, run_in_child
from simple_pmu.native import native, native_error
from simple_pmu.perf import PerfError, SelfMonitor, open_event, read_count
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
    read_int,
)
from simple_pmu.timer import timer_frequency

COUNTER_BACKENDS = ("driver", "perf-rdpmc", "perf-read")
SPIN_ITERATIONS = 100_000  # known_loop iterations between two trial reads
INST_RETIRED = 0x08
DEFAULT_RECHECK_MS = 100  # the module's default period (sysfs recheck_ms)
RETRY_MARGIN_S = 0.1  # beyond the documented 2 * recheck_ms
RETRY_PAUSE_S = 0.01


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    usable: bool
    reasons: tuple[str, ...] = ()  # why it is not usable, most basic first
    notes: tuple[str, ...] = ()  # limits of a usable backend, or context
    counters: tuple[str, ...] = ()  # what it reads when usable
    facts: dict[str, object] = field(default_factory=dict)
    cpus: tuple[int, ...] = ()  # driver: the CPUs where a trial read just worked

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


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

    def best(self, counter: str = "cycles") -> Backend | None:
        """The first usable counter backend that reads counter."""
        for name in COUNTER_BACKENDS:
            backend = self.get(name)
            if backend.usable and counter in backend.counters:
                return backend
        return None

    def unusable_summary(self) -> str:
        return "; ".join(f"{b.name}: {b.reason}" for b in self.backends
                         if b.name in COUNTER_BACKENDS and not b.usable)

    def to_dict(self) -> dict[str, object]:
        return {
            "cpu": self.cpu.to_dict(),
            "native_error": self.native_error or None,
            "backends": [dict(asdict(b), reason=b.reason) for b in self.backends],
        }


def _is_x86(cpu: CpuInfo) -> bool:
    return cpu.arch == "x86_64"


def _allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _pinned(cpu: int, call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        os.sched_setaffinity(0, {cpu})
        return call()
    return run


def _two_reads(read: Callable[[], int]) -> Callable[[], object]:
    """Read, run the known loop, read again: in the child, the reads may fault.

    A guarded driver read raises CounterFault instead of dying: reported as the signal.
    """
    def run() -> object:
        assert native is not None
        try:
            first = read()
            native.known_loop(SPIN_ITERATIONS)
            return [first, read()]
        except native.CounterFault as exc:
            return {"fault": getattr(exc, "signal", "SIGILL")}
    return run


def _trial_one(what: str, cpu: int, call: Callable[[], object]) -> tuple[str | None, bool]:
    """Run call pinned to cpu in a child: (why it failed or None, whether retrying may help)."""
    result: ChildResult = run_in_child(_pinned(cpu, call))
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


def _trial(what: str, cpus: list[int], call: Callable[[], object]) -> list[str]:
    """Run call on each CPU in a child; the reasons it failed (none if it worked)."""
    return [problem for cpu in cpus
            if (problem := _trial_one(what, cpu, call)[0]) is not None]


@dataclass
class _Retry:
    """The driver's trial on one CPU, retried until it works or the deadline passes."""

    deadline: float
    started: float
    waited_ms: dict[int, int] = field(default_factory=dict)  # CPU -> ms until it worked

    def run(self, what: str, cpu: int, call: Callable[[], object]) -> str | None:
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
                    problem += reasons.RETRIED.format(attempts=attempts, ms=self._elapsed_ms())
                return problem
            time.sleep(RETRY_PAUSE_S)

    def _elapsed_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)


def _no_vpmu(cpu: CpuInfo) -> list[str]:
    if cpu.hypervisor and not cpu_pmus():
        return [reasons.HYPERVISOR_NO_VPMU.format(hypervisor=cpu.hypervisor)]
    return []


def probe_driver(cpu: CpuInfo) -> Backend:
    name, counters = "driver", ("cycles", "instructions")
    description = ("simple-pmu driver: RDPMC of fixed counters" if _is_x86(cpu)
                   else "simple-pmu driver: the cycle and INST_RETIRED counters perf placed"
                   " its events in, per CPU")
    sysfs = sysinfo.SYSFS_DIR
    attrs = driver_attrs(sysfs)
    facts: dict[str, object] = {"module": "loaded" if sysfs.is_dir() else "not loaded",
                                "sysfs": str(sysfs)}
    facts.update({f"sysfs.{k}": v for k, v in attrs.items() if "\n" not in v})
    found: list[str] = []
    notes: list[str] = []
    cpus = _allowed_cpus()
    if native is None:
        return Backend(name, description, False, (native_error,), facts=facts)
    if not sysfs.is_dir():
        found.append(reasons.DRIVER_NOT_LOADED.format(path=sysfs))
    if _is_x86(cpu):
        found += _x86_driver_hardware(cpu, facts)
        mode = rdpmc_mode()
        if mode is not None:
            facts["rdpmc"] = f"{mode[0]} = {mode[1]}"
            if sysfs.is_dir() and mode[1] != 2:
                found.append(reasons.RDPMC_NOT_ALWAYS.format(path=mode[0], value=mode[1]))
        if attrs.get("rdpmc_fixed", "1").strip() == "0":
            found.append(reasons.DRIVER_FIXED_OFF.format(value=attrs["rdpmc_fixed"]))
    elif sysfs.is_dir():
        placement = arm64_placement(sysfs, attrs, cpus, facts)
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
        return Backend(name, description, False, tuple(found), tuple(notes), facts=facts)
    return _driver_trials(Backend(name, description, False, (), tuple(notes), counters, facts),
                          attrs, cpus)


@dataclass
class Arm64Placement:
    """What the arm64 driver's sysfs says about reading its counters here."""

    found: list[str] = field(default_factory=list)  # the driver is unusable: why
    notes: list[str] = field(default_factory=list)
    counters: tuple[str, ...] = ("cycles", "instructions")
    cpus: list[int] = field(default_factory=list)  # allowed CPUs whose counters are placed
    cpu_problems: list[str] = field(default_factory=list)  # why each other allowed CPU is not


def arm64_placement(sysfs: Path, attrs: dict[str, str], allowed: list[int],
                    facts: dict[str, object]) -> Arm64Placement:
    """Check the arm64 driver's settings and its per-CPU placement (cpuN/) for the CPUs
    this process may run on; fill facts with a summary."""
    result = Arm64Placement()
    access = attrs.get("user_access")
    if access is not None and access.strip() != "1":
        result.found.append(reasons.DRIVER_USER_ACCESS_OFF.format(value=access.strip()))
    per_cpu = driver_placement(sysfs)
    missing = [what for what, present in (("events", "events" in attrs),
                                          ("event_width", "event_width" in attrs),
                                          ("cpuN/ directories", bool(per_cpu)))
               if not present]
    if missing:
        result.found.append(reasons.DRIVER_OLD_ABI.format(missing=", ".join(missing)))
        return result
    try:
        events = parse_events(attrs["events"])
    except ValueError:
        result.found.append(reasons.DRIVER_MALFORMED.format(path=sysfs / "events",
                                                            value=attrs["events"]))
        return result
    width = attrs["event_width"].strip()
    if width not in ("32", "64"):
        result.found.append(reasons.DRIVER_MALFORMED.format(path=sysfs / "event_width",
                                                            value=width))
    if INST_RETIRED not in events:
        result.counters = ("cycles",)
        result.notes.append(reasons.DRIVER_NO_INSN.format(value=attrs["events"].strip()))
    for cpu in allowed:
        problem = _cpu_problem(sysfs, cpu, per_cpu.get(cpu), events)
        if problem is None:
            result.cpus.append(cpu)
        else:
            result.cpu_problems.append(problem)
    facts["placement"] = placement_summary(per_cpu, events)
    facts["interventions"] = sum(p.interventions or 0 for p in per_cpu.values())
    facts["kvm_deferrals"] = sum(p.kvm_deferrals or 0 for p in per_cpu.values())
    return result


def _cpu_problem(sysfs: Path, cpu: int, place: CpuPlacement | None,
                 events: list[int]) -> str | None:
    """Why the driver's counters cannot be read on cpu, or None."""
    path = sysfs / f"cpu{cpu}"
    if place is None:
        return reasons.DRIVER_CPU_ABSENT.format(cpu=cpu, path=path)
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
    failed: list[str] = []
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
    facts = dict(backend.facts, recheck_ms=recheck_ms,
                 verified_cpus=",".join(map(str, good)) or "none")
    if not good:
        return Backend(backend.name, backend.description, False, tuple(failed), backend.notes,
                       facts=facts)
    notes = list(backend.notes)
    if retry.waited_ms:
        notes.append(reasons.DRIVER_WAITED.format(
            cpus=",".join(map(str, sorted(retry.waited_ms))),
            ms=max(retry.waited_ms.values()), recheck_ms=recheck_ms))
    notes += [reasons.DRIVER_NOT_ON_CPU.format(problem=p) for p in failed]
    return Backend(backend.name, backend.description, True, (), tuple(notes), backend.counters,
                   facts, tuple(good))


def _x86_driver_hardware(cpu: CpuInfo, facts: dict[str, object]) -> list[str]:
    pm = cpu.perfmon
    if pm is None:
        return []
    facts.update(perfmon_version=pm.version, fixed_counters=pm.num_fixed,
                 fixed_width=pm.fixed_width)
    if pm.version == 0:
        found = [reasons.X86_NO_PERFMON.format(vendor=cpu.vendor, version=pm.version)]
        if cpu.vendor == "GenuineIntel" and cpu.hypervisor:
            found.append(reasons.HYPERVISOR_NO_VPMU.format(hypervisor=cpu.hypervisor))
        return found
    if pm.version == 1:
        return [reasons.X86_PERFMON_V1]
    found = []
    for index, event in ((0, "instructions retired"), (1, "core cycles")):
        if not pm.fixed_mask >> index & 1:
            found.append(reasons.X86_NO_FIXED.format(index=index, event=event))
    for bit, event in ((0, "core cycles"), (1, "instructions retired")):
        if pm.events_unavailable >> bit & 1:
            found.append(reasons.X86_EVENT_UNAVAILABLE.format(event=event))
    return found


def _perf_facts() -> dict[str, object]:
    facts: dict[str, object] = {"perf_event_paranoid": read_int(PARANOID),
                                "cpu_pmus": ",".join(cpu_pmus()) or "none"}
    return facts


def _no_pmu_reasons(cpu: CpuInfo) -> list[str]:
    if cpu_pmus():
        return []
    names = ", ".join(X86_CPU_PMUS) if _is_x86(cpu) else "armv8_*/armv9_* (with a cpus file)"
    return [reasons.NO_CPU_PMU.format(path=EVENT_SOURCE, names=names)]


def probe_perf_rdpmc(cpu: CpuInfo) -> Backend:
    name = "perf-rdpmc"
    description = ("perf self-monitoring: mmap page + RDPMC" if _is_x86(cpu)
                   else "perf self-monitoring: mmap page + mrs at EL0")
    facts = _perf_facts()
    if native is None:
        return Backend(name, description, False, (native_error,), facts=facts)
    found: list[str] = []
    if _is_x86(cpu):
        mode = rdpmc_mode()
        facts["rdpmc"] = f"{mode[0]} = {mode[1]}" if mode else "absent"
        if mode is not None and mode[1] == 0:
            found.append(reasons.RDPMC_OFF.format(path=mode[0]))
    else:
        access = read_int(PERF_USER_ACCESS)
        facts["perf_user_access"] = access
        if access is None:
            found.append(reasons.PERF_USER_ACCESS_ABSENT.format(path=PERF_USER_ACCESS))
        elif access == 0:
            found.append(reasons.PERF_USER_ACCESS_OFF.format(path=PERF_USER_ACCESS, value=access))
    counters, notes = _events(_self_monitor_problem, found, cpu)
    if not found:
        found += _trial("a perf cycles event", _allowed_cpus(), _self_monitor_reads("cycles"))
    if found:
        return Backend(name, description, False, tuple(found), facts=facts)
    return Backend(name, description, True, (), tuple(notes), tuple(counters), facts)


def _events(problem_of: Callable[[str], str | None], found: list[str],
            cpu: CpuInfo) -> tuple[list[str], list[str]]:
    """(counters that work, notes) of a perf backend; a cycles problem goes to `found`
    (the backend is unusable), an instructions one is only a note. ENOENT: say why."""
    counters: list[str] = []
    notes: list[str] = []
    for event in ("cycles", "instructions"):
        problem = problem_of(event)
        if problem is None:
            counters.append(event)
        elif event == "cycles":
            found.append(problem)
        else:
            notes.append(reasons.PERF_NO_INSN.format(detail=problem))
    if any("ENOENT" in r for r in found):
        found += _no_pmu_reasons(cpu) + _no_vpmu(cpu)
    return counters, notes


def _self_monitor_problem(event: str) -> str | None:
    try:
        monitor = SelfMonitor.open(event)
    except PerfError as exc:
        return exc.reason
    except OSError as exc:
        return reasons.MMAP_FAILED.format(event=event, error=exc)
    try:
        return monitor.problem()
    finally:
        monitor.close()


def _self_monitor_reads(event: str) -> Callable[[], object]:
    """For the child: the perf mmap is not inherited (VM_DONTCOPY), so open anew."""
    def run() -> object:
        monitor = SelfMonitor.open(event)
        return _two_reads(monitor.page.read)()
    return run


def probe_perf_read(cpu: CpuInfo) -> Backend:
    name, description = "perf-read", "perf_event_open() and read(2)"
    facts = _perf_facts()
    if native is None:
        return Backend(name, description, False, (native_error,), facts=facts)
    found: list[str] = []
    counters, notes = _events(_read_problem, found, cpu)
    if found:
        return Backend(name, description, False, tuple(found), facts=facts)
    return Backend(name, description, True, (), tuple(notes), tuple(counters), facts)


def _read_problem(event: str) -> str | None:
    try:
        fd = open_event(event)
    except PerfError as exc:
        return exc.reason
    try:
        assert native is not None
        first = read_count(fd)
        native.known_loop(SPIN_ITERATIONS)
        second = read_count(fd)
    except OSError as exc:
        return reasons.READ_FAILED.format(event=event, error=exc)
    finally:
        os.close(fd)
    if second == first:
        return reasons.NOT_COUNTING.format(what=f"the perf {event} event", cpu="any",
                                           first=first, second=second)
    return None


def probe_timer(cpu: CpuInfo) -> Backend:
    name = "timer"
    description = ("time-stamp counter (RDTSC)" if _is_x86(cpu)
                   else "generic timer (CNTVCT_EL0)")
    facts: dict[str, object] = {}
    if native is None:
        return Backend(name, description, False, (native_error,), facts=facts)
    notes: list[str] = []
    if _is_x86(cpu):
        if "tsc" not in cpu.flags:
            return Backend(name, description, False, (reasons.NO_TSC,), facts=facts)
        invariant = {"constant_tsc", "nonstop_tsc"} <= cpu.flags
        facts["invariant"] = invariant
        if not invariant:
            notes.append(reasons.TSC_NOT_INVARIANT)
    found = _trial("the timer", _allowed_cpus()[:1], _two_reads(native.tsc))
    if found:
        return Backend(name, description, False, tuple(found), facts=facts)
    freq = timer_frequency()
    facts.update(frequency_hz=freq.hz, frequency_source=freq.source)
    return Backend(name, description, True, (), tuple(notes), ("ticks",), facts)


def probe() -> Report:
    """Probe every backend. Takes a few hundred ms (child processes, timer calibration,
    and with the module loaded up to 2 * recheck_ms waiting for access after perf)."""
    cpu = cpu_info()
    if cpu.arch not in ("x86_64", "aarch64"):
        reason = (reasons.ARCH_UNSUPPORTED.format(arch=cpu.arch),)
        names = (*COUNTER_BACKENDS, "timer")
        return Report(cpu, tuple(Backend(n, n, False, reason) for n in names), native_error)
    # perf first, the driver last: see the module docstring.
    rdpmc, read, timer = probe_perf_rdpmc(cpu), probe_perf_read(cpu), probe_timer(cpu)
    return Report(cpu, (probe_driver(cpu), rdpmc, read, timer), native_error)
