"""Kernels with the kernel's own debuggers, to run the module under (issue 24).

Debian's production kernels report none of the bugs concurrency and error paths hide. These
are Debian's linux-source-6.1 (pmubuild.guests.selfkernel: the one source package the project
already fetches, for checkpatch and the signature-enforcing kernel; 6.1 is also the last
kernel where the driver core writes into a module's bus_type after unregistering it, which
the module's unload must wait for) with tinyconfig, what a test guest and the module need,
and the detectors:

- "debug": lockdep (PROVE_LOCKING, PROVE_RCU), DEBUG_ATOMIC_SLEEP, KASAN (generic), kmemleak,
  debug objects (timers, work, hrtimers, RCU heads, and freeing them while active),
  DEBUG_KOBJECT_RELEASE, UBSAN,
  DEBUG_PREEMPT on a preemptible kernel, and fault injection (FAILSLAB, FAIL_PAGE_ALLOC,
  per-task fail-nth), and the hung-task detector (10 minutes).
- "kcsan" (arm64): KCSAN, which excludes KASAN, for data races.

On arm64 both have CPU_IDLE with the PSCI idle driver: a guest booted with QEMU's tree
plus an idle state (qemu.boot(idle_states=True), pmubuild.guests.idledt) goes through CPU PM
each time a CPU idles, and so through the module's CPU PM notifier.

Reports are judged from the kernel log (pmubuild.guests.debugjudge); panic_on_warn stays off so
that one run counts every report.
"""

from pmubuild.common.errors import PipelineError
from pmubuild.guests import selfkernel
from pmubuild.trees.apt import PrivateApt

# What the module's code paths need beyond a guest.
MODULE_ARCH = {
    "amd64": (),
    # KVM (with its preempt notifiers) lets threads in one by one and is the KVM profile.
    # CPU PM, whose exit notifier reopens user access, has no user option of its own: arm64
    # selects it with CPU_IDLE. ARM_PSCI_CPUIDLE enters every idle state above WFI through
    # cpu_pm_enter()/cpu_pm_exit(); QEMU's virt tree has no such state, a guest booted
    # with qemu.boot(idle_states=True) has one (pmubuild.guests.idledt; without it the driver
    # finds no state and stays out). The governor: tinyconfig's tick is periodic, where
    # CPU_IDLE selects the ladder governor and rates it above menu and TEO (made for a
    # tickless kernel); it is named so that the lost-option check holds it.
    "arm64": ("VIRTUALIZATION", "KVM", "CPU_IDLE", "ARM_PSCI_CPUIDLE", "CPU_IDLE_GOV_LADDER"),
}
# WARN() and BUG() reports (tinyconfig turns CONFIG_BUG off: every WARN would be silent),
# pthreads, /proc/sys, debugfs and symbol names in reports.
SUPPORT = ("BUG", "FUTEX", "POSIX_TIMERS", "PROC_SYSCTL", "SYSCTL", "DEBUG_FS", "KALLSYMS",
           "KALLSYMS_ALL", "STACKTRACE", "SLUB", "PREEMPT")
DETECTORS = {
    "debug": (
        "DEBUG_KERNEL", "PROVE_LOCKING", "PROVE_RCU", "DEBUG_ATOMIC_SLEEP", "DEBUG_PREEMPT",
        "KASAN", "KASAN_GENERIC", "DEBUG_KMEMLEAK", "DEBUG_OBJECTS", "DEBUG_OBJECTS_TIMERS",
        "DEBUG_OBJECTS_WORK", "DEBUG_OBJECTS_RCU_HEAD",
        # kfree() of memory holding an armed timer or a queued work item: reported.
        "DEBUG_OBJECTS_FREE", "DEBUG_KOBJECT_RELEASE", "UBSAN",
        "FAULT_INJECTION", "FAILSLAB", "FAIL_PAGE_ALLOC", "FAULT_INJECTION_DEBUG_FS",
        # As on the KCSAN kernel: a task blocked 10 minutes is reported with its stack.
        "DETECT_HUNG_TASK",
    ),
    # The interrupt watcher: the module's races are mostly a task against its own CPU's
    # timer or irq_work, which KCSAN sees only with it. A task blocked 10 minutes (a
    # kworker or cpuhp thread the module left waiting) is reported with its stack and
    # locks, where a guest's timeout would only say it hung.
    "kcsan": ("DEBUG_KERNEL", "KCSAN", "KCSAN_INTERRUPT_WATCHER", "DETECT_HUNG_TASK"),
}
VALUES = {"debug": {"DEFAULT_HUNG_TASK_TIMEOUT": "600"},
          "kcsan": {"DEFAULT_HUNG_TASK_TIMEOUT": "600"}}
# tinyconfig picks SLOB, which kmemleak, KASAN and FAILSLAB do not work with.
UNSET = ("SLOB", "PANIC_ON_OOPS")
FLAVOURS = {"debug": ("amd64", "arm64"), "kcsan": ("arm64",)}


def has_kmemleak(flavour: str) -> bool:
    """Whether the `flavour` kernel scans for leaks (its guests must print a scan)."""
    return "DEBUG_KMEMLEAK" in DETECTORS[flavour]


def fragment(flavour: str, arch: str) -> str:
    if arch not in FLAVOURS.get(flavour, ()):
        raise PipelineError(f"no {flavour!r} debug kernel for {arch}: "
                            + ", ".join(f"{f} ({'/'.join(a)})" for f, a in FLAVOURS.items()))
    options = (*selfkernel.GUEST_ALL, *selfkernel.GUEST_ARCH[arch], *MODULE_ARCH[arch],
               *SUPPORT, *DETECTORS[flavour])
    return "\n".join(selfkernel.config_lines(options, VALUES.get(flavour),
                                             unset=UNSET)) + "\n"


def recipe(flavour: str, arch: str) -> selfkernel.Recipe:
    what = "a kernel with lockdep, KASAN, kmemleak and fault injection" \
        if flavour == "debug" else "a kernel with KCSAN"
    return selfkernel.Recipe(f"debugkernel-{flavour}", what, fragment(flavour, arch),
                             3000, "10-20")


def ensure(apt: PrivateApt, arch: str, flavour: str = "debug") -> selfkernel.SelfKernel:
    return selfkernel.ensure(apt, arch, recipe(flavour, arch))
