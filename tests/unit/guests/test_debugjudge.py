"""pmubuild.guests.debugjudge on consoles of debug guests, and the pieces of the debug kernels that
run without building one: the fragment, the lost-option check, the console parser."""

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.guests import debugjudge, debugkernel, qemu, selfkernel

ODEBUG = """\
[   12.000000] ------------[ cut here ]------------
[   12.000001] ODEBUG: free active (active state 0) object type: timer_list hint: spmu_idle+0x0/0x10
[   12.000002] WARNING: CPU: 1 PID: 93 at lib/debugobjects.c:505 debug_print_object+0xd8/0x100
[   12.000003] Modules linked in: spmu_broken(O+)
[   12.000004] ---[ end trace 0000000000000000 ]---"""
LOCKDEP = """\
[    9.100000] ======================================================
[    9.100001] WARNING: possible circular locking dependency detected
[    9.100002] 6.1.0 #1 Not tainted
[    9.100003] ------------------------------------------------------"""
BOOT_WARNING = "[    0.500000] WARNING: CPU: 0 PID: 1 at kernel/early.c:1 early_thing+0x4/0x8"


def console(klog: list[str], kmemleak: list[str] | None = None) -> str:
    lines = ["@@SPMU BOOTED release=6.1.0 machine=aarch64 cpus=2", "@@SPMU CMD-BEGIN",
             "insmod rc=0", "@@SPMU CMD-END rc=0"]
    if kmemleak is not None:
        lines += ["@@SPMU KMEMLEAK-BEGIN", *kmemleak, "@@SPMU KMEMLEAK-END"]
    lines += ["@@SPMU KLOG-BEGIN", *klog, "@@SPMU KLOG-END"]
    return "\r\n".join(lines) + "\r\n"


MARK = f"[    1.000000] {debugjudge.INIT_MARK}"


def test_reports_after_the_init_mark_count_those_before_are_the_kernels():
    v = debugjudge.judge(console([BOOT_WARNING, MARK, *ODEBUG.splitlines(),
                                  *LOCKDEP.splitlines()], []))
    assert [r.kind for r in v.reports] == ["debugobjects", "lockdep"]
    # The WARN() line right after the ODEBUG title belongs to that report.
    assert "debug_print_object" in v.reports[0].text
    assert v.reports[0].title.startswith("ODEBUG: free active")
    assert [r.kind for r in v.boot] == ["warning"]
    assert v.counts() == {"debugobjects": 1, "lockdep": 1}
    assert len(v.problems()) == 2 and v.problems()[1].startswith("lockdep: WARNING: possible")


def test_a_clean_log_has_no_problem_and_a_missing_log_is_one():
    v = debugjudge.judge(console([MARK, "[    2.0] simple-pmu: loaded"], []))
    assert v.reports == () and v.klog and v.kmemleak and v.problems() == []
    v = debugjudge.judge("@@SPMU BOOTED\r\n@@SPMU DONE\r\n")
    assert not v.klog and v.problems() == [
        "the guest printed no kernel log (@@SPMU KLOG): nothing was judged"]


def test_a_log_that_lost_its_start_or_a_run_without_kmemleak_fails():
    # The buffer wrapped: the init's mark is gone, so is whatever came before it.
    v = debugjudge.judge(console(["[   99.0] simple-pmu: loaded", BOOT_WARNING], []))
    assert not v.marked and [r.kind for r in v.reports] == ["warning"]
    assert any("lost its start" in p for p in v.problems())
    # kmemleak refused its scan (it turned itself off): no block, and that fails.
    v = debugjudge.judge(console([MARK], None))
    assert v.problems() == ["no kmemleak scan (@@SPMU KMEMLEAK): leaks were not judged"]
    off = debugjudge.judge(console([MARK, "[    5.0] kmemleak: Cannot allocate a kmemleak_object "
                                          "structure", "[    5.1] kmemleak: Kernel memory leak "
                                          "detector disabled"], []))
    assert {r.kind for r in off.reports} == {"kmemleak-off"}


def test_kmemleak_entries_are_reports_each_with_its_backtrace():
    leak = ["unreferenced object 0xffff000003a1b400 (size 64):",
            '  comm "insmod", pid 95, jiffies 4294893670 (age 8.100s)',
            "  backtrace:",
            "    [<000000009c5d1a0e>] kmalloc_trace+0x40/0x80",
            "    [<00000000b1c0e3a2>] spmu_commit+0x90/0x200 [spmu_broken]",
            "unreferenced object 0xffff000003a1b800 (size 128):",
            "  backtrace:"]
    v = debugjudge.judge(console([MARK], leak))
    assert [r.kind for r in v.reports] == ["kmemleak", "kmemleak"]
    assert "spmu_commit" in v.reports[0].text and "0xffff000003a1b800" in v.reports[1].title
    # A long backtrace is cut as other reports are.
    deep = debugjudge.leaks_in(leak[:3] + [f"    [<0>] f{i}+0x0/0x4" for i in range(50)])
    assert len(deep[0].text.splitlines()) == debugjudge.REPORT_LINES


@pytest.mark.parametrize(("line", "kind"), [
    ("BUG: KASAN: slab-use-after-free in spmu_commit+0x5c/0x200 [spmu_broken]", "kasan"),
    ("BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
     "atomic-sleep"),
    ("BUG: using smp_processor_id() in preemptible [00000000] code: sh/1", "atomic-sleep"),
    ("UBSAN: shift-out-of-bounds in tests/debug/broken/broken.c:88:3", "ubsan"),
    ("BUG: KCSAN: data-race in spmu_check / spmu_timer_fn", "kcsan"),
    ("WARNING: suspicious RCU usage", "lockdep"),
    ("[ BUG: Invalid wait context ]", "lockdep"),
    ("Unable to handle kernel paging request at virtual address dead000000000122", "oops"),
    ("Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b", "oops"),
    ("INFO: task insmod:95 blocked for more than 120 seconds.", "hung"),
    ("BUG: unable to handle page fault for address: ffff", "bug"),
    ("WARNING: CPU: 1 PID: 7 at drivers/common/counters.c:99 spmu_check+0x1/0x2", "warning"),
    ("simple-pmu: cpu1: not every event is counting", None),
])
def test_kinds(line, kind):
    assert debugjudge.kind_of(line) == kind


def test_a_report_stops_at_the_next_and_after_report_lines():
    lines = ["BUG: KASAN: x"] + [f"  frame {i}" for i in range(50)] + ["UBSAN: y"]
    found = debugjudge.reports_in(lines)
    assert [r.kind for r in found] == ["kasan", "ubsan"]
    assert len(found[0].text.splitlines()) == debugjudge.REPORT_LINES + 1


def test_parse_console_leaves_the_printed_log_to_the_judge():
    """A report inside the KLOG dump is not the guest's crash (the judge counts it); the
    same line on the console outside it is."""
    text = console([MARK, "[    3.0] BUG: KASAN: slab-use-after-free in f+0x1/0x2"], [])
    assert qemu.parse_console(text).crashes == ()
    assert debugjudge.judge(text).reports[0].kind == "kasan"
    crashed = text.replace("@@SPMU KLOG-BEGIN", "[    3.1] BUG: KASAN: x\r\n@@SPMU KLOG-BEGIN")
    assert qemu.parse_console(crashed).crashes == ("[    3.1] BUG: KASAN: x",)


def test_debug_fragment_has_every_detector_and_no_slob():
    frag = debugkernel.fragment("debug", "arm64").splitlines()
    for option in ("PROVE_LOCKING", "DEBUG_ATOMIC_SLEEP", "PROVE_RCU", "KASAN_GENERIC",
                   "DEBUG_KMEMLEAK", "DEBUG_OBJECTS_TIMERS", "DEBUG_OBJECTS_WORK",
                   "DEBUG_OBJECTS_RCU_HEAD", "DEBUG_KOBJECT_RELEASE", "UBSAN",
                   "DEBUG_PREEMPT", "FAILSLAB", "FAIL_PAGE_ALLOC", "ARM_PMU", "KVM",
                   "HOTPLUG_CPU", "PERF_EVENTS"):
        assert f"CONFIG_{option}=y" in frag, option
    assert "# CONFIG_SLOB is not set" in frag
    assert "CONFIG_KCSAN=y" in debugkernel.fragment("kcsan", "arm64").splitlines()
    # Task against its own CPU's timer: seen only with the interrupt watcher.
    assert {"CONFIG_KCSAN_INTERRUPT_WATCHER=y", "CONFIG_DETECT_HUNG_TASK=y",
            "CONFIG_DEFAULT_HUNG_TASK_TIMEOUT=600"} <= set(
        debugkernel.fragment("kcsan", "arm64").splitlines())
    amd64 = debugkernel.fragment("debug", "amd64").splitlines()
    assert "CONFIG_KVM=y" not in amd64
    # The hung-task detector on both kernels, each with its timeout (audit-47: a timeout
    # without DETECT_HUNG_TASK would be dropped by olddefconfig, a lost option).
    for lines in (frag, amd64):
        assert {"CONFIG_DETECT_HUNG_TASK=y", "CONFIG_DEFAULT_HUNG_TASK_TIMEOUT=600"} <= set(
            lines)
    # CPU PM from idle (issue 24): the PSCI idle driver and the governor a periodic tick
    # uses, on both arm64 kernels; amd64 has neither.
    idle = {"CONFIG_CPU_IDLE=y", "CONFIG_ARM_PSCI_CPUIDLE=y", "CONFIG_CPU_IDLE_GOV_LADDER=y"}
    assert idle <= set(frag)
    assert idle <= set(debugkernel.fragment("kcsan", "arm64").splitlines())
    assert not any("IDLE" in ln for ln in amd64)
    with pytest.raises(PipelineError, match="no 'kcsan' debug kernel for amd64"):
        debugkernel.fragment("kcsan", "amd64")


def test_lost_options_names_each_line_olddefconfig_did_not_keep():
    frag = "\n".join(selfkernel.config_lines(("A", "B"), {"S": '"x y"'}, unset=("C", "D")))
    config = {"CONFIG_A": "y", "CONFIG_B": "m", "CONFIG_S": "x y", "CONFIG_D": "y"}
    assert selfkernel.lost_options(frag, config) == ["CONFIG_B=y", "# CONFIG_D is not set"]
    assert selfkernel.lost_options(frag, {**config, "CONFIG_B": "y", "CONFIG_D": "n"}) == []


def test_test_debug_refuses_bad_input_before_building_anything(monkeypatch):
    from pmubuild import commands
    from pmubuild.guests import debugrun

    def no_build(*a, **k):
        raise AssertionError("a kernel would be built")

    monkeypatch.setattr(debugkernel, "ensure", no_build)
    with pytest.raises(PipelineError, match="nothing to run"):
        commands.test_debug("arm64", " , ", "none", 1, 1.0)
    with pytest.raises(PipelineError, match="--bugs 'leak,deadlock': all, none, or some of"):
        commands.test_debug("arm64", "debug", "leak,deadlock", 1, 1.0)
    with pytest.raises(PipelineError, match="--bugs ' , ': all, none"):
        commands.test_debug("arm64", "debug", " , ", 1, 1.0)
    with pytest.raises(PipelineError, match="no arm64 guest profile 'fast'"):
        debugrun.profiles(None, "arm64", ["fast"], 1)  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="no amd64 guest profile 'debug'"):
        debugrun.profiles(None, "amd64", ["debug"], 1)  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="unknown bug 'deadlock'"):
        debugrun.detectors(None, "arm64", ["leak", "deadlock"])  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="no bug named"):
        debugrun.detectors(None, "arm64", [])  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="no 'debug' debug kernel for riscv64"):
        debugrun.detectors(None, "riscv64", ["leak"])  # type: ignore[arg-type]


def test_debug_bugs_all_none_or_named_in_the_guests_order():
    from pmubuild import commands
    from pmubuild.guests import debugrun

    assert commands.debug_bugs("all") == [b for b in debugrun.DETECTOR_BUGS if b != "data-race"]
    assert commands.debug_bugs("all", "kcsan") == ["data-race"]
    assert commands.debug_bugs(" none ") == []
    assert commands.debug_bugs("lock-order, leak") == ["lock-order", "leak"]
    # lockdep turns itself off at its first report (the mutex in a timer is one) and at
    # KASAN's: lock order comes before both, use after free last.
    order = debugrun.flavour_bugs("debug")
    assert order.index("lock-order") < order.index("sleep-in-timer")
    assert order[-1] == "use-after-free"
    script = "".join(debugrun.BUG_SCRIPT.format(bug=b) for b in ("shift", "leak"))
    assert script.index("bug=shift pid=$$") < script.index("bug=leak pid=$$")


def bug_mark(bug: str, pid: int, t: float) -> str:
    return f"[{t:12.6f}] spmu-detector: bug={bug} pid={pid}"


def test_reports_go_to_the_bug_marked_before_them_and_leaks_to_the_loading_pid():
    klog = [BOOT_WARNING, MARK,
            "[    1.500000] WARNING: CPU: 0 PID: 1 at x.c:1 stray+0x0/0x4",
            bug_mark("leak", 101, 2.0), "[    2.1] spmu_broken: leaking 00000000",
            bug_mark("leak-on-error", 102, 3.0),
            bug_mark("shift", 103, 4.0), "[    4.1] UBSAN: shift-out-of-bounds in broken.c:80:30",
            bug_mark("timer-freed", 104, 5.0), *ODEBUG.splitlines(),
            bug_mark("lock-order", 105, 9.0), *LOCKDEP.splitlines()]
    leaks = ["unreferenced object 0xffff000001 (size 64):", '  comm "insmod", pid 101, jiffies 1',
             "  backtrace:", "unreferenced object 0xffff000002 (size 128):",
             '  comm "insmod", pid 102, jiffies 2', "unreferenced object 0xffff000003 (size 8):",
             '  comm "swapper/0", pid 1, jiffies 3']
    found = debugjudge.by_bug(console(klog, leaks))
    kinds = {bug: [r.kind for r in rs] for bug, rs in found.items()}
    assert kinds == {"": ["warning", "kmemleak"], "leak": ["kmemleak"],
                     "leak-on-error": ["kmemleak"], "shift": ["ubsan"],
                     "timer-freed": ["debugobjects"], "lock-order": ["lockdep"]}
    assert "pid 102" in found["leak-on-error"][0].text
    # The boot's own warning, before init, is nobody's.
    assert all("early_thing" not in r.text for rs in found.values() for r in rs)


KSET_LEAK = """\
unreferenced object 0xffffff8002e0d200 (size 128):
  comm "failnth", pid 522, jiffies 4295042727
  hex dump (first 32 bytes):
    73 69 6d 70 6c 65 2d 70 6d 75 00 00 51 00 3d 07  simple-pmu..Q.=.
    69 76 65 72 73 2f 6f 66 5f 66 69 78 65 64 5f 66  ivers/of_fixed_f
  backtrace:
    [<ffffffc0081e032c>] kstrdup+0x60/0x80
    [<ffffffc0083b3320>] kobject_set_name_vargs+0x4c/0xc8
    [<ffffffc0083b3434>] kobject_set_name+0x98/0xb0
    [<ffffffc0083510b8>] bus_register+0xa8/0x2d0
    [<ffffffc008351894>] subsys_system_register+0x18/0x20
    [<ffffffc000403bcc>] 0xffffffc000403bcc""".splitlines()


def test_the_6_1_kset_register_leak_is_shown_not_counted_and_nothing_like_it():
    v = debugjudge.judge(console([MARK], KSET_LEAK))
    assert v.reports == () and v.problems() == []
    assert len(v.known) == 1 and "6.1's kset_register()" in v.known[0][1]
    # Another object's name, or the frames apart: the module's own, counted.
    other = [ln.replace("simple-pmu", "other-bus!") for ln in KSET_LEAK]
    apart = [*KSET_LEAK[:9], "    [<ffffffc0083b3500>] spmu_sysfs_register+0x10/0x20",
             *KSET_LEAK[9:]]
    for leak in (other, apart):
        v = debugjudge.judge(console([MARK], leak))
        assert [r.kind for r in v.reports] == ["kmemleak"] and v.known == ()


def kcsan_report(first: str, second: str, filler: int = 0) -> list[str]:
    """A KCSAN report as 6.1 prints it: two stacks between rules."""
    body = ["==================================================================",
            f"BUG: KCSAN: data-race in {first.split('+')[0]} / {second.split('+')[0]}", "",
            "write to 0xffff800008f1a2c0 of 8 bytes by task 77 on cpu 1:",
            f" {first}", *([" kernel_frame+0x10/0x20"] * filler),
            " ret_from_fork+0x10/0x20", "",
            "read to 0xffff800008f1a2c0 of 8 bytes by interrupt on cpu 0:",
            f" {second}", " __run_timers+0x1d0/0x2a0", "",
            "value changed: 0x0000000000000001 -> 0x0000000000000002", "",
            "Reported by Kernel Concurrency Sanitizer on:",
            "CPU: 0 PID: 0 Comm: swapper/0 Not tainted 6.1.0 #1",
            "=================================================================="]
    return [f"[   20.{i:06d}] {ln}" for i, ln in enumerate(body)]


def test_a_data_race_with_the_module_in_a_stack_counts_the_kernels_own_is_shown():
    mine = kcsan_report("spmu_sysfs_store+0x40/0x90 [simple_pmu]",
                        "spmu_timer_fn+0x20/0x80 [simple_pmu]")
    # The module's frame only in the second stack, past REPORT_LINES.
    deep = kcsan_report("kernfs_fop_write_iter+0x1/0x2", "spmu_timer_fn+0x20/0x80 [simple_pmu]",
                        filler=debugjudge.REPORT_LINES)
    kernel = kcsan_report("tick_sched_timer+0x1/0x2", "rcu_gp_kthread+0x3/0x4")
    v = debugjudge.judge(console([MARK, *mine, *deep, *kernel]), kmemleak=False)
    assert [r.kind for r in v.reports] == ["kcsan", "kcsan"]
    assert [r.title.split("] ")[-1] for r in v.reports] == [
        "BUG: KCSAN: data-race in spmu_sysfs_store / spmu_timer_fn",
        "BUG: KCSAN: data-race in kernfs_fop_write_iter / spmu_timer_fn"]
    assert [(r.title, why) for r, why in v.known] == [
        (kernel[1].split("] ", 1)[1], debugjudge.KERNEL_RACE)]
    assert v.problems() == [f"kcsan: {r.text}" for r in v.reports]  # no scan is due


def test_a_kcsan_report_ends_at_its_closing_rule():
    """(audit-47) What follows a race of the kernel's own is not part of it: lines naming
    the module a few lines on (initcall_debug's, a dump_stack()) do not make it the
    module's."""
    kernel = kcsan_report("tick_sched_timer+0x1/0x2", "rcu_gp_kthread+0x3/0x4")
    after = ["[   21.000000] calling  spmu_init+0x0/0x1000 [simple_pmu] @ 95",
             "[   21.000001] initcall spmu_init+0x0/0x1000 [simple_pmu] returned 0 after 8 usecs"]
    v = debugjudge.judge(console([MARK, *kernel, *after]), kmemleak=False)
    assert v.reports == () and v.problems() == []
    ((race, why),) = v.known
    assert why == debugjudge.KERNEL_RACE
    assert race.text.splitlines()[-1] == kernel[-1].split("] ", 1)[1]  # the closing rule


def test_a_log_that_lost_its_start_still_tells_the_kernels_races_from_the_modules():
    """(audit-47) Judged whole (no init mark): the kernel's race shown, the module's
    counted, as after the mark."""
    mine = kcsan_report("spmu_sysfs_store+0x40/0x90 [simple_pmu]",
                        "spmu_timer_fn+0x20/0x80 [simple_pmu]")
    kernel = kcsan_report("tick_sched_timer+0x1/0x2", "rcu_gp_kthread+0x3/0x4")
    v = debugjudge.judge(console([*kernel, *mine]), kmemleak=False)
    assert not v.marked
    assert [r.title for r in v.reports] == [mine[1].split("] ", 1)[1]]
    assert [(r.title, why) for r, why in v.known] == [
        (kernel[1].split("] ", 1)[1], debugjudge.KERNEL_RACE)]
