"""compat.py against the 10 real Debian trees of the matrix: every probed feature agrees with
what upstream history says for that kernel version, and the evidence points at the line
or Module.symvers entry that decided it.

The rules below are version facts checked against upstream commits (and against these
trees); compat.py itself never looks at a version. A disagreement on a real tree is either
a Debian backport (report it, then add an exception with its reason) or a probe bug."""

import re
from pathlib import Path

import pytest

from pmubuild.kbuild import compat
from pmubuild.trees import kernels, matrix
from pmubuild.trees.apt import PrivateApt

pytestmark = pytest.mark.kernels

COMBOS = [(s, a) for s in matrix.SUITES for a in matrix.ARCHES]
IDS = [f"{s}-{a}" for s, a in COMBOS]

# feature -> (expected value for kernel version v, where that comes from)
RULES = {
    "HAVE_ASM_CPUID_API_H": (lambda v: v >= (6, 15),
                             "6.15: 'x86/cpuid: Refactor <asm/cpuid.h>' (tip x86/cpu, "
                             "2025-03-18) split it into asm/cpuid/{api,types}.h"),
    "HAVE_ASM_CPUID_H": (lambda v: (6, 12) <= v < (6, 18),
                         "cpuid_count() in asm/cpuid.h: the header exists from 5.19 (SEV-SNP, "
                         "cpuid_function_is_indexed only), the helpers moved in after 6.1 "
                         "(present in 6.12; the release is not pinned here); 6.18: 'x86/cpuid: "
                         "Remove transitional <asm/cpuid.h> header' (tip, 2025-08-15)"),
    "HAVE_RDMSRQ": (lambda v: v >= (6, 16),
                    "6.16: 'x86/msr: Rename rdmsrl_safe() to rdmsrq_safe()' (Ingo Molnar)"),
    "HAVE_ARM_PMUV3_H": (lambda v: v >= (6, 4),
                         "6.4: PMUv3 driver moved to drivers/perf, include/linux/perf/"
                         "arm_pmuv3.h created"),
    "HAVE_BUS_TYPE_SUBSYS_P": (lambda v: v < (6, 3),
                               "6.3: Greg KH's driver-core series of 2023-02 gave the bus's "
                               "private data to the core: struct bus_type lost `p` (absent "
                               "from the 6.12 and 7.2 headers, present in 5.10 and 6.1)"),
    "HAVE_BUS_TYPE_CONST": (lambda v: v >= (6, 8),
                            "6.8: 'driver core: bus: constantify subsys_register() calls' "
                            "(Greg KH, 2023-12-19)"),
    "HAVE_TIMER_DELETE_SYNC": (lambda v: True,
                               "6.2: timer_delete_sync(); Debian's 5.10 and 6.1 stable trees "
                               "carry the backport (seen in 5.10.223 and 6.1.192 headers)"),
    "HAVE_ARMV8_PMU_MAX_GENERAL_COUNTERS": (lambda v: v >= (6, 12),
                                            "6.12: 'perf: arm_pmu: Remove event index to "
                                            "counter remapping' (Rob Herring)"),
    "HAVE_KVM_GET_RUNNING_VCPU_EXPORT": (lambda v: v < (7, 0),
                                         "EXPORT_SYMBOL_GPL in 5.10-6.12; 7.2 marks it "
                                         "EXPORT_SYMBOL_FOR_KVM_INTERNAL, nothing on arm64"),
    "HAVE_PREEMPT_NOTIFIERS": (lambda v: True,
                               "Debian arm64 configs build KVM in (CONFIG_KVM=y), which "
                               "selects PREEMPT_NOTIFIERS"),
    "HAVE_PREEMPT_NOTIFIER_EXPORT": (lambda v: True,
                                     "EXPORT_SYMBOL_GPL(preempt_notifier_register) in "
                                     "kernel/sched/core.c since 2.6.23"),
    "HAVE_TASK_STATE_UNDERSCORE": (lambda v: v >= (5, 14),
                                   "5.14: 'sched: Change task_struct::state' (Peter "
                                   "Zijlstra) renamed it __state"),
    "HAVE_PERF_EVENT_CTXP_ONE": (lambda v: v >= (6, 2),
                                 "6.2: 'perf: Rewrite core context handling' (Peter "
                                 "Zijlstra): one perf_event_ctxp per task"),
    "HAVE_PERF_USER_READ_REVOKE": (lambda v: v >= (5, 17),
                                   "5.17: 'perf: Add a counter for number of user access "
                                   "events in context' with arm64's perf user access "
                                   "(83a7a4d643d3)"),
    "HAVE_MODULE_IMPORT_NS_STRING": (lambda v: v >= (6, 13),
                                     "6.13: 'module: Convert symbol namespace to string "
                                     "literal'"),
    "HAVE_SYSFS_EMIT": (lambda v: v >= (5, 10), "5.10: sysfs_emit() added"),
    "HAVE_CPU_PM_NOTIFIER_EXPORT": (lambda v: True,
                                    "exported (GPL) from kernel/cpu_pm.c on every kernel here"),
    "HAVE_CR4_UPDATE_IRQSOFF_EXPORT": (lambda v: v < (6, 19),
                                       "6.19: 'x86: Restrict KVM-induced symbol exports to KVM "
                                       "modules' (EXPORT_SYMBOL_FOR_KVM, 2025-11)"),
    "HAVE_VM_FLAGS_SET": (lambda v: v >= (6, 3),
                          "6.3: 'mm: introduce vma->vm_flags wrapper functions' (Suren "
                          "Baghdasaryan) made vm_flags const outside the helpers"),
    "HAVE_PERF_USER_READ_CNT_FLAG": (lambda v: v >= (5, 17),
                                     "5.17: 'perf: Add a counter for number of user access "
                                     "events in context' made PERF_EVENT_FLAG_USER_READ_CNT "
                                     "generic (x86's RDPMC_ALLOWED before)"),
    "HAVE_RDPMC_USER_DISABLE": (lambda v: v >= (7, 0),
                                "7.0: per-counter RDPMC_USER_DISABLE for Panther Cove "
                                "(KERNEL-FACTS.md; seen in the 7.2.13 and 7.3 sources)"),
    "HAVE_PERF_KERNEL_COUNTER_EXPORT": (lambda v: True, "exported from kernel/events/core.c"),
    "HAVE_CPU_PM": (lambda v: True, "Debian arm64 configs set CONFIG_CPU_PM=y"),
    "HAVE_HW_PERF_EVENTS": (lambda v: True, "Debian arm64 configs set CONFIG_HW_PERF_EVENTS=y"),
}


def kernel_version(release: str) -> tuple[int, int]:
    """'6.12.118+deb13-arm64' -> (6, 12); '5.10.0-46-amd64' -> (5, 10)."""
    m = re.match(r"(\d+)\.(\d+)[.+-]", release)
    assert m, f"cannot parse a kernel version from {release!r}"
    return int(m.group(1)), int(m.group(2))


def test_kernel_version_parsing():
    assert kernel_version("6.12.118+deb13-arm64") == (6, 12)
    assert kernel_version("5.10.0-46-amd64") == (5, 10)
    assert kernel_version("7.2.13+deb14-amd64") == (7, 2)
    assert kernel_version("6.1.0-57-cloud-amd64") == (6, 1)


def test_every_feature_has_a_rule():
    assert {f.name for f in compat.FEATURES} == set(RULES)


@pytest.fixture(scope="module")
def apt():
    return PrivateApt()


@pytest.fixture(scope="module")
def probed(apt):
    """(suite, arch) -> (release, tree, results) for the 10 cached trees."""
    out = {}
    for suite, arch in COMBOS:
        fk = kernels.fetch(apt, matrix.SUITES[suite], arch)
        tree, results = compat.probe_all(fk.kdir)
        out[suite, arch] = (fk.release, tree, results)
    return out


def check_evidence(tree: compat.Tree, r: compat.Result) -> None:
    f = r.feature
    if f.kind == "file":
        assert r.evidence == f"{f.target} {'present' if r.value else 'absent'}"
        assert (tree.find(f.target) is not None) == r.value
    elif f.kind == "config":
        assert r.evidence == f".config: {f.target}={tree.config.get(f.target, '(unset)')}"
    elif f.kind == "export":
        if r.evidence.endswith("not exported"):
            assert not r.value
        else:
            entry = r.evidence.removeprefix("Module.symvers: ").split()
            assert entry[0] == f.target and entry[2].startswith("EXPORT_SYMBOL")
            lines = (tree.kdir / "Module.symvers").read_text().splitlines()
            assert any(ln.split("\t")[1:4] == entry[:3] for ln in lines if "\t" in ln)
    elif r.value:
        m = re.match(rf"({re.escape(f.file.lstrip('?'))}):(\d+): (.+)$", r.evidence)
        assert m, r.evidence
        path = tree.find(f.file.lstrip("?"))
        line = path.read_text(errors="replace").splitlines()[int(m.group(2)) - 1]
        assert line.strip().startswith(m.group(3))
        target = f.target if f.kind != "matches" else f.target.replace("\\", "")
        assert re.search(f.target if f.kind == "matches" else re.escape(target), line)
    else:
        assert (r.evidence.startswith(f"{f.file.lstrip('?')}: no match for /")
                or (f.file.startswith("?") and r.evidence == f"no {f.file[1:]}, so no {f.target}"))


@pytest.mark.parametrize(("suite", "arch"), COMBOS, ids=IDS)
def test_probes_match_upstream_history(probed, suite, arch):
    release, tree, results = probed[suite, arch]
    v = kernel_version(release)
    assert [r.feature.name for r in results] == [
        f.name for f in compat.FEATURES if f.arch in ("all", arch)]
    wrong = [f"{r.feature.name}: probed {r.value}, upstream {v} says {RULES[r.feature.name][0](v)}"
             f" ({RULES[r.feature.name][1]}); evidence: {r.evidence}"
             for r in results if r.value != RULES[r.feature.name][0](v)]
    assert not wrong, f"{release}:\n  " + "\n  ".join(wrong)
    for r in results:
        check_evidence(tree, r)


def test_msr_rename_sid_yes_bookworm_no(probed):
    """The issue's example: sid's kernel has rdmsrq_safe(), bookworm's only rdmsrl_safe()."""
    have = {s: next(r for r in probed[s, "amd64"][2] if r.feature.name == "HAVE_RDMSRQ")
            for s in ("sid", "bookworm")}
    assert have["sid"].value is True
    assert have["sid"].evidence.startswith("arch/x86/include/asm/msr.h:")
    assert "rdmsrq_safe(" in have["sid"].evidence
    assert have["bookworm"].value is False
    msr = probed["bookworm", "amd64"][1].find("arch/x86/include/asm/msr.h")
    assert re.search(r"\brdmsrl_safe\s*\(", msr.read_text())  # the old name is there instead


@pytest.mark.parametrize("suite", list(matrix.SUITES))
def test_cpuid_header_picked_declares_cpuid_count(probed, suite):
    """compat.h includes exactly one header for cpuid_count(): that header must declare it.
    (asm/cpuid.h existed from 5.19 holding only cpuid_function_is_indexed(); cpuid_count()
    moved into it later, so its mere presence does not say where cpuid_count() is.)"""
    _, tree, results = probed[suite, "amd64"]
    header = compat.render(tree, results)
    picked = [ln.split("<")[1].rstrip(">") for ln in header.splitlines()
              if ln.startswith("#include <asm/") and "msr.h" not in ln]
    assert len(picked) == 1, picked
    path = tree.find(f"arch/x86/include/{picked[0]}")
    assert path is not None, f"compat.h includes <{picked[0]}>, which the tree lacks"
    assert re.search(r"\bcpuid_count\s*\(", path.read_text()), (
        f"{tree.kdir.name}: compat.h includes <{picked[0]}> for cpuid_count(), but it is "
        f"not declared there")


@pytest.mark.parametrize(("suite", "arch"), COMBOS, ids=IDS)
def test_header_renders_each_feature_once(probed, suite, arch, tmp_path):
    _, tree, results = probed[suite, arch]
    out = tmp_path / "compat.h"
    assert compat.write(tree.kdir, out) == results
    text = out.read_text()
    for r in results:
        name = r.feature.name
        lines = [ln for ln in text.splitlines() if re.match(rf"#(define|undef) {name}\b", ln)]
        assert lines == [f"#define {name} 1" if r.value else f"#undef {name}"]
    assert Path(str(tree.kdir)).name in text
