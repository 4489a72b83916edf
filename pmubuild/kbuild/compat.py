#!/usr/bin/env python3
"""Probe a kernel build tree for what differs between kernels and render compat.h.

Like Intel's kcompat-generator: look at the target tree (its headers, Module.symvers and
.config), never at a version number, so distro and stable backports come out right.
Each feature is one entry of FEATURES; compat.h.j2 turns the results into HAVE_ macros
and small wrappers, and every macro in the header names its entry and evidence.

Standalone on purpose: it needs only python3 and jinja2, so DKMS runs it on a user's
machine as the first step of its build command (dkms.conf MAKE[0]):
    /usr/bin/python3 compat.py --kdir DIR --out compat.h
"""

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import jinja2

try:
    from .kbuildfiles import (
        Export,
        TreeError,
        kbuild_tools_problem,
        read_config,
        read_symvers,
        source_roots,
        tree_arch,
    )
except ImportError:  # run as a plain script from its directory (dkms.conf MAKE[0])
    from kbuildfiles import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        Export,
        TreeError,
        kbuild_tools_problem,
        read_config,
        read_symvers,
        source_roots,
        tree_arch,
    )

# compat.h.j2 is beside this file: in the checkout (pmubuild/kbuild/) and in the DKMS tree
# (/usr/src/simple-pmu-VERSION/pmubuild/, debian/rules).
TEMPLATE_DIR = Path(__file__).resolve().parent


class CompatError(Exception):
    """The tree cannot answer a probe; the message names the probe and the file."""


@dataclass(frozen=True)
class Feature:
    name: str
    kind: str  # file | fun | macro | matches | export | config
    target: str  # header path, identifier, regex, exported symbol or CONFIG_ name
    file: str  # where the probe looks ("" for kind file, which names its own)
    arch: str  # amd64, arm64 or all
    why: str


# One feature per line, grouped by file, sorted within a group. `export` means exported
# to every module (EXPORT_SYMBOL_FOR_MODULES, 6.19+, restricts a symbol to named ones).
# A file written "?path" may be absent from a tree (the header itself came or went):
# then the feature is simply off; any other missing file is an error.
FEATURES = (
    Feature("HAVE_ASM_CPUID_API_H", "fun", "cpuid_count", "?arch/x86/include/asm/cpuid/api.h", "amd64", "6.15: cpuid_count() moved to asm/cpuid/api.h; asm/processor.h no longer pulls it in"),  # noqa: E501
    Feature("HAVE_ASM_CPUID_H", "fun", "cpuid_count", "?arch/x86/include/asm/cpuid.h", "amd64", "asm/cpuid.h exists from 5.19 (removed 6.18) but holds cpuid_count() only from about 6.5"),  # noqa: E501
    Feature("HAVE_RDMSRQ", "fun", "rdmsrq_safe", "arch/x86/include/asm/msr.h", "amd64", "6.16: rdmsrl*/wrmsrl* renamed rdmsrq*/wrmsrq*; 7.x has no rdmsrl_safe alias"),  # noqa: E501
    Feature("HAVE_ARMV8_PMU_MAX_GENERAL_COUNTERS", "macro", "ARMV8_PMU_MAX_GENERAL_COUNTERS", "?include/linux/perf/arm_pmuv3.h", "arm64", "6.12: arm_pmu's hw.idx became the counter number (cycle counter 31); before, the cycle counter was idx 0 and PMEVCNTR<n> idx n+1"),  # noqa: E501
    Feature("HAVE_ARM_PMUV3_H", "file", "include/linux/perf/arm_pmuv3.h", "", "arm64", "6.4: ARMv8 PMU register macros moved out of asm/perf_event.h (we define our own bits)"),  # noqa: E501
    Feature("HAVE_BUS_TYPE_SUBSYS_P", "matches", r"struct subsys_private \*p;", "include/linux/device/bus.h", "all", "before 6.3 the driver core's bus_release() writes bus->p = NULL into the module's bus_type, after bus_unregister() when the release is late (CONFIG_DEBUG_KOBJECT_RELEASE), and after a subsys_system_register() that failed late: unload waits for it, and a failed load with that option up to 10 s"),  # noqa: E501
    Feature("HAVE_BUS_TYPE_CONST", "matches", r"subsys_system_register\(const struct bus_type", "include/linux/device.h", "all", "6.8: bus_type pointers became const; passing a non-const one stays fine"),  # noqa: E501
    Feature("HAVE_TIMER_DELETE_SYNC", "fun", "timer_delete_sync", "include/linux/timer.h", "all", "6.2 (and Debian's 5.10/6.1 stable): timer_delete_sync() replaces del_timer_sync(), which 6.15 removed"),  # noqa: E501
    Feature("HAVE_MODULE_IMPORT_NS_STRING", "matches", r"define MODULE_IMPORT_NS\(ns\)\s+MODULE_INFO\(import_ns, ns\)", "include/linux/module.h", "all", "6.13: MODULE_IMPORT_NS() takes a string literal, not a bare identifier"),  # noqa: E501
    Feature("HAVE_SYSFS_EMIT", "fun", "sysfs_emit", "include/linux/sysfs.h", "all", "5.10: sysfs_emit() is the show() formatter; older kernels lack it"),  # noqa: E501
    Feature("HAVE_CPU_PM_NOTIFIER_EXPORT", "export", "cpu_pm_register_notifier", "Module.symvers", "arm64", "the arm64 driver re-applies its state on CPU_PM_EXIT through it"),  # noqa: E501
    Feature("HAVE_KVM_GET_RUNNING_VCPU_EXPORT", "export", "kvm_get_running_vcpu", "Module.symvers", "arm64", "tells whether a KVM vCPU is loaded on this CPU (KVM then owns PMUSERENR); exported 5.7-6.x, not in 7.x"),  # noqa: E501
    Feature("HAVE_PREEMPT_NOTIFIERS", "config", "CONFIG_PREEMPT_NOTIFIERS", ".config", "arm64", "KVM registers a preempt notifier for exactly the time a vCPU is loaded: a test that needs no export"),  # noqa: E501
    Feature("HAVE_PREEMPT_NOTIFIER_EXPORT", "export", "preempt_notifier_register", "Module.symvers", "arm64", "a thread let in through /dev/simple-pmu gets a preempt notifier of its own, as a KVM vCPU does; without it nobody can be let in (only everyone=1)"),  # noqa: E501
    Feature("HAVE_TASK_STATE_UNDERSCORE", "matches", r"unsigned int\s+__state;", "include/linux/sched.h", "arm64", "5.14: task_struct's state became __state; the driver reads it at a let-in thread's last switch (TASK_DEAD)"),  # noqa: E501
    Feature("HAVE_PERF_EVENT_CTXP_ONE", "matches", r"struct perf_event_context\s+\*perf_event_ctxp;", "include/linux/sched.h", "arm64", "6.2: a task has one perf context (perf_event_ctxp), no longer an array by context type; the driver reads its nr_user"),  # noqa: E501
    Feature("HAVE_PERF_USER_READ_REVOKE", "macro", "PERF_EVENT_FLAG_USER_READ_CNT", "include/linux/perf_event.h", "arm64", "5.17: perf's own EL0 access; from then armv8pmu_start() withdraws PMUSERENR whenever perf reschedules, so a moved counter faults rather than reads another event"),  # noqa: E501
    Feature("HAVE_RDPMC_USER_DISABLE", "macro", "ARCH_PERFMON_EVENTSEL_RDPMC_USER_DISABLE", "arch/x86/include/asm/perf_event.h", "amd64", "7.x: perf marks a CPU-wide event's counter unreadable from user space (Panther Cove and later) unless rdpmc was 2 when the event was created"),  # noqa: E501
    Feature("HAVE_VM_FLAGS_SET", "fun", "vm_flags_set", "include/linux/mm.h", "amd64", "6.3: a VMA's vm_flags change only through vm_flags_set()/vm_flags_clear(); the driver marks the mapping that lets a process in as perf_mmap() does"),  # noqa: E501
    Feature("HAVE_PERF_USER_READ_CNT_FLAG", "macro", "PERF_EVENT_FLAG_USER_READ_CNT", "include/linux/perf_event.h", "amd64", "5.17: x86 perf's mark of an event a process that maps it may RDPMC became public; before, it is perf's own (x86 PERF_X86_EVENT_RDPMC_ALLOWED) and the driver learns it from a mapping"),  # noqa: E501
    Feature("HAVE_CR4_UPDATE_IRQSOFF_EXPORT", "export", "cr4_update_irqsoff", "Module.symvers", "amd64", "6.19: exported to the kvm modules only; the raw-MSR option needs it for CR4.PCE"),  # noqa: E501
    Feature("HAVE_PERF_KERNEL_COUNTER_EXPORT", "export", "perf_event_create_kernel_counter", "Module.symvers", "all", "how the x86 driver takes the fixed counters through perf"),  # noqa: E501
    Feature("HAVE_CPU_PM", "config", "CONFIG_CPU_PM", ".config", "arm64", "without it there is no CPU PM notifier chain to hook (and no idle power-down)"),  # noqa: E501
    Feature("HAVE_HW_PERF_EVENTS", "config", "CONFIG_HW_PERF_EVENTS", ".config", "arm64", "arm_pmu (perf) owns the PMU when set: the driver must coexist with it"),  # noqa: E501
)


@dataclass(frozen=True)
class Result:
    feature: Feature
    value: bool
    evidence: str  # file:line, a Module.symvers entry, or a .config line


class Tree:
    def __init__(self, kdir: Path) -> None:
        self.kdir = kdir
        if not (kdir / ".config").exists():
            raise CompatError(f"{kdir}: no .config, not a kernel build tree")
        self.config = read_config(kdir / ".config")
        arch = tree_arch(self.config)
        if arch is None:
            raise CompatError(f"{kdir}/.config: neither CONFIG_X86_64 nor CONFIG_ARM64")
        # DKMS runs this first: a half-installed tree is named here, not by make later.
        problem = kbuild_tools_problem(kdir)
        if problem:
            raise CompatError(problem)
        self.arch: str = arch
        self.roots = source_roots(kdir)
        self._symvers: dict[str, Export] | None = None

    def find(self, rel: str) -> Path | None:
        return next((r / rel for r in self.roots if (r / rel).is_file()), None)

    def symvers(self, feature: Feature) -> dict[str, Export]:
        if self._symvers is None:
            try:
                self._symvers = read_symvers(self.kdir / "Module.symvers")
            except TreeError as e:
                raise CompatError(f"probe {feature.name} ({feature.kind} {feature.target}): "
                                  f"{e}") from None
        return self._symvers


def _without_comments(text: str) -> str:
    """C comments blanked out, newlines kept (so line numbers stay right): a mention
    in a comment is not a declaration."""
    def blank(m: re.Match[str]) -> str:
        return "\n" * m.group(0).count("\n")
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


def _grep(path: Path, pattern: str, root: Path) -> tuple[bool, str]:
    rx = re.compile(pattern)
    text = _without_comments(path.read_text(errors="replace"))
    for n, line in enumerate(text.splitlines(), start=1):
        if rx.search(line):
            return True, f"{path.relative_to(root)}:{n}: {line.strip()[:80]}"
    return False, f"{path.relative_to(root)}: no match for /{pattern}/"


def probe(tree: Tree, f: Feature) -> Result:
    if f.kind == "file":
        found = tree.find(f.target)
        return Result(f, found is not None, f"{f.target} {'present' if found else 'absent'}")
    if f.kind == "config":
        setting = tree.config.get(f.target)
        return Result(f, setting in ("y", "m"), f".config: {f.target}={setting or '(unset)'}")
    if f.kind == "export":
        exp = tree.symvers(f).get(f.target)
        if exp is None:
            return Result(f, False, f"Module.symvers: {f.target} not exported")
        fields = (exp.symbol, exp.module, exp.kind, exp.namespace)
        evidence = f"Module.symvers: {' '.join(c for c in fields if c)}"
        # Exported only to named modules (EXPORT_SYMBOL_FOR_MODULES): not to us.
        return Result(f, exp.only_for is None, evidence)
    optional = f.file.startswith("?")
    path = tree.find(f.file.lstrip("?"))
    if path is None and optional:
        return Result(f, False, f"no {f.file.lstrip('?')}, so no {f.target}")
    if path is None:
        raise CompatError(f"probe {f.name} ({f.kind} {f.target}): {f.file} not found in "
                          f"{' or '.join(str(r) for r in tree.roots)}; the tree is incomplete")
    root = next(r for r in tree.roots if path.is_relative_to(r))
    patterns = {
        "fun": rf"\b{re.escape(f.target)}\s*\(",
        "macro": rf"#\s*define\s+{re.escape(f.target)}\b",
        "matches": f.target,
    }
    if f.kind not in patterns:
        raise CompatError(f"feature {f.name}: unknown probe kind {f.kind!r}")
    value, evidence = _grep(path, patterns[f.kind], root)
    return Result(f, value, evidence)


def probe_all(kdir: Path) -> tuple[Tree, list[Result]]:
    tree = Tree(kdir)
    return tree, [probe(tree, f) for f in FEATURES if f.arch in ("all", tree.arch)]


def render(tree: Tree, results: list[Result]) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    # Header lines quoted as evidence may hold comment delimiters of their own.
    env.filters["comment"] = lambda text: str(text).replace("/*", "/ *").replace("*/", "* /")
    have = {r.feature.name: r.value for r in results}
    return env.get_template("compat.h.j2").render(
        kdir=str(tree.kdir), arch=tree.arch, results=results, have=have)


def table(results: list[Result]) -> list[str]:
    width = max(len(r.feature.name) for r in results)
    return [f"{r.feature.name:<{width}}  {'yes' if r.value else 'no ':<3}  {r.evidence}"
            for r in results]


def write(kdir: Path, out: Path) -> list[Result]:
    tree, results = probe_all(kdir)
    text = render(tree, results)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text() != text:  # keep mtime: no needless rebuilds
        out.write_text(text)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kdir", required=True, type=Path, help="kernel build tree")
    ap.add_argument("--out", required=True, type=Path, help="header to write")
    ap.add_argument("-q", "--quiet", action="store_true", help="do not print the table")
    args = ap.parse_args(argv)
    try:
        results = write(args.kdir, args.out)
    except (CompatError, OSError) as e:
        print(f"compat: error: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
