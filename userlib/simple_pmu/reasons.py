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
    remedy: str  # what would fix it, for the admin or the user ("": nothing to say)

    def __new__(cls, code: str, text: str, remedy: str = "") -> Reason:
        obj = super().__new__(cls, text)
        obj.code = code
        obj.remedy = remedy
        return obj

    def __reduce__(self) -> tuple[type[Reason], tuple[str, str, str]]:
        # str's own protocol would call Reason(text), without the code.
        return Reason, (self.code, str(self), self.remedy)

    def __copy__(self) -> Reason:
        return self

    def __deepcopy__(self, memo: object) -> Reason:
        return self

    def __repr__(self) -> str:
        return f"Reason({self.code!r}, {str(self)!r})"

    def extended(self, suffix: str, remedy: str | None = None) -> Reason:
        """The same reason with more text after it (e.g. RETRIED), and its remedy or
        another."""
        return Reason(self.code, str(self) + suffix, self.remedy if remedy is None else remedy)

    def with_remedy(self) -> str:
        """The text and, when there is one, the remedy: "TEXT (fix: REMEDY)"."""
        return f"{self} (fix: {self.remedy})" if self.remedy else str(self)

    def to_dict(self) -> dict[str, str | None]:
        """The one JSON shape of a reason, everywhere: {"code", "text", "remedy"} (remedy
        null when there is nothing to suggest)."""
        return {"code": self.code, "text": str(self), "remedy": self.remedy or None}


def as_reason(text: str, code: str = "other") -> Reason:
    """text as a Reason: its own code if it is one, else `code`."""
    return text if isinstance(text, Reason) else Reason(code, text)


class Template:
    """A reason's code and text template. (No dataclass: the documentation test loads
    this module on its own, outside sys.modules.)"""

    __slots__ = ("code", "remedy", "text")

    def __init__(self, code: str, text: str, remedy: str = "") -> None:
        self.code = code
        self.text = text
        self.remedy = remedy

    def __repr__(self) -> str:
        return f"Template({self.code!r}, {self.text!r}, {self.remedy!r})"

    def format(self, **fields: object) -> Reason:
        """The Reason; the remedy is filled with the same fields."""
        return Reason(self.code, self.text.format(**fields), self.remedy.format(**fields))


def _t(code: str, text: str, remedy: str = "") -> Template:
    return Template(code, text, remedy)


# Remedies shared by several reasons.
LOAD_MODULE = ("as root: modprobe simple-pmu (Debian package simple-pmu-dkms), then"
               " measure(scope=\"cpu\") or read --scope cpu counts every task on the CPU")
VPMU = ("give the guest a virtual PMU: QEMU/KVM -cpu host (arm64: -cpu host,pmu=on; QEMU"
        " TCG emulates the arm64 PMU), libvirt <cpu mode='host-passthrough'/> with"
        " <pmu state='on'/> in <features>")
PARANOID_FIX = ("as root: sysctl kernel.perf_event_paranoid=2 (or lower), or give the"
                " program CAP_PERFMON (setcap cap_perfmon+ep PROGRAM); or use the module's"
                " CPU-wide counters: " + LOAD_MODULE)
SECCOMP_FIX = ("allow perf_event_open in the container's seccomp profile (e.g. docker run"
               " --security-opt seccomp=PROFILE, or --cap-add PERFMON); " + PARANOID_FIX)
SHARED_PMU = ("fewer perf users on this CPU; the NMI watchdog holds a counter on x86: as"
              " root, sysctl kernel.nmi_watchdog=0")


# Any backend
NO_NATIVE = _t(
    "no_native",
    "the C extension simple_pmu._native is not available ({error}); build it with 'pip"
    " install .' in userlib/ of a simple-pmu checkout",
    "in userlib/ of a simple-pmu checkout: pip install . (needs gcc and the Python headers,"
    " Debian python3-dev)")
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
    "simple-pmu module not loaded: {path} does not exist",
    "as root: modprobe simple-pmu (Debian package simple-pmu-dkms)")
X86_NO_PERFMON = _t(
    "x86_no_perfmon",
    "{vendor} CPU has no architectural perfmon (CPUID leaf 0xA version {version}): the "
    "x86 driver needs Intel fixed counters and refuses to load here",
    "none on this CPU (AMD and others: no architectural perfmon); in a guest: " + VPMU)
X86_PERFMON_V1 = _t(
    "x86_perfmon_v1",
    "architectural perfmon version 1 has no fixed counters (CPUID leaf 0xA)")
X86_NO_FIXED = _t(
    "x86_no_fixed",
    "fixed counter {index} ({event}) is not present (CPUID leaf 0xA)")
X86_EVENT_UNAVAILABLE = _t(
    "x86_event_unavailable",
    "CPUID leaf 0xA marks {event} unavailable")
# A module without sysfs access (older): its readers are no process it let in.
RDPMC_NOT_ALWAYS = _t(
    "rdpmc_not_always",
    "{path} is {value}: user RDPMC outside a task with a perf mmap faults; the driver's "
    "counters need 2",
    "an admin's choice, as it lets every task RDPMC (simple-pmu(4) SECURITY CONSIDERATIONS):"
    " RDPMC_ALWAYS=yes in /etc/default/simple-pmu, then load the module again (or echo 2 >"
    " {path}); or load this version's module, which lets processes in through its node"
    " without it; or use perf (the default scope)")
DRIVER_FIXED_OFF = _t(
    "driver_fixed_off",
    "the driver has the fixed counters off (rdpmc_fixed is {value})",
    "as root: echo 1 > /sys/devices/system/simple-pmu/simple-pmu0/rdpmc_fixed (see simple-pmu(4))")
DRIVER_USER_ACCESS_OFF = _t(
    "driver_user_access_off",
    "the driver's user access is off (user_access is {value})",
    "see the module's cpuN/ attributes and simple-pmu(4); or use perf (the default scope)")
NOT_LET_IN = _t(
    "not_let_in",
    "not let in: {node} (group {group}, mode {mode}) cannot be opened by user {user}"
    " ({errname}); the module (access members) lets in only the threads of users who can"
    " open it",
    "an admin adds the user to group {group} (as root: adduser {user} {group}); {user}"
    " then logs in again (a new login has the group)")
# NOT_LET_IN's remedy where the node has no group that may read it (root's, or mode 0600:
# the package's udev rule is not installed).
NODE_WITHOUT_GROUP_FIX = (
    "as root: install the package's udev rule (simple-pmu-dkms; it gives {node} group"
    " {group}, mode 0660), then adduser {user} {group}; {user} then logs in again")
NO_DEV_NODE = _t(
    "no_dev_node",
    "not let in: the module has no {node} (access members: a thread is let in through"
    " it); udev not running?",
    "start udev (systemd-udevd), or mount devtmpfs on /dev; in a container, pass the node"
    " in (docker run --device {node}, and --group-add the node's group)")
DEV_NODE_FAILED = _t(
    "dev_node_failed",
    "not let in: {node} cannot be opened: {errname} ({error})")
# x86: the node opens, but the mapping that lets a process in is refused (EPERM: perf
# allows no user RDPMC; which rule, from the cpu PMU's rdpmc attribute).
NOT_LET_IN_RDPMC_OFF = _t(
    "not_let_in_rdpmc_off",
    "not let in: {node} refused to let this process in (EPERM): perf allows no user RDPMC"
    " ({path} is 0)",
    "as root: echo 1 > {path} (the kernel's default; on hybrid parts cpu_core's and"
    " cpu_atom's)")
NOT_LET_IN_RDPMC_NOT_ALWAYS = _t(
    "not_let_in_rdpmc_not_always",
    "not let in: {node} refused to let this process in (EPERM): this kernel lets user RDPMC"
    " read CPU-wide counters only at rdpmc 2 ({path} is {value}; Linux 7.x on Panther Cove"
    " and later)",
    "an admin's choice, as it lets every task RDPMC (simple-pmu(4) SECURITY CONSIDERATIONS):"
    " RDPMC_ALWAYS=yes in /etc/default/simple-pmu, then load the module again (or echo 2 >"
    " {path}; the module's access is then everyone); or use perf (the default scope)")
LET_IN_REFUSED = _t(
    "let_in_refused",
    "not let in: {node} refused to let this process in: {errname} ({error})")
DRIVER_OLD_ABI = _t(
    "driver_old_abi",
    "the loaded simple-pmu module does not publish {missing}: it is older than this "
    "library, which reads the per-CPU counter placement (cpuN/cycle_index, "
    "cpuN/event_index, cpuN/generation, event_width)",
    "as root: install this version's simple-pmu-dkms, then rmmod simple-pmu; modprobe simple-pmu")
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
    "value; use the default scope (perf, this thread) for exact counts",
    "measure() without scope (perf, this thread) where perf self-monitoring is allowed")

# measure() with the driver: why the counts of one measurement are None
MEASURE_GENERATION_CHANGED = _t(
    "measure_generation_changed",
    "the driver's counters on CPU {cpu} changed during the measurement "
    "(cpu{cpu}/generation {before} -> {after}: perf moved or reloaded a counter, the CPU "
    "went offline and back, or the settings changed); counts discarded, measure again")
MEASURE_WINDOW_INVALID = _t(
    "measure_window_invalid",
    "the driver's counters on CPU {cpu} could not be read through the whole measurement "
    "(a read faulted, or the thread left the CPU); counts discarded, measure again")

MEASURE_SWITCHED_OUT = _t(
    "measure_switched_out",
    "not exact: the thread was switched out during the measurement on CPU {cpu}, so the "
    "CPU's counts include the work of the tasks that ran there meanwhile (scope \"cpu\" "
    "counts every task); measure again for the block's own count, or use the default "
    "scope (perf, this thread)",
    "measure() without scope (perf, this thread) where perf self-monitoring is allowed")

MEASURE_NOT_EXACT = _t(
    "measure_not_exact",
    "not exact: cycles.h's window over the measurement on CPU {cpu} was valid but not "
    "exact, so the counts are the CPU's, not necessarily the block's alone")

# Window: why a window gave no counts
WINDOW_NOT_BEGUN = _t(
    "window_not_begun",
    "no window could begin (scope {scope}, {path}): {why}")
WINDOW_INVALID = _t(
    "window_invalid",
    "the window is invalid (scope {scope}, {path}): {why}; its reads are discarded, "
    "begin another")
WINDOW_OPEN = _t(
    "window_open",
    "the window has not ended: end() (or leave the with block) before taking deltas")

# perf
HYPERVISOR_NO_VPMU = _t(
    "hypervisor_no_vpmu",
    "hypervisor {hypervisor} exposes no virtual PMU to this guest",
    VPMU)
NO_CPU_PMU = _t(
    "no_cpu_pmu",
    "no CPU PMU registered with perf ({path} has none of: {names})",
    "a kernel with this CPU's PMU driver; in a guest: " + VPMU)
PERF_OPEN_FAILED = _t(
    "perf_open_failed",
    "perf_event_open({event}) failed: {errname} ({meaning})")
RDPMC_OFF = _t(
    "rdpmc_off",
    "{path} is 0: user RDPMC is disabled",
    "as root: echo 1 > {path} (the kernel's default: RDPMC for tasks with a perf event)")
PERF_USER_ACCESS_OFF = _t(
    "perf_user_access_off",
    "{path} is {value}: EL0 counter access through perf is off (sysctl "
    "kernel.perf_user_access=1)",
    "as root: sysctl kernel.perf_user_access=1 (persistently: in /etc/sysctl.d/); or"
    " " + LOAD_MODULE)
PERF_USER_ACCESS_ABSENT = _t(
    "perf_user_access_absent",
    "{path} does not exist: this kernel (before 5.17) has no user counter access through "
    "perf on arm64",
    "a kernel >= 5.17, or " + LOAD_MODULE)
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
    " the counts cover only that part, unscaled",
    SHARED_PMU)
PERF_NOT_SCHEDULED = _t(
    "perf_not_scheduled",
    "the perf events were never on the PMU during the measurement (time_running 0 of"
    " time_enabled {enabled} ns): the PMU is in use by others; counts discarded",
    SHARED_PMU)
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


# What would let perf_event_open succeed, by its errno.
PERF_ERRNO_REMEDIES: dict[int, str] = {
    errno.EACCES: PARANOID_FIX,
    errno.EPERM: SECCOMP_FIX,
    errno.ENOSYS: ("a kernel with CONFIG_PERF_EVENTS, or allow perf_event_open in the"
                   " seccomp profile; or " + LOAD_MODULE),
    errno.ENOENT: "a kernel with this CPU's PMU driver; in a guest: " + VPMU,
    errno.EBUSY: "end the program that holds the PMU exclusively",
    errno.EMFILE: "raise the open-files limit (ulimit -n)",
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
