"""Every reason probe() and measure() can give, in one place (docs/simple-pmu.1
DIAGNOSTICS lists them).

Each is a str.format template; the fields are filled with what was found.
"""

from __future__ import annotations

import errno
import os

# Any backend
NO_NATIVE = "the C extension simple_pmu._native is not available ({error})"
ARCH_UNSUPPORTED = "architecture {arch} is not supported (x86-64 and arm64 only)"
TRIAL_FAULT = "a trial read of {what} on CPU {cpu} faulted with {signal}"
TRIAL_FAILED = "a trial read of {what} on CPU {cpu} failed: {error}"
NOT_COUNTING = "{what} did not advance across a busy loop on CPU {cpu} ({first} then {second})"
RETRIED = " ({attempts} attempts over {ms} ms)"

# The simple-pmu driver
DRIVER_NOT_LOADED = "simple-pmu module not loaded: {path} does not exist"
X86_NO_PERFMON = ("{vendor} CPU has no architectural perfmon (CPUID leaf 0xA version {version}):"
                  " the x86 driver needs Intel fixed counters and refuses to load here")
X86_PERFMON_V1 = "architectural perfmon version 1 has no fixed counters (CPUID leaf 0xA)"
X86_NO_FIXED = "fixed counter {index} ({event}) is not present (CPUID leaf 0xA)"
X86_EVENT_UNAVAILABLE = "CPUID leaf 0xA marks {event} unavailable"
RDPMC_NOT_ALWAYS = ("{path} is {value}: user RDPMC outside a task with a perf mmap faults;"
                    " the driver's counters need 2")
DRIVER_FIXED_OFF = "the driver has the fixed counters off (rdpmc_fixed is {value})"
DRIVER_USER_ACCESS_OFF = "the driver's user access is off (user_access is {value})"
DRIVER_OLD_ABI = ("the loaded simple-pmu module does not publish {missing}: it is older than"
                  " this library, which reads the per-CPU counter placement (cpuN/cycle_index,"
                  " cpuN/event_index, cpuN/generation, event_width)")
DRIVER_MALFORMED = "{path} holds '{value}', which this library cannot parse"
DRIVER_CPU_ABSENT = "CPU {cpu}: the driver publishes no placement for it ({path} is missing)"
DRIVER_CPU_NOT_PLACED = ("CPU {cpu}: the driver's cycle counter is not on a counter user space"
                         " can read ({path} is -1: perf has not scheduled the driver's pinned"
                         " events there, or the CPU is offline); user access stays closed on"
                         " that CPU")
DRIVER_CPU_EVENT_NOT_PLACED = ("CPU {cpu}: the driver's event {event} is not on a counter user"
                               " space can read ({path} is '{value}'); user access stays closed"
                               " on that CPU")
DRIVER_REFUSES = "cycles.h perfmon_available() returns 0 on CPU {cpu} with the module loaded"
# Notes on a usable driver, not reasons it is unusable.
DRIVER_WAITED = ("user access on CPU {cpus} came back after {ms} ms: perf had used the PMU"
                 " there (the module restores it every recheck_ms = {recheck_ms} ms)")
DRIVER_NOT_ON_CPU = "not usable on every CPU: {problem}"
DRIVER_NO_INSN = ("no instructions: the driver counts no INST_RETIRED (event 0x08) event"
                  " (events is '{value}')")

# measure() with the driver: why the counts of one measurement are None
MEASURE_GENERATION_CHANGED = ("the driver's counters on CPU {cpu} changed during the"
                              " measurement (cpu{cpu}/generation {before} -> {after}: perf"
                              " moved or reloaded a counter, the CPU went offline and back, or"
                              " the settings changed); counts discarded, measure again")

# perf
HYPERVISOR_NO_VPMU = "hypervisor {hypervisor} exposes no virtual PMU to this guest"
NO_CPU_PMU = "no CPU PMU registered with perf ({path} has none of: {names})"
PERF_OPEN_FAILED = "perf_event_open({event}) failed: {errname} ({meaning})"
RDPMC_OFF = "{path} is 0: user RDPMC is disabled"
PERF_USER_ACCESS_OFF = ("{path} is {value}: EL0 counter access through perf is off"
                        " (sysctl kernel.perf_user_access=1)")
PERF_USER_ACCESS_ABSENT = ("{path} does not exist: this kernel (before 5.17) has no user"
                           " counter access through perf on arm64")
NO_CAP_USER_RDPMC = "the {event} event's mmap page has cap_user_rdpmc 0"
INDEX_ZERO = "the {event} event is not on a hardware counter (mmap page index 0)"
MMAP_FAILED = "mmap of the {event} event failed: {error}"
READ_FAILED = "read() of the {event} event failed: {error}"
PERF_NO_INSN = "no instructions: {detail}"

# The time-stamp counter / generic timer
NO_TSC = "the CPU has no time-stamp counter ('tsc' flag absent from /proc/cpuinfo)"
TSC_NOT_INVARIANT = ("TSC not invariant (no constant_tsc/nonstop_tsc): its rate follows"
                     " frequency changes")

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


def all_templates() -> dict[str, str]:
    """Name -> template of every reason above (for the documentation test)."""
    return {name: value for name, value in globals().items()
            if name.isupper() and isinstance(value, str)}
