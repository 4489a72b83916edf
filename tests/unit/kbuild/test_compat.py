"""pmubuild/kbuild/compat.py on small hand-made kernel trees: each probe kind, where headers are
found, the errors, arch filtering, the rendered header (compiled with the host gcc),
write()'s mtime, main(), and that the file stays standalone for DKMS."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pmubuild.kbuild import compat

from .kdir_fixtures import write_files

COMPAT_PY = Path(compat.__file__).resolve()
BY_NAME = {f.name: f for f in compat.FEATURES}

CONFIG = {
    "amd64": "CONFIG_X86_64=y\n# CONFIG_ARM64 is not set\n",
    "arm64": "CONFIG_ARM64=y\n# CONFIG_X86_64 is not set\n",
}
MSR_NEW = """\
#ifndef _ASM_X86_MSR_H
#define _ASM_X86_MSR_H
/* rdmsrq_safe: the 6.16 name */
static inline int rdmsrq_safe(unsigned int msr, unsigned long long *p)
{
\t*p = msr;
\treturn 0;
}
static inline int wrmsrq_safe(unsigned int msr, unsigned long long val)
{
\treturn (int)(msr + val);
}
#endif
"""
MSR_OLD = MSR_NEW.replace("rdmsrq_safe", "rdmsrl_safe").replace("wrmsrq_safe", "wrmsrl_safe")
CPUID_COUNT = """\
static inline void cpuid_count(unsigned int op, int count, unsigned int *eax,
\t\t\t       unsigned int *ebx, unsigned int *ecx, unsigned int *edx)
{
\t*eax = op; *ebx = count; *ecx = 0; *edx = 0;
}
"""
# Before 6.3 a driver writes vma->vm_flags; from 6.3 only the helpers may (const field).
MM_OLD = """\
typedef unsigned long vm_flags_t;
struct vm_area_struct { vm_flags_t vm_flags; };
"""
MM_NEW = """\
typedef unsigned long vm_flags_t;
struct vm_area_struct { const vm_flags_t vm_flags; vm_flags_t __vm_flags; };
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
\tvma->__vm_flags |= flags;
}
static inline void vm_flags_mod(struct vm_area_struct *vma, vm_flags_t set, vm_flags_t clear)
{
\tvma->__vm_flags = (vma->__vm_flags | set) & ~clear;
}
"""
PERF_EVENT_OLD = """\
struct hw_perf_event { int flags; };
struct perf_event { struct hw_perf_event hw; };
"""
PERF_EVENT_NEW = PERF_EVENT_OLD + "#define PERF_EVENT_FLAG_USER_READ_CNT\t0x80000000\n"
DEVICE_OLD = "int subsys_system_register(struct bus_type *subsys,\n\t\t\t   const void **groups);\n"
# What compat.h's own wrappers need of <linux/device.h> (spmu_bus_wait_released).
DEVICE_DECL = "struct bus_type;\n"
DEVICE_NEW = DEVICE_OLD.replace("(struct bus_type", "(const struct bus_type")
MODULE_OLD = "#define MODULE_IMPORT_NS(ns)\tMODULE_INFO(import_ns, __stringify(ns))\n"
MODULE_NEW = "#define MODULE_IMPORT_NS(ns)\tMODULE_INFO(import_ns, ns)\n"
SYSFS = "int sysfs_emit(char *buf, const char *fmt, ...);\n"
TIMER_OLD = """\
#ifndef _LINUX_TIMER_H
#define _LINUX_TIMER_H
struct timer_list { void (*function)(struct timer_list *); };
static inline int del_timer_sync(struct timer_list *timer)
{
\t(void)timer;
\treturn 0;
}
#endif
"""
TIMER_NEW = TIMER_OLD.replace("del_timer_sync(", "timer_delete_sync(")
TYPES = "#include <stdbool.h>\n"
SCHED = """\
#ifndef _LINUX_SCHED_H
#define _LINUX_SCHED_H
#include <stddef.h>
struct hlist_node { struct hlist_node *next; };
struct hlist_head { struct hlist_node *first; };
static inline int hlist_empty(const struct hlist_head *h) { return !h->first; }
#define spmu_entry(node, pos, member) \\
	((node) ? (void *)((char *)(node) - offsetof(typeof(*pos), member)) : NULL)
#define hlist_for_each_entry(pos, head, member) \\
    for (pos = spmu_entry((head)->first, pos, member); pos; \\
         pos = spmu_entry(pos->member.next, pos, member))
struct preempt_ops;
struct preempt_notifier { struct hlist_node link; struct preempt_ops *ops; };
#define TASK_DEAD 0x80
#define READ_ONCE(x) (x)
struct task_struct { struct hlist_head preempt_notifiers; long state; };
extern struct task_struct *current;
#endif
"""
PREEMPT = "/* include/linux/preempt.h */\n"
SYMVERS_LINES = {
    "perf_event_create_kernel_counter":
        "0x0badcafe\tperf_event_create_kernel_counter\tvmlinux\tEXPORT_SYMBOL_GPL\t",
    "cpu_pm_register_notifier":
        "0x11111111\tcpu_pm_register_notifier\tvmlinux\tEXPORT_SYMBOL_GPL\t",
    "cr4_update_irqsoff": "0x22222222\tcr4_update_irqsoff\tvmlinux\tEXPORT_SYMBOL\t",
}


def make_tree(root: Path, arch: str = "arm64", *, files: dict[str, str] | None = None,
              symvers: dict[str, str] | None = None, config: str = "",
              skip: tuple[str, ...] = ()) -> Path:
    """A build tree holding every file the FEATURES of `arch` look at (old-kernel contents),
    with `files` added or replacing those and `skip` left out."""
    # Files of features this fixture has no contents for hold a comment only (probe: no).
    # Optional headers ("?path") are left out: absent is a valid state for them.
    content = {f.file: f"/* {f.file} */\n" for f in compat.FEATURES
               if f.file not in ("", "Module.symvers", ".config") and f.arch in ("all", arch)
               and not f.file.startswith("?")}
    content |= {
        ".config": CONFIG[arch] + "CONFIG_CPU_PM=y\nCONFIG_HW_PERF_EVENTS=y\n" + config,
        "Makefile": "# a kernel build tree\n",
        "scripts/basic/fixdep": "",
        "scripts/mod/modpost": "",
        "include/linux/device.h": DEVICE_DECL + DEVICE_OLD,
        "include/linux/module.h": MODULE_OLD,
        "include/linux/sysfs.h": SYSFS,
        "include/linux/timer.h": TIMER_OLD,
        "include/linux/types.h": TYPES,
        "include/linux/sched.h": SCHED,
        "include/linux/preempt.h": PREEMPT,
        "include/linux/delay.h": "void msleep(unsigned int msecs);\n",
        "Module.symvers": "\n".join((symvers if symvers is not None else SYMVERS_LINES).values())
        + "\n",
    }
    if arch == "amd64":
        content["arch/x86/include/asm/msr.h"] = MSR_OLD
        content["arch/x86/include/asm/processor.h"] = CPUID_COUNT
        content["include/linux/mm.h"] = MM_OLD
        content["include/linux/perf_event.h"] = PERF_EVENT_OLD
    content.update(files or {})
    return write_files(root, content, skip)


def probe(kdir: Path, name: str) -> compat.Result:
    return compat.probe(compat.Tree(kdir), BY_NAME[name])


def line_of(text: str, needle: str) -> int:
    return next(n for n, ln in enumerate(text.splitlines(), 1) if needle in ln)


# --- one test per probe kind -------------------------------------------------------------


def test_file_present_and_absent(tmp_path):
    rel = BY_NAME["HAVE_ARM_PMUV3_H"].target
    with_it = make_tree(tmp_path / "a", "arm64", files={rel: "/* pmuv3 */\n"})
    without = make_tree(tmp_path / "b", "arm64")
    r = probe(with_it, "HAVE_ARM_PMUV3_H")
    assert r.value is True and r.evidence == f"{rel} present"
    r = probe(without, "HAVE_ARM_PMUV3_H")
    assert r.value is False and r.evidence == f"{rel} absent"
    # A directory of that name is not the header.
    (tmp_path / "c" / rel).mkdir(parents=True)
    assert probe(make_tree(tmp_path / "c", "arm64"), "HAVE_ARM_PMUV3_H").value is False


def test_optional_file_fun_probe(tmp_path):
    """asm/cpuid.h came (5.19) and went (6.18), and held cpuid_count() only for part of
    that time: absent or without the function, the feature is off; no error."""
    rel = BY_NAME["HAVE_ASM_CPUID_H"].file.lstrip("?")
    with_fun = make_tree(tmp_path / "a", "amd64", files={rel: CPUID_COUNT})
    r = probe(with_fun, "HAVE_ASM_CPUID_H")
    assert r.value is True and r.evidence.startswith(f"{rel}:1: static inline void cpuid_count(")
    early = make_tree(tmp_path / "b", "amd64",
                      files={rel: "static inline bool cpuid_function_is_indexed(u32 f);\n"})
    r = probe(early, "HAVE_ASM_CPUID_H")
    assert r.value is False and "no match" in r.evidence
    r = probe(make_tree(tmp_path / "c", "amd64"), "HAVE_ASM_CPUID_H")
    assert r.value is False and r.evidence == f"no {rel}, so no cpuid_count"


def test_fun_declared(tmp_path):
    kdir = make_tree(tmp_path / "t", "amd64", files={"arch/x86/include/asm/msr.h": MSR_NEW})
    r = probe(kdir, "HAVE_RDMSRQ")
    n = line_of(MSR_NEW, "int rdmsrq_safe(")
    assert r.value is True
    assert r.evidence.startswith(f"arch/x86/include/asm/msr.h:{n}: static inline int rdmsrq_safe(")


@pytest.mark.parametrize("line", [
    "extern int rdmsrq_safe;",  # named, but not called or declared as a function
    "#define rdmsrl_safe rdmsrq_safe",  # an alias without its own '('
    "int __rdmsrq_safe(unsigned int msr);",  # a longer identifier that ends the same
    "int rdmsrq_safe_on_cpu(unsigned int cpu);",  # ...or starts the same
])
def test_fun_only_mentioned(tmp_path, line):
    kdir = make_tree(tmp_path / "t", "amd64",
                     files={"arch/x86/include/asm/msr.h": MSR_OLD + line + "\n"})
    r = probe(kdir, "HAVE_RDMSRQ")
    assert r.value is False
    assert r.evidence.startswith("arch/x86/include/asm/msr.h: no match for")


@pytest.mark.parametrize(("text", "value"), [
    ("#define SPMU_THING(x) ((x) + 1)\n", True),
    ("#  define SPMU_THING 1\n", True),
    ("#define SPMU_THINGS 1\n", False),
    ("#undef SPMU_THING\nint SPMU_THING;\n", False),
])
def test_macro(tmp_path, text, value):
    feature = compat.Feature("HAVE_SPMU_THING", "macro", "SPMU_THING", "include/linux/thing.h",
                             "all", "test")
    kdir = make_tree(tmp_path / "t", files={"include/linux/thing.h": "/* x */\n" + text})
    r = compat.probe(compat.Tree(kdir), feature)
    assert r.value is value
    if value:
        assert r.evidence == f"include/linux/thing.h:2: {text.splitlines()[0]}"


@pytest.mark.parametrize(("name", "rel", "old", "new"), [
    ("HAVE_BUS_TYPE_CONST", "include/linux/device.h", DEVICE_OLD, DEVICE_NEW),
    ("HAVE_MODULE_IMPORT_NS_STRING", "include/linux/module.h", MODULE_OLD, MODULE_NEW),
    ("HAVE_BUS_TYPE_SUBSYS_P", "include/linux/device/bus.h",
     "struct subsys_private;\nstruct bus_type {\n\tconst char *name;\n};\n",
     "\tstruct subsys_private *p;\n"),
])
def test_matches(tmp_path, name, rel, old, new):
    assert BY_NAME[name].kind == "matches"
    r_old = probe(make_tree(tmp_path / "old", files={rel: old}), name)
    r_new = probe(make_tree(tmp_path / "new", files={rel: "/* one */\n" + new}), name)
    assert r_old.value is False and r_old.evidence.startswith(f"{rel}: no match for /")
    assert r_new.value is True
    assert r_new.evidence == f"{rel}:2: {new.splitlines()[0].strip()}"


@pytest.mark.parametrize(("entry", "value"), [
    ("0x1\tperf_event_create_kernel_counter\tvmlinux\tEXPORT_SYMBOL\t", True),
    ("0x1\tperf_event_create_kernel_counter\tvmlinux\tEXPORT_SYMBOL", True),  # 4 columns
    ("0x1\tperf_event_create_kernel_counter\tvmlinux\tEXPORT_SYMBOL_GPL\tPERF_NS", True),
    ("0x1\tperf_event_create_kernel_counter\tvmlinux\tEXPORT_SYMBOL_GPL\tmodule:kvm,kvm-intel",
     False),
    ("0x1\tperf_event_create_kernel_counter_x\tvmlinux\tEXPORT_SYMBOL_GPL\t", False),
])
def test_export(tmp_path, entry, value):
    kdir = make_tree(tmp_path / "t", symvers={"x": entry})
    r = probe(kdir, "HAVE_PERF_KERNEL_COUNTER_EXPORT")
    assert r.value is value
    cols = entry.split("\t")
    if cols[1] == "perf_event_create_kernel_counter":
        # The evidence quotes the entry: symbol, module, export type and any namespace.
        assert r.evidence == "Module.symvers: " + " ".join(c for c in cols[1:] if c)
    else:
        assert r.evidence == "Module.symvers: perf_event_create_kernel_counter not exported"


def test_export_absent_from_empty_symvers(tmp_path):
    r = probe(make_tree(tmp_path / "t", symvers={}), "HAVE_CPU_PM_NOTIFIER_EXPORT")
    assert r.value is False and "not exported" in r.evidence


@pytest.mark.parametrize(("line", "value", "shown"), [
    ("CONFIG_CPU_PM=y", True, "y"),
    ("CONFIG_CPU_PM=m", True, "m"),
    ("# CONFIG_CPU_PM is not set", False, "(unset)"),
    ("", False, "(unset)"),
])
def test_config(tmp_path, line, value, shown):
    kdir = tmp_path / "t"
    make_tree(kdir)
    (kdir / ".config").write_text(CONFIG["arm64"] + line + "\n")
    r = probe(kdir, "HAVE_CPU_PM")
    assert r.value is value and r.evidence == f".config: CONFIG_CPU_PM={shown}"


# --- where headers are found -------------------------------------------------------------


@pytest.mark.parametrize("absolute", [True, False])
def test_headers_in_debian_common_tree(tmp_path, absolute):
    common = tmp_path / "linux-headers-6.16.1-common"
    (common / "arch/x86/include/asm").mkdir(parents=True)
    (common / "arch/x86/include/asm/msr.h").write_text(MSR_NEW)
    (common / "Makefile").write_text("# top\n")
    inc = str(common) if absolute else "../linux-headers-6.16.1-common"
    kdir = make_tree(tmp_path / "linux-headers-6.16.1-amd64", "amd64",
                     files={"Makefile": f"MAKEFLAGS += -rR\ninclude {inc}/Makefile\n"},
                     skip=("arch/x86/include/asm/msr.h",))
    tree = compat.Tree(kdir)
    assert tree.roots == [kdir, common.resolve()]
    r = compat.probe(tree, BY_NAME["HAVE_RDMSRQ"])
    # Found in the common tree; evidence is relative to the root it was found in.
    assert r.value is True
    assert r.evidence.startswith(f"arch/x86/include/asm/msr.h:{line_of(MSR_NEW, 'rdmsrq_safe(')}:")


def test_headers_in_build_tree_take_precedence(tmp_path):
    common = tmp_path / "common"
    (common / "arch/x86/include/asm").mkdir(parents=True)
    (common / "arch/x86/include/asm/msr.h").write_text(MSR_OLD)
    (common / "Makefile").write_text("# top\n")
    kdir = make_tree(tmp_path / "build", "amd64",
                     files={"Makefile": f"include {common}/Makefile\n",
                            "arch/x86/include/asm/msr.h": MSR_NEW})
    assert probe(kdir, "HAVE_RDMSRQ").value is True
    # A file that only the build tree has (like generated headers) is found too.
    kdir2 = make_tree(tmp_path / "build2", "amd64",
                      files={"Makefile": f"include {common}/Makefile\n",
                             "arch/x86/include/asm/cpuid.h": CPUID_COUNT})
    assert probe(kdir2, "HAVE_ASM_CPUID_H").value is True


def test_makefile_include_with_variable_or_missing_dir_is_ignored(tmp_path):
    kdir = make_tree(tmp_path / "t", files={
        "Makefile": "include $(srctree)/Makefile\ninclude /nonexistent/src/Makefile\n"})
    assert compat.Tree(kdir).roots == [kdir]


# --- errors ------------------------------------------------------------------------------


def test_missing_header_names_probe_and_file(tmp_path):
    kdir = make_tree(tmp_path / "t", "amd64", skip=("arch/x86/include/asm/msr.h",))
    with pytest.raises(compat.CompatError) as e:
        compat.probe_all(kdir)
    msg = str(e.value)
    assert "HAVE_RDMSRQ" in msg and "arch/x86/include/asm/msr.h" in msg
    assert str(kdir) in msg and "incomplete" in msg


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_missing_device_h(tmp_path, arch):
    kdir = make_tree(tmp_path / "t", arch, skip=("include/linux/device.h",))
    with pytest.raises(compat.CompatError, match=r"HAVE_BUS_TYPE_CONST.*include/linux/device\.h"):
        compat.probe_all(kdir)


def test_missing_symvers_names_it(tmp_path):
    kdir = make_tree(tmp_path / "t", skip=("Module.symvers",))
    with pytest.raises(compat.CompatError) as e:
        compat.probe_all(kdir)
    msg = str(e.value)
    assert "Module.symvers" in msg and "not found" in msg
    first_export = next(f for f in compat.FEATURES
                        if f.kind == "export" and f.arch in ("all", "arm64"))
    assert first_export.name in msg


def test_not_a_tree(tmp_path):
    with pytest.raises(compat.CompatError, match="no .config"):
        compat.Tree(tmp_path)
    (tmp_path / ".config").write_text("CONFIG_RISCV=y\n")
    with pytest.raises(compat.CompatError, match="neither CONFIG_X86_64 nor CONFIG_ARM64"):
        compat.Tree(tmp_path)


def test_unknown_probe_kind(tmp_path):
    kdir = make_tree(tmp_path / "t")
    bad = compat.Feature("HAVE_X", "grep", "x", "include/linux/sysfs.h", "all", "")
    with pytest.raises(compat.CompatError, match="HAVE_X.*'grep'"):
        compat.probe(compat.Tree(kdir), bad)


# --- arch filtering ----------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "other"), [("arm64", "amd64"), ("amd64", "arm64")])
def test_arch_filtering(tmp_path, arch, other):
    tree, results = compat.probe_all(make_tree(tmp_path / "t", arch))
    assert tree.arch == arch
    names = [r.feature.name for r in results]
    assert names == [f.name for f in compat.FEATURES if f.arch in ("all", arch)]
    other_only = {f.name for f in compat.FEATURES if f.arch == other}
    assert other_only, f"the table has no {other}-only feature: nothing filtered"
    assert not other_only & set(names)


# --- the rendered header -----------------------------------------------------------------


def defines(text: str, name: str) -> list[str]:
    return [ln for ln in text.splitlines()
            if ln in (f"#define {name} 1", f"#undef {name}")
            or ln.split()[:2] in (["#define", name], ["#undef", name])]


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_every_feature_once_with_its_value(tmp_path, arch):
    tree, results = compat.probe_all(make_tree(tmp_path / "t", arch, files={
        "include/linux/device.h": DEVICE_DECL + DEVICE_NEW}))
    text = compat.render(tree, results)
    assert any(r.value for r in results) and not all(r.value for r in results)
    for r in results:
        want = f"#define {r.feature.name} 1" if r.value else f"#undef {r.feature.name}"
        assert defines(text, r.feature.name) == [want]
        assert text.count(r.evidence) == 1  # each macro names its evidence
    for f in compat.FEATURES:
        if f.arch not in ("all", arch):
            assert f.name not in text


HOSTILE = "ends */ early; /* nests; **/ and */*/ /*/"


def gcc_syntax_check(tmp_path: Path, header: Path, body: str, *include_dirs: Path):
    gcc = shutil.which("gcc")
    assert gcc, "host gcc is needed to check the rendered header"
    src = tmp_path / "check.c"
    src.write_text(f'#include "{header}"\n{body}\nint main(void) {{ return 0; }}\n')
    argv = [gcc, "-fsyntax-only", "-std=gnu11", "-Wall", "-Werror", "-x", "c", str(src)]
    argv += [f"-I{d}" for d in include_dirs]
    return subprocess.run(argv, capture_output=True, text=True)


def test_rendered_arm64_header_is_valid_c_with_hostile_comments(tmp_path, monkeypatch):
    # Evidence from a header line holding comment delimiters, a `why` holding them, and a
    # tree path with "*/" in it: none may end a comment early.
    sysfs = f"int sysfs_emit(char *buf, const char *fmt, ...); /* {HOSTILE} */\n"
    kdir = make_tree(tmp_path / "odd*" / "tree", files={"include/linux/sysfs.h": sysfs})
    hostile = tuple(compat.Feature(f.name, f.kind, f.target, f.file, f.arch, HOSTILE)
                    if f.name == "HAVE_ARM_PMUV3_H" else f for f in compat.FEATURES)
    monkeypatch.setattr(compat, "FEATURES", hostile)
    out = tmp_path / "inc" / "compat.h"
    results = compat.write(kdir, out)
    text = out.read_text()
    assert "*/ early" not in text and "odd*/tree" not in text  # escaped, then...
    assert "ends * / early" in text  # ...still readable
    sysfs_result = next(r for r in results if r.feature.name == "HAVE_SYSFS_EMIT")
    assert "*/" in sysfs_result.evidence  # the probe itself quotes the raw line
    body = ("#if !defined(HAVE_SYSFS_EMIT) || HAVE_SYSFS_EMIT != 1\n#error sysfs_emit\n#endif\n"
            "#ifdef HAVE_ARM_PMUV3_H\n#error arm_pmuv3\n#endif\n"
            "#ifdef HAVE_RDMSRQ\n#error amd64 feature in an arm64 header\n#endif\n")
    proc = gcc_syntax_check(tmp_path, out, body, kdir / "include")
    assert proc.returncode == 0, proc.stderr + text
    # The check itself can fail: a header with an unescaped delimiter is rejected.
    broken = tmp_path / "broken.h"
    broken.write_text(text.replace("ends * / early", "ends */ early", 1))
    assert gcc_syntax_check(tmp_path, broken, body, kdir / "include").returncode != 0


@pytest.mark.parametrize(("files", "via"), [
    ({}, "processor.h"),  # 5.10: cpuid_count in asm/processor.h, rdmsrl_safe only
    ({"arch/x86/include/asm/cpuid.h": CPUID_COUNT}, "cpuid.h"),
    ({"arch/x86/include/asm/cpuid/api.h": CPUID_COUNT,
      "arch/x86/include/asm/msr.h": MSR_NEW,
      "include/linux/mm.h": MM_NEW,
      "include/linux/perf_event.h": PERF_EVENT_NEW,
      "arch/x86/include/asm/processor.h": "#error processor.h is not needed here\n"}, "api.h"),
])
def test_rendered_amd64_header_compiles_against_tree_headers(tmp_path, files, via):
    # The amd64 header includes <asm/...>: compile it against the fixture tree's own
    # arch/x86/include, so the include it picks and the rdmsrq alias are both exercised.
    kdir = make_tree(tmp_path / "t", "amd64", files=files)
    out = tmp_path / "compat.h"
    results = compat.write(kdir, out)
    text = out.read_text()
    assert sum(ln.startswith("#include <asm/") and "msr.h" not in ln
               for ln in text.splitlines()) == 1
    assert f"/{via}>" in text or f"<asm/{via}>" in text
    have_rdmsrq = next(r.value for r in results if r.feature.name == "HAVE_RDMSRQ")
    assert have_rdmsrq == ("arch/x86/include/asm/msr.h" in files)
    have_vm_flags_set = next(r.value for r in results if r.feature.name == "HAVE_VM_FLAGS_SET")
    assert have_vm_flags_set == ("include/linux/mm.h" in files)
    have_flag = next(r.value for r in results if r.feature.name == "HAVE_PERF_USER_READ_CNT_FLAG")
    assert have_flag == ("include/linux/perf_event.h" in files)
    body = ("static int use(void) {\n"
            "\tunsigned int a, b, c, d; unsigned long long v;\n"
            "\tstruct vm_area_struct vma = { 0 };\n"
            "\tcpuid_count(7, 0, &a, &b, &c, &d);\n"
            "\tstruct perf_event ev = { { 0 } };\n"
            "\tspmu_vma_flags(&vma, 0x4, 0x20);\n"
            "\treturn rdmsrq_safe(0x38d, &v) + wrmsrq_safe(0x38d, v) + (int)(a + b + c + d)\n"
            "\t       + spmu_event_user_readable(&ev);\n"
            "}\nint (*keep)(void) = use;\n")
    proc = gcc_syntax_check(tmp_path, out, body, kdir / "include", kdir / "arch/x86/include")
    assert proc.returncode == 0, proc.stderr + text


@pytest.mark.parametrize(("mm", "field"), [(MM_OLD, "vm_flags"), (MM_NEW, "__vm_flags")])
def test_rendered_vma_flags_sets_and_clears(tmp_path, mm, field):
    """spmu_vma_flags() on both sides of 6.3 sets what it is told to set and clears what
    it is told to clear, and nothing else (run, not only compiled)."""
    kdir = make_tree(tmp_path / "t", "amd64", files={"include/linux/mm.h": mm})
    out = tmp_path / "compat.h"
    compat.write(kdir, out)
    src = tmp_path / "flags.c"
    src.write_text(f'#include <stdio.h>\n#include "{out}"\n'
                   "int main(void)\n{\n"
                   "\tstruct vm_area_struct vma;\n"
                   f"\t*(vm_flags_t *)&vma.{field} = 0x31;\n"
                   "\tspmu_vma_flags(&vma, 0x104, 0x21);\n"
                   f'\tprintf("%#lx\\n", (unsigned long)vma.{field});\n'
                   "\treturn 0;\n}\n")
    exe = tmp_path / "flags"
    build = subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-o", str(exe), str(src),
                            f"-I{kdir / 'include'}", f"-I{kdir / 'arch/x86/include'}"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    # 0x31 | 0x104 = 0x135, then & ~0x21 = 0x114
    assert subprocess.run([str(exe)], capture_output=True, text=True,
                          check=True).stdout.strip() == "0x114"


# --- write() and main() ------------------------------------------------------------------


def test_write_keeps_mtime_when_unchanged(tmp_path):
    kdir = make_tree(tmp_path / "t", "amd64")
    out = tmp_path / "b" / "compat.h"
    compat.write(kdir, out)
    first = out.read_text()
    old = 1_000_000_000
    os.utime(out, (old, old))
    compat.write(kdir, out)
    assert out.stat().st_mtime == old and out.read_text() == first
    # A changed tree does rewrite it.
    (kdir / "arch/x86/include/asm/msr.h").write_text(MSR_NEW)
    compat.write(kdir, out)
    assert out.stat().st_mtime != old
    assert "#define HAVE_RDMSRQ 1" in out.read_text() and "#undef HAVE_RDMSRQ" in first


def test_main_bad_tree(tmp_path, capsys):
    out = tmp_path / "compat.h"
    assert compat.main(["--kdir", str(tmp_path / "nope"), "--out", str(out)]) == 2
    cap = capsys.readouterr()
    assert cap.err.startswith("compat: error: ") and "nope" in cap.err
    assert cap.out == "" and not out.exists()
    kdir = make_tree(tmp_path / "t", skip=("include/linux/module.h",))
    assert compat.main(["--kdir", str(kdir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "compat: error: probe HAVE_MODULE_IMPORT_NS_STRING" in err
    assert "include/linux/module.h" in err and not out.exists()


def test_main_good_tree(tmp_path, capsys):
    kdir = make_tree(tmp_path / "t", "amd64")
    out = tmp_path / "o" / "compat.h"
    assert compat.main(["--kdir", str(kdir), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = [f for f in compat.FEATURES if f.arch in ("all", "amd64")]
    assert [ln.split()[0] for ln in lines] == [f.name for f in expected]
    assert [ln.split()[1] for ln in lines] == [
        "yes" if "#define " + f.name + " 1" in out.read_text() else "no" for f in expected]
    assert compat.main(["--kdir", str(kdir), "--out", str(out), "-q"]) == 0
    assert capsys.readouterr().out == ""


# --- standalone for DKMS -----------------------------------------------------------------


def imported_names(path: Path) -> set[str]:
    """Top-level names a module imports; a relative import must name a sibling file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level <= 1 and node.module, f"{path}:{node.lineno}: parent import"
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names)


@pytest.mark.parametrize(("name", "allowed"), [
    ("compat.py", {"jinja2", "kbuildfiles"}),
    ("kbuildfiles.py", set()),
])
def test_imports_only_stdlib_and_siblings(name, allowed):
    names = imported_names(COMPAT_PY.parent / name)
    assert names == allowed


def test_runs_as_plain_script(tmp_path):
    kdir = make_tree(tmp_path / "t", "amd64")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(COMPAT_PY), "--kdir", str(kdir),
                           "--out", "out/compat.h"], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "compat.h").read_text() == compat.render(*compat.probe_all(kdir))
    assert proc.stdout.splitlines()[0].startswith(compat.FEATURES[0].name)
    bad = subprocess.run([sys.executable, str(COMPAT_PY), "--kdir", "nope", "--out", "x.h"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("compat: error:")
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(("timer_h", "value"), [(TIMER_OLD, False), (TIMER_NEW, True)])
def test_timer_wrapper_compiles_both_ways(tmp_path, timer_h, value):
    kdir = make_tree(tmp_path / "t", files={"include/linux/timer.h": timer_h})
    out = tmp_path / "compat.h"
    results = compat.write(kdir, out)
    assert next(r.value for r in results if r.feature.name == "HAVE_TIMER_DELETE_SYNC") is value
    body = ("int stop(struct timer_list *t);\n"
            "int stop(struct timer_list *t) { return spmu_timer_delete_sync(t); }\n"
            "int which(void);\n"
            "int which(void) {\n"
            "  return spmu_armpmu_idx_to_counter(0) + spmu_kvm_vcpu_loaded((void *)0);\n}\n")
    proc = gcc_syntax_check(tmp_path, out, body, kdir / "include")
    assert proc.returncode == 0, proc.stderr + out.read_text()


@pytest.mark.parametrize(("pmuv3_h", "cycle"), [
    (None, 31),  # before 6.4: no header, old numbering (idx 0 is the cycle counter)
    ("#define ARMV8_PMU_CYCLE_COUNTER_EL0 1\n", 31),  # 6.4-6.11: header, old numbering
    ("#define ARMV8_PMU_MAX_GENERAL_COUNTERS\t31\n#define ARMV8_PMU_CYCLE_IDX\t31\n", 0),
])
def test_armpmu_idx_mapping_follows_the_tree(tmp_path, pmuv3_h, cycle):
    # What arm_pmu's hw.idx 0 is: the cycle counter (31 to user space) before 6.12,
    # PMEVCNTR0 from 6.12; idx 32 (the instruction counter) has no EL0 name here.
    files = {"include/linux/perf/arm_pmuv3.h": pmuv3_h} if pmuv3_h else {}
    kdir = make_tree(tmp_path / "t", files=files)
    out = tmp_path / "compat.h"
    compat.write(kdir, out)
    prog = tmp_path / "idx.c"
    prog.write_text(f'#include "{out}"\n#include <stdio.h>\n'
                    "int main(void) { printf(\"%d %d %d %d\\n\", spmu_armpmu_idx_to_counter(0),"
                    " spmu_armpmu_idx_to_counter(1), spmu_armpmu_idx_to_counter(32),"
                    " spmu_armpmu_idx_to_counter(-1)); return 0; }\n")
    exe = tmp_path / "idx"
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", f"-I{kdir / 'include'}", "-o",
                    str(exe), str(prog)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    want_idx1 = 0 if cycle == 31 else 1
    assert got == [cycle, want_idx1, -1 if cycle == 0 else 31, -1]


@pytest.mark.parametrize("state", ["long state;", "unsigned int __state;"],
                         ids=["state", "__state"])
@pytest.mark.parametrize(("config", "export", "members"), [
    ("CONFIG_PREEMPT_NOTIFIERS=y\n", True, True),
    ("CONFIG_PREEMPT_NOTIFIERS=y\n", False, False),
    ("", False, False),
])
def test_preempt_notifier_wrappers_follow_the_tree(tmp_path, config, export, members, state):
    # With CONFIG_PREEMPT_NOTIFIERS, "a vCPU is loaded" is a notifier on current that is
    # not ours (no export needed); let-in threads need preempt_notifier_register exported;
    # without notifiers the wrappers must not touch the field. Run, not only compiled, on
    # a fake notifier list: ours alone is no vCPU, another one is; spmu_task_notifier()
    # finds ours; spmu_task_dead() reads the field the tree has (5.14: __state).
    symvers = dict(SYMVERS_LINES)
    if export:
        symvers["preempt_notifier_register"] = (
            "0x33333333\tpreempt_notifier_register\tvmlinux\tEXPORT_SYMBOL_GPL\t")
    kdir = make_tree(tmp_path / "t", config=config, symvers=symvers,
                     files={"include/linux/sched.h": SCHED.replace("long state;", state)})
    out = tmp_path / "compat.h"
    compat.write(kdir, out)
    text = out.read_text()
    assert ("current->preempt_notifiers" in text) is bool(config)
    assert f"#define SPMU_HAVE_MEMBERS {int(members)}" in text
    field = state.split()[-1].rstrip(";")
    find = ("(spmu_task_notifier(current, mine) == &ours) + "
            "2 * (spmu_task_notifier(current, (void *)&b) == &theirs)" if members else "0")
    prog = tmp_path / "pn.c"
    prog.write_text(
        f'#include "{out}"\n#include <stdio.h>\n'
        "static struct task_struct task;\nstruct task_struct *current = &task;\n"
        "static int a, b;\nstatic struct preempt_notifier ours, theirs;\n"
        "int main(void) {\n"
        "  const struct preempt_ops *mine = (const void *)&a;\n"
        "  ours.ops = (void *)&a; theirs.ops = (void *)&b;\n"
        "  int none = spmu_kvm_vcpu_loaded(mine);\n"
        "  task.preempt_notifiers.first = &ours.link;\n"
        "  int alone = spmu_kvm_vcpu_loaded(mine);\n"
        "  ours.link.next = &theirs.link;\n"
        "  int both = spmu_kvm_vcpu_loaded(mine);\n"
        f"  int found = {find};\n"
        f"  int alive = spmu_task_dead(current);\n  task.{field} = TASK_DEAD;\n"
        '  printf("%d %d %d %d %d %d\\n", none, alone, both, found, alive,'
        " spmu_task_dead(current));\n  return 0;\n}\n")
    exe = tmp_path / "pn"
    build = subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", f"-I{kdir / 'include'}",
                            "-o", str(exe), str(prog)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    # Without an export nothing of ours is ever registered: any notifier is a vCPU's.
    alone = 1 if config and not members else 0
    assert got == [0, alone, 1 if config else 0, 3 if members else 0, 0, 1]


@pytest.mark.parametrize("tool", ["scripts/basic/fixdep", "scripts/mod/modpost"])
def test_half_installed_tree_named_before_make(tmp_path, capsys, tool):
    """DKMS runs compat.py first: headers without their kbuild tools (linux-kbuild-X) fail
    there with the missing tool named, and no header is written."""
    kdir = make_tree(tmp_path / "k", skip=(tool,))
    out = tmp_path / "compat.h"
    assert compat.main(["--kdir", str(kdir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"kbuild tools missing: {tool};" in err and "linux-kbuild-X" in err
    assert not out.exists()


@pytest.mark.parametrize("have", [False, True])
def test_bus_wait_released_follows_the_tree(tmp_path, have):
    """Before 6.3 (bus_type has `p`) unload waits, in a loop, until the core has let go
    of bus->p; from 6.3 the wait is empty. Both compile."""
    bus = "struct subsys_private;\nstruct bus_type {\n\tconst char *name;\n"
    bus += "\tstruct subsys_private *p;\n};\n" if have else "};\n"
    kdir = make_tree(tmp_path / "t", files={
        "include/linux/device/bus.h": bus,
        "include/linux/device.h": "#include <linux/device/bus.h>\n" + DEVICE_OLD,
        "include/linux/delay.h": "#define READ_ONCE(x) (x)\n#define WRITE_ONCE(x, v) ((x) = (v))"
                                 "\n#define IS_ENABLED(o) 1\n#define NULL ((void *)0)\n"
                                 "void msleep(unsigned int msecs);\n",
        "include/linux/printk.h": "#define pr_warn(...) ((void)0)\n"})
    out = tmp_path / "compat.h"
    compat.write(kdir, out)
    text = out.read_text()
    body = re.search(r"spmu_bus_wait_released\(struct bus_type \*bus\)\n\{\n(.*?)^\}", text,
                     re.M | re.S).group(1)
    assert ("while (READ_ONCE(bus->p)) {" in body and "msleep(20);" in body) == have, body
    assert body.strip() == "" if not have else "pr_warn(" in body
    # After a failed register: with DEBUG_KOBJECT_RELEASE a placeholder in bus->p, waited
    # for (bounded) until the late release writes NULL, and NULL again after.
    failed = re.search(r"spmu_bus_wait_failed_register\(struct bus_type \*bus\)\n\{\n(.*?)^\}",
                       text, re.M | re.S).group(1)
    if have:
        assert "if (!IS_ENABLED(CONFIG_DEBUG_KOBJECT_RELEASE))\n\t\treturn;" in failed
        assert failed.index("WRITE_ONCE(bus->p, (struct subsys_private *)bus);") < \
            failed.index("READ_ONCE(bus->p) && waited_ms < 10000") < \
            failed.rindex("WRITE_ONCE(bus->p, NULL);")
    else:
        assert failed.strip() == "", failed
    proc = gcc_syntax_check(tmp_path, out, "void f(struct bus_type *b);\n"
                            "void f(struct bus_type *b) { spmu_bus_wait_released(b); "
                            "spmu_bus_wait_failed_register(b); }\n",
                            kdir / "include")
    assert proc.returncode == 0, proc.stderr
