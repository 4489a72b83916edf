"""Every reason probe(), measure() and the simple-pmu command can give, in one place
(docs/simple-pmu.1 DIAGNOSTICS lists them with their codes).

Each is a Template: a stable code (the constant's name in lower case; JSON output
carries it beside the text) and a str.format text filled with what was found.
Template.format() gives a Reason: the text as a str (so it joins, compares and prints
as before) that also carries .code.
"""

from __future__ import annotations

import errno
import os


class Reason(str):
    """A reason's text with its stable code (a str subclass: use it as the text).

    Immutable like the str it is; copy.copy, copy.deepcopy and pickle give an equal
    Reason with the same code."""

    code: str

    def __new__(cls, code: str, text: str) -> Reason:
        obj = super().__new__(cls, text)
        obj.code = code
        return obj

    def __reduce__(self) -> tuple[type[Reason], tuple[str, str]]:
        # str's own protocol would call Reason(text), without the code.
        return Reason, (self.code, str(self))

    def __copy__(self) -> Reason:
        return self

    def __deepcopy__(self, memo: object) -> Reason:
        return self

    def __repr__(self) -> str:
        return f"Reason({self.code!r}, {str(self)!r})"

    def extended(self, suffix: str) -> Reason:
        """The same reason with more text after it (e.g. RETRIED)."""
        return Reason(self.code, str(self) + suffix)

    def to_dict(self) -> dict[str, str]:
        """The one JSON shape of a reason, everywhere: {"code": ..., "text": ...}."""
        return {"code": self.code, "text": str(self)}


def as_reason(text: str, code: str = "other") -> Reason:
    """text as a Reason: its own code if it is one, else `code`."""
    return text if isinstance(text, Reason) else Reason(code, text)


class Template:
    """A reason's code and text template. (No dataclass: the documentation test loads
    this module on its own, outside sys.modules.)"""

    __slots__ = ("code", "text")

    def __init__(self, code: str, text: str) -> None:
        self.code = code
        self.text = text

    def __repr__(self) -> str:
        return f"Template({self.code!r}, {self.text!r})"

    def format(self, **fields: object) -> Reason:
        return Reason(self.code, self.text.format(**fields))


def _t(code: str, text: str) -> Template:
    return Template(code, text)


# Any backend
NO_NATIVE = _t(
    "no_native",
    "the C extension simple_pmu._native is not available ({error}); build it with 'pip"
    " install .' in userlib/ of a simple-pmu checkout")
NO_COUNTER_BACKEND = _t(
    "no_counter_backend",
    "no counter backend usable for scope {scope}: {summary}")
# Added to NO_COUNTER_BACKEND of the thread scope when the cpu scope has one (same code).
CPU_SCOPE_HINT = ("; scope cpu (measure(scope=\"cpu\")) would count every task on the CPU"
                  " with {backend}")
BACKEND_UNUSABLE = _t(
    "backend_unusable",
    "{backend}: {reason}")
UNKNOWN_BACKEND = _t(
    "unknown_backend",
    "unknown backend '{backend}'; choose from {choices}")
UNKNOWN_SCOPE = _t(
    "unknown_scope",
    "unknown scope '{scope}'; choose from {choices}")
BACKEND_NOT_IN_SCOPE = _t(
    "backend_not_in_scope",
    "backend '{backend}' counts scope '{has}', not '{scope}'")
ARCH_UNSUPPORTED = _t(
    "arch_unsupported",
    "architecture {arch} is not supported (x86-64 and arm64 only)")
TRIAL_FAULT = _t(
    "trial_fault",
    "a trial read of {what} on CPU {cpu} faulted with {signal}")
TRIAL_FAILED = _t(
    "trial_failed",
    "a trial read of {what} on CPU {cpu} failed: {error}")
NOT_COUNTING = _t(
    "not_counting",
    "{what} did not advance across a busy loop on CPU {cpu} ({first} then {second})")
# Added to TRIAL_FAULT / NOT_COUNTING of the driver when it was retried (same code).
RETRIED = " ({attempts} attempts over {ms} ms)"

# The simple-pmu driver
DRIVER_NOT_LOADED = _t(
    "driver_not_loaded",
    "simple-pmu module not loaded: {path} does not exist")
X86_NO_PERFMON = _t(
    "x86_no_perfmon",
    "{vendor} CPU has no architectural perfmon (CPUID leaf 0xA version {version}): the "
    "x86 driver needs Intel fixed counters and refuses to load here")
X86_PERFMON_V1 = _t(
    "x86_perfmon_v1",
    "architectural perfmon version 1 has no fixed counters (CPUID leaf 0xA)")
X86_NO_FIXED = _t(
    "x86_no_fixed",
    "fixed counter {index} ({event}) is not present (CPUID leaf 0xA)")
X86_EVENT_UNAVAILABLE = _t(
    "x86_event_unavailable",
    "CPUID leaf 0xA marks {event} unavailable")
RDPMC_NOT_ALWAYS = _t(
    "rdpmc_not_always",
    "{path} is {value}: user RDPMC outside a task with a perf mmap faults; the driver's "
    "counters need 2")
DRIVER_FIXED_OFF = _t(
    "driver_fixed_off",
    "the driver has the fixed counters off (rdpmc_fixed is {value})")
DRIVER_USER_ACCESS_OFF = _t(
    "driver_user_access_off",
    "the driver's user access is off (user_access is {value})")
DRIVER_OLD_ABI = _t(
    "driver_old_abi",
    "the loaded simple-pmu module does not publish {missing}: it is older than this "
    "library, which reads the per-CPU counter placement (cpuN/cycle_index, "
    "cpuN/event_index, cpuN/generation, event_width)")
DRIVER_MALFORMED = _t(
    "driver_malformed",
    "{path} holds '{value}', which this library cannot parse")
DRIVER_CPU_ABSENT = _t(
    "driver_cpu_absent",
    "CPU {cpu}: the driver publishes no placement for it ({path} is missing)")
DRIVER_CPU_NOT_PLACED = _t(
    "driver_cpu_not_placed",
    "CPU {cpu}: the driver's cycle counter is not on a counter user space can read "
    "({path} is -1: perf has not scheduled the driver's pinned events there, or the CPU "
    "is offline); user access stays closed on that CPU")
DRIVER_CPU_EVENT_NOT_PLACED = _t(
    "driver_cpu_event_not_placed",
    "CPU {cpu}: the driver's event {event} is not on a counter user space can read "
    "({path} is '{value}'); user access stays closed on that CPU")
DRIVER_REFUSES = _t(
    "driver_refuses",
    "cycles.h perfmon_available() returns 0 on CPU {cpu} with the module loaded")
# Notes on a usable driver, not reasons it is unusable.
DRIVER_WAITED = _t(
    "driver_waited",
    "user access on CPU {cpus} came back after {ms} ms: perf had used the PMU there (the "
    "module restores it every recheck_ms = {recheck_ms} ms)")
DRIVER_NOT_ON_CPU = _t(
    "driver_not_on_cpu",
    "not usable on every CPU: {problem}")
DRIVER_NO_INSN = _t(
    "driver_no_insn",
    "no instructions: the driver counts no INST_RETIRED (event {event}) event (events is "
    "'{value}')")

DRIVER_ADVISORY = _t(
    "driver_advisory",
    "advisory: the driver's counters are CPU-wide and {why}: perf may move a counter and "
    "the driver notices only at its next check, so a count can include another counter's "
    "value; use the default scope (perf, this thread) for exact counts")

# measure() with the driver: why the counts of one measurement are None
MEASURE_GENERATION_CHANGED = _t(
    "measure_generation_changed",
    "the driver's counters on CPU {cpu} changed during the measurement "
    "(cpu{cpu}/generation {before} -> {after}: perf moved or reloaded a counter, the CPU "
    "went offline and back, or the settings changed); counts discarded, measure again")

# perf
HYPERVISOR_NO_VPMU = _t(
    "hypervisor_no_vpmu",
    "hypervisor {hypervisor} exposes no virtual PMU to this guest")
NO_CPU_PMU = _t(
    "no_cpu_pmu",
    "no CPU PMU registered with perf ({path} has none of: {names})")
PERF_OPEN_FAILED = _t(
    "perf_open_failed",
    "perf_event_open({event}) failed: {errname} ({meaning})")
RDPMC_OFF = _t(
    "rdpmc_off",
    "{path} is 0: user RDPMC is disabled")
PERF_USER_ACCESS_OFF = _t(
    "perf_user_access_off",
    "{path} is {value}: EL0 counter access through perf is off (sysctl "
    "kernel.perf_user_access=1)")
PERF_USER_ACCESS_ABSENT = _t(
    "perf_user_access_absent",
    "{path} does not exist: this kernel (before 5.17) has no user counter access through "
    "perf on arm64")
NO_CAP_USER_RDPMC = _t(
    "no_cap_user_rdpmc",
    "the {event} event's mmap page has cap_user_rdpmc 0")
INDEX_ZERO = _t(
    "index_zero",
    "the {event} event is not on a hardware counter (mmap page index 0)")
MMAP_FAILED = _t(
    "mmap_failed",
    "mmap of the {event} event failed: {error}")
READ_FAILED = _t(
    "read_failed",
    "read() of the {event} event failed: {error}")
PERF_NO_INSN = _t(
    "perf_no_insn",
    "no instructions: {detail}")
PERF_MULTIPLEXED = _t(
    "perf_multiplexed",
    "the perf events ran {percent:.1f}% of the time they were enabled (time_running"
    " {running} ns of time_enabled {enabled} ns): the PMU was shared (multiplexed) and"
    " the counts cover only that part, unscaled")
PERF_NOT_SCHEDULED = _t(
    "perf_not_scheduled",
    "the perf events were never on the PMU during the measurement (time_running 0 of"
    " time_enabled {enabled} ns): the PMU is in use by others; counts discarded")
PERF_READ_MALFORMED = _t(
    "perf_read_malformed",
    "read() of the perf group returned {detail}")
NO_INSN_COUNTER = _t(
    "no_insn_counter",
    "no instructions counter")

# Counters and Samples (the raw-read API)
COUNTERS_CLOSED = _t(
    "counters_closed",
    "these Counters are closed")
COUNTERS_OTHER_THREAD = _t(
    "counters_other_thread",
    "these Counters ({backend}) belong to the thread (and process) that opened them: its"
    " events count that thread only; open Counters in this thread")
SAMPLES_UNRELATED = _t(
    "samples_unrelated",
    "these Samples come from different Counters: only samples of one subtract")
SAMPLES_MOVED = _t(
    "samples_moved",
    "the driver's counters changed between the two samples ({before} -> {after}: perf"
    " moved or reloaded a counter, or the CPU changed); counts discarded, sample again")

# The time-stamp counter / generic timer
NO_TSC = _t(
    "no_tsc",
    "the CPU has no time-stamp counter ('tsc' flag absent from /proc/cpuinfo)")
TSC_NOT_INVARIANT = _t(
    "tsc_not_invariant",
    "TSC not invariant (no constant_tsc/nonstop_tsc): its rate follows frequency changes")

# What perf_event_open's errno means here; PARANOID is filled with the sysctl's value.
PERF_ERRNO_MEANINGS: dict[int, str] = {
    errno.ENOENT: "no such event here: the kernel has no PMU driver that provides it",
    errno.ENODEV: "the PMU does not support this event or a requested feature",
    errno.EOPNOTSUPP: "the PMU cannot count it with these settings (e.g. exclusion filters)",
    errno.EACCES: ("not permitted: kernel.perf_event_paranoid is {paranoid}; unprivileged"
                   " self-monitoring needs <= 2 (Debian: 3 forbids it) or CAP_PERFMON"),
    errno.EPERM: ("not permitted: kernel.perf_event_paranoid is {paranoid}, or a seccomp filter"
                  " (e.g. a container's default profile) blocks perf_event_open"),
    errno.ENOSYS: "the kernel has no perf events (CONFIG_PERF_EVENTS off) or seccomp blocks it",
    errno.EINVAL: "the kernel rejected the event attributes",
    errno.EMFILE: "the process has too many open files",
    errno.EBUSY: "another user holds the PMU exclusively",
    errno.E2BIG: "the kernel does not know this perf_event_attr size",
}


def errno_name(err: int) -> str:
    """The name the kernel's sources use: EOPNOTSUPP, not glibc's alias ENOTSUP."""
    if err == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"
    return errno.errorcode.get(err, str(err))


def perf_errno_meaning(err: int, paranoid: int | None) -> str:
    template = PERF_ERRNO_MEANINGS.get(err)
    if template is None:
        return os.strerror(err)
    return template.format(paranoid="unreadable" if paranoid is None else paranoid)


def all_templates() -> dict[str, Template]:
    """Name -> Template of every reason above (for the documentation and schema tests)."""
    return {name: value for name, value in globals().items()
            if name.isupper() and isinstance(value, Template)}


def all_codes() -> frozenset[str]:
    """Every code a Reason can carry (besides "other", which as_reason gives plain text)."""
    return frozenset(t.code for t in all_templates().values())
