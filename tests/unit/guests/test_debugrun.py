"""pmubuild.guests.debugrun and commands.test_debug / ci_debug / test_all without a kernel or QEMU:
the debug kernel, the builds, the initramfs and the boot are fakes; the fake guest answers
the script it was given (each bug marked, then reported by its detector, unless told
otherwise). What must fail: a detector missing its bug or reporting another kind, a
report before the first bug, a guest that printed no kernel log or crashed, a profile run
with a report or a failed script, a debug part of `invoke test` that failed or raised."""

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pmubuild import commands
from pmubuild.common.errors import PipelineError
from pmubuild.guests import debugjudge, debugkernel, debugrun, guest, qemu
from pmubuild.modbuild import build

from .test_debugjudge import MARK, bug_mark, console

# One title per detector, as each reports its bug (kmemleak: an entry with the pid).
TITLE = {
    "ubsan": "UBSAN: shift-out-of-bounds in tests/debug/broken/broken.c:80:30",
    "debugobjects": "ODEBUG: free active (active state 0) object type: timer_list",
    "lockdep": "WARNING: possible circular locking dependency detected",
    "atomic-sleep": "BUG: sleeping function called from invalid context at mutex.c:580",
    "kasan": "BUG: KASAN: slab-use-after-free in spmu_commit+0x5c/0x200",
    "kcsan": "BUG: KCSAN: data-race in spmu_racer / spmu_racer",
}
# A data race of the kernel's own, as 6.1 reports it: no [simple_pmu] frame.
KERNEL_RACE = [
    "==================================================================",
    "BUG: KCSAN: data-race in tick_sched_do_timer / tick_nohz_next_event", "",
    "write to 0xffff800009b2c5d8 of 4 bytes by interrupt on cpu 1:",
    " tick_sched_do_timer+0x2c/0x120", "",
    "read to 0xffff800009b2c5d8 of 4 bytes by task 0 on cpu 0:",
    " tick_nohz_next_event+0x1c/0x1e0", "",
    "==================================================================",
]


class Guest:
    """The fake guest: what it was booted with, and how it behaves."""

    def __init__(self, tmp: Path, wrong: dict[str, str | None] | None = None,
                 klog: bool = True, stray: bool = False, crash: bool = False,
                 results: tuple[str, ...] = (), profile_report: bool = False,
                 anonymous: tuple[str, ...] = (), kernel_race: bool = False):
        self.tmp, self.wrong, self.klog = tmp, wrong or {}, klog
        self.anonymous = anonymous  # bugs whose report names no module: the kernel's own
        self.stray, self.crash = stray, crash
        self.results, self.profile_report = results, profile_report
        self.kernel_race = kernel_race  # a profile run's log has a race of the kernel's own
        self.boots: list[dict] = []
        self.flavours: list[str] = []  # the kernels asked for
        self.works: list[str] = []  # the flavour of each work dir asked for

    def initramfs(self, spec, apt, out):
        self.spec = spec
        return out

    def boot(self, arch, image, initrd, mode="test", timeout=180, smp=2, icount=True,
             el2=False, params="", on_line=None, idle_states=False):
        self.boots.append(dict(spec=self.spec, icount=icount, el2=el2, params=params,
                               timeout=timeout, idle_states=idle_states))
        text = self.detectors(self.spec.command) if self.spec.mode == "cmd" else self.profile()
        if self.crash:
            text = text.replace("@@SPMU CMD-END", "[   9.0] Unable to handle kernel paging "
                                "request\r\n@@SPMU CMD-END")
        return qemu.GuestRun.of(text, 1.0, False, 0)

    def detectors(self, script: str) -> str:
        klog, leaks = [MARK], []
        if self.stray:
            klog.append("[    1.5] WARNING: CPU: 0 PID: 1 at x.c:1 stray+0x0/0x4")
        for i, bug in enumerate(re.findall(r"bug=([\w-]+) pid=", script)):
            pid = 100 + i
            klog.append(bug_mark(bug, pid, 2.0 + i))
            kind = self.wrong.get(bug, debugrun.DETECTOR_BUGS[bug])
            if kind == "kmemleak":
                leaks += [f"unreferenced object 0xffff00000{i} (size 64):",
                          f'  comm "insmod", pid {pid}, jiffies 1']
            elif kind is not None:
                klog.append(f"[{2.5 + i:12.6f}] {TITLE[kind]}")
                if bug not in self.anonymous:  # the report's trace names the module
                    klog.append(f"[{2.5 + i:12.6f}]  spmu_commit+0x5c/0x200 [spmu_broken]")
        text = console(klog, leaks)
        return text if self.klog else text.split("@@SPMU KLOG-BEGIN")[0]

    def profile(self) -> str:
        klog = [MARK]
        if self.kernel_race:  # no frame of the module: shown, not counted
            klog += [f"[    4.0] {ln}" for ln in KERNEL_RACE]
        if self.profile_report and self.flavours[-1] == "kcsan":  # the module's race
            klog += [f"[    5.0] {TITLE['kcsan']}",
                     "[    5.0]  spmu_timer_fn+0x20/0x80 [simple_pmu]"]
        elif self.profile_report:
            klog.append(f"[    5.0] {TITLE['kasan']}")
        # The guest's init prints a scan only where the kernel has kmemleak.
        scan = ["@@SPMU KMEMLEAK-BEGIN", "@@SPMU KMEMLEAK-END"] \
            if self.flavours[-1] == "debug" else []
        lines = ["@@SPMU BOOTED release=6.1.0 machine=aarch64 cpus=2",
                 *(f"@@SPMU TEST {n} {'FAIL' if n.startswith('!') else 'PASS'} x"
                   .replace("!", "") for n in self.results),
                 *scan, "@@SPMU KLOG-BEGIN", *klog, "@@SPMU KLOG-END", "@@SPMU DONE"]
        return "\r\n".join(lines) + "\r\n"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """Install a Guest (returned by calling the fixture) in place of kernel, builds, QEMU."""
    def install(**kw) -> Guest:
        g = Guest(tmp_path, **kw)
        k = SimpleNamespace(kdir=tmp_path / "kdir", release="6.1.0", image=tmp_path / "Image")
        def ensure(apt, arch, flavour="debug"):
            g.flavours.append(flavour)
            return k

        monkeypatch.setattr(debugkernel, "ensure", ensure)
        monkeypatch.setattr(debugrun, "build_broken",
                            lambda kdir, arch, out: tmp_path / "broken" / "spmu_broken.ko")
        monkeypatch.setattr(build, "build", lambda kdir: SimpleNamespace(ko=tmp_path / "m.ko"))
        monkeypatch.setattr(debugrun, "_work",
                            lambda arch, flavour="debug": g.works.append(flavour) or tmp_path)
        monkeypatch.setattr(guest, "initramfs", g.initramfs)
        monkeypatch.setattr(qemu, "boot", g.boot)
        monkeypatch.setattr(commands, "PrivateApt", lambda: None)
        return g
    return install


def debug(*a, **k) -> tuple[bool, list[str]]:
    fails: list[str] = []
    return commands.test_debug(*a, fails=fails, **k), fails


# --- the detectors ------------------------------------------------------------------------

def test_every_detector_catching_its_bug_passes(fake, capsys):
    g = fake()
    ok, fails = debug("arm64", "", "all", 1, 1.0)
    assert ok and fails == [], capsys.readouterr().out
    out = capsys.readouterr().out
    assert out.count("PASS detector") == len(debugrun.flavour_bugs("debug")) == 7
    assert g.boots[0]["params"].split()[0] == "spmu.debug=1"  # init marks and dumps the log
    assert g.flavours == ["debug"] and "data-race" not in g.boots[0]["spec"].command


def test_the_kcsan_kernel_proves_its_own_detector_on_the_data_race(fake, capsys):
    g = fake()
    ok, fails = debug("arm64", "", "all", 1, 1.0, flavour="kcsan")
    assert ok and fails == [], capsys.readouterr().out
    assert g.flavours == ["kcsan"]
    assert re.findall(r"bug=([\w-]+) pid=", g.boots[0]["spec"].command) == ["data-race"]


def test_a_missed_data_race_fails_naming_the_kcsan_kernel(fake):
    fake(wrong={"data-race": None})
    ok, fails = debug("arm64", "", "all", 1, 1.0, flavour="kcsan")
    assert not ok and fails == ["test-debug kcsan arm64: detector kcsan missed bug=data-race"]


@pytest.mark.parametrize("flavour, bugs, message", [
    ("debug", "data-race", "caught by the kcsan kernel's detector.*--flavour kcsan"),
    ("kcsan", "leak", "caught by the debug kernel's detector.*--flavour debug"),
])
def test_a_bug_asked_of_the_kernel_without_its_detector_is_refused(fake, flavour, bugs,
                                                                   message):
    g = fake()
    with pytest.raises(PipelineError, match=message):
        debug("arm64", "", bugs, 1, 1.0, flavour=flavour)
    assert g.boots == [] and g.flavours == []  # no kernel built either


@pytest.mark.parametrize("arch, flavour, profiles, message", [
    ("arm64", "kcsan", "debug", "no arm64 guest profile 'debug' on the kcsan kernel"),
    ("amd64", "kcsan", "main", "no 'kcsan' debug kernel for amd64"),
    ("arm64", "kasan", "main", "--flavour 'kasan': one of debug, kcsan"),
])
def test_a_profile_or_arch_the_flavour_lacks_is_refused(fake, arch, flavour, profiles, message):
    g = fake()
    with pytest.raises(PipelineError, match=re.escape(message)):
        debug(arch, profiles, "none", 1, 1.0, flavour=flavour)
    assert g.boots == []


def test_a_profile_the_flavour_lacks_is_refused_before_the_detectors_boot(fake):
    """(helper-46) The detectors' guest ran first, and only then was the profile
    refused."""
    g = fake()
    with pytest.raises(PipelineError, match="no arm64 guest profile 'debug' on the kcsan"):
        debug("arm64", "debug", "all", 1, 1.0, flavour="kcsan")
    assert g.boots == [] and g.flavours == []


@pytest.mark.parametrize("flavour, profiles", [("debug", ["debug", "stress"]),
                                               ("kcsan", ["stress"])])
def test_profiles_by_default_are_the_flavours(fake, flavour, profiles):
    g = fake(results=tuple(guest.manifest("arm64", "stress")))
    debug("arm64", None, "none", 1, 1.0, flavour=flavour)
    assert [b["spec"].profile for b in g.boots] == profiles


def test_amd64_by_default_runs_its_main_suite(fake):
    """(helper-47) The defaults are arm64's profiles: amd64 has only its main suite
    (the refusal), which it runs rather than refusing a profile nobody named."""
    g = fake(results=tuple(guest.manifest("amd64")))
    ok, fails = debug("amd64", None, "none", 1, 1.0)
    assert ok and fails == [] and [b["spec"].profile for b in g.boots] == [""]


def test_a_kcsan_profile_run_needs_no_kmemleak_scan_but_a_debug_one_does(fake, monkeypatch):
    g = fake(results=tuple(guest.manifest("arm64", "stress")))
    ok, fails = debug("arm64", "stress", "none", 1, 1.0, flavour="kcsan")
    assert ok and fails == [] and g.flavours == ["kcsan"]
    # The same console (no scan) on the debug kernel: leaks were not judged.
    monkeypatch.setattr(g, "flavours", ["kcsan"])
    monkeypatch.setattr(debugkernel, "ensure", lambda apt, arch, flavour="debug": SimpleNamespace(
        kdir=g.tmp / "kdir", release="6.1.0", image=g.tmp / "Image"))
    ok, fails = debug("arm64", "stress", "none", 1, 1.0)
    assert not ok and any("no kmemleak scan" in f for f in fails)


def test_each_flavour_keeps_its_runs_in_a_work_dir_of_its_own(fake, monkeypatch, tmp_path):
    """(audit-47) build/kcsan-ARCH beside build/debug-ARCH: one kernel's consoles,
    images and broken module do not overwrite the other's."""
    g = fake(results=tuple(guest.manifest("arm64", "stress")))
    ok, fails = debug("arm64", "stress", "all", 1, 1.0, flavour="kcsan")
    assert ok and fails == []
    assert g.flavours == g.works == ["kcsan", "kcsan"]  # the detectors', the profiles'
    monkeypatch.undo()
    monkeypatch.setattr(debugrun, "REPO", tmp_path)
    assert debugrun._work("arm64") == tmp_path / "build" / "debug-arm64"
    assert debugrun._work("arm64", "kcsan") == tmp_path / "build" / "kcsan-arm64"
    assert (tmp_path / "build" / "kcsan-arm64").is_dir()


@pytest.mark.parametrize("how, bugs, profiles, failure", [
    ("stray", "all", "", "test-debug kcsan arm64: a report before the first bug: WARNING"),
    ("crash", "all", "", "test-debug kcsan arm64: detectors guest: guest kernel panicked"),
    ("profile_report", "none", "stress",
     f"test-debug kcsan arm64 profile/stress: kcsan: {TITLE['kcsan']}"),
])
def test_a_failing_kcsan_run_names_the_kcsan_kernel_in_every_failure(fake, capsys, how, bugs,
                                                                     profiles, failure):
    """(audit-47) Each failure, and the summary line, tell it from the debug kernel's."""
    fake(results=tuple(guest.manifest("arm64", "stress")), **{how: True})
    ok, fails = debug("arm64", profiles, bugs, 1, 1.0, flavour="kcsan")
    assert not ok and any(f.startswith(failure) for f in fails), fails
    assert all(f.startswith("test-debug kcsan arm64") for f in fails), fails
    assert capsys.readouterr().out.splitlines()[-1].startswith("test-debug kcsan arm64: FAILED")


def test_a_kcsan_profile_run_shows_the_kernels_own_race_and_counts_the_modules(fake, capsys):
    """(audit-47) Through test-debug: the kernel's race printed as not counted; the run
    passes until the module's own race is in the log too."""
    fake(results=tuple(guest.manifest("arm64", "stress")), kernel_race=True)
    ok, fails = debug("arm64", "stress", "none", 1, 1.0, flavour="kcsan")
    out = capsys.readouterr().out
    assert ok and fails == [], out
    assert (f"(not counted, {debugjudge.KERNEL_RACE}) kcsan: {KERNEL_RACE[1]}") in out
    fake(results=tuple(guest.manifest("arm64", "stress")), kernel_race=True,
         profile_report=True)
    ok, fails = debug("arm64", "stress", "none", 1, 1.0, flavour="kcsan")
    assert not ok and fails == [f"test-debug kcsan arm64 profile/stress: kcsan: {TITLE['kcsan']}"]


def test_invoke_test_debug_passes_the_flavour_and_leaves_the_default_profiles_to_it(
        monkeypatch):
    """(audit-47) tasks.py: --flavour reaches commands.test_debug, and no --profiles is
    None there (the flavour's DEBUG_DEFAULT_PROFILES), not the debug kernel's list."""
    import inspect

    from invoke.parser import Parser, ParserContext

    # tasks.py sits at the checkout's top, on sys.path under `python -m pytest` only
    # (plain pytest, as `invoke unit` runs it, puts the tests' own folders there).
    monkeypatch.syspath_prepend(str(Path(commands.__file__).resolve().parents[1]))
    import tasks

    seen = []
    signature = inspect.signature(commands.test_debug)
    monkeypatch.setattr(tasks.commands, "test_debug",
                        lambda *a, **k: seen.append(signature.bind(*a, **k).arguments) or True)
    ctx = ParserContext(name="test-debug", args=tasks.test_debug.get_arguments())
    for argv in ([], ["--flavour", "kcsan"], ["--profiles", ""],
                 ["--fail-nth-step", "20", "--fail-nth-window", "8"]):
        parsed = Parser(contexts=[ctx]).parse_argv(["test-debug", *argv])
        tasks.test_debug.body(None, **parsed[0].as_kwargs)
    default, kcsan, detectors_only, window = seen
    assert default.get("flavour", "debug") == "debug" and default["profiles"] is None
    assert default.get("fail_nth_window", 0) == 0 and default["timeout"] == 10800
    assert kcsan["flavour"] == "kcsan" and kcsan["profiles"] is None
    assert detectors_only["profiles"] == ""  # --profiles "": the detectors alone
    assert (window["fail_nth_step"], window["fail_nth_window"]) == (20, 8)


@pytest.mark.parametrize("bug, kind", [
    ("lock-order", None), ("lock-order", "atomic-sleep"), ("use-after-free", "ubsan"),
    ("leak-on-error", None), ("leak", "ubsan"),
], ids=["missed", "other-kind", "other-kind-2", "leak-missed", "leak-as-ubsan"])
def test_a_detector_missing_its_bug_fails(fake, bug, kind):
    fake(wrong={bug: kind})
    ok, fails = debug("arm64", "", "all", 1, 1.0)
    assert not ok
    assert fails == [f"test-debug arm64: detector {debugrun.DETECTOR_BUGS[bug]} missed bug={bug}"]


@pytest.mark.parametrize("bug", ["lock-order", "use-after-free", "timer-freed"])
def test_a_report_of_the_right_kind_that_names_no_broken_module_is_not_a_catch(fake, bug):
    """The kernel's own report of that kind in the bug's window (a UBSAN hit in the
    kernel's code, say) must not pass for the detector catching the module's bug."""
    fake(anonymous=(bug,))
    ok, fails = debug("arm64", "", "all", 1, 1.0)
    assert not ok
    assert fails == [f"test-debug arm64: detector {debugrun.DETECTOR_BUGS[bug]} missed bug={bug}"]


def test_a_guest_that_printed_no_kernel_log_fails_every_detector(fake):
    fake(klog=False)  # no marks: kmemleak's entry is nobody's (a stray report too)
    ok, fails = debug("arm64", "", "leak", 1, 1.0)
    assert not ok and fails[0] == "test-debug arm64: detector kmemleak missed bug=leak"


def test_a_report_before_the_first_bug_fails(fake):
    fake(stray=True)
    ok, fails = debug("arm64", "", "all", 1, 1.0)
    assert not ok and len(fails) == 1 and "a report before the first bug" in fails[0]


def test_a_crashed_detector_guest_fails(fake):
    fake(crash=True)
    ok, fails = debug("arm64", "", "shift", 1, 1.0)
    assert not ok and any("detectors guest: guest kernel panicked" in f for f in fails)


def test_the_guest_commits_the_bugs_in_detector_order_whatever_the_order_asked(fake):
    g = fake()
    debug("arm64", "", "use-after-free,lock-order,sleep-in-timer,leak", 1, 1.0)
    script = g.boots[0]["spec"].command
    assert re.findall(r"bug=([\w-]+) pid=", script) == [
        "leak", "lock-order", "sleep-in-timer", "use-after-free"]


def test_bug_script_marks_with_the_loading_pid_before_it_loads_and_unloads(tmp_path):
    """The script run under sh with insmod, rmmod, /dev/kmsg and /proc/modules faked:
    the mark comes before the load and names the pid insmod runs as (kmemleak's entries
    name it), and a module left loaded is removed."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log, modules = tmp_path / "kmsg", tmp_path / "modules"
    for name, body in (("insmod", f'echo "insmod $* pid=$$" >> {log}\n'
                                  f'echo "spmu_broken 16384 0 - Live" > {modules}\n'),
                       ("rmmod", f'echo "rmmod $*" >> {log}\n: > {modules}\n')):
        (bindir / name).write_text("#!/bin/sh\n" + body)
        (bindir / name).chmod(0o755)
    modules.write_text("")
    script = (debugrun.BUG_SCRIPT.format(bug="leak").replace("/dev/kmsg", str(log))
              .replace("/proc/modules", str(modules)))
    assert "/dev/" not in script and "/proc/" not in script
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                       env={"PATH": f"{bindir}:/usr/bin:/bin"}, timeout=30)
    assert p.returncode == 0 and p.stdout == "insmod bug=leak rc=0\n", p.stdout + p.stderr
    mark, load, unload = log.read_text().splitlines()
    m = debugjudge.BUG_MARK.search(mark)
    assert m and m["bug"] == "leak"
    assert load == f"insmod /work/broken/spmu_broken.ko bug=leak pid={m['pid']}"
    assert unload == "rmmod spmu_broken"


# --- the profiles -------------------------------------------------------------------------

def test_the_debug_profile_boots_with_its_sweep_step_and_failslab_caches(fake):
    g = fake(results=tuple(guest.manifest("arm64", "debug")))
    ok, fails = debug("arm64", "debug", "none", 7, 1.0, fail_nth_step=20)
    assert ok and fails == []
    (b,) = g.boots
    words = b["params"].split()
    assert words[0] == "spmu.debug=1"
    assert {"spmu.stress_cycles=7", "spmu.fail_nth_step=20", "initcall_debug",
            "slub_debug=A;-,kmemleak_object,kmemleak_scan_area,debug_objects_cache"} <= set(words)
    assert b["spec"].profile == "debug" and not b["icount"]  # no INST_RETIRED: EV=0x11
    assert b["spec"].module is not None and not b["spec"].python


@pytest.mark.parametrize("arch", ["arm64", "amd64"])
def test_arm64_debug_guests_boot_with_an_idle_state_amd64_ones_without(fake, arch):
    """CPU PM under the debuggers: every arm64 guest, the detectors' and the profiles',
    idles through cpu_pm_enter()/exit() (issue 24); amd64's have no such tree."""
    g = fake(results=tuple(guest.manifest(arch)))
    ok, _ = debug(arch, "main", "all", 1, 1.0)
    assert ok and len(g.boots) == 2
    assert [b["idle_states"] for b in g.boots] == [arch == "arm64"] * 2


def test_main_is_the_main_suite(fake):
    g = fake(results=tuple(guest.manifest("arm64")))
    ok, _ = debug("arm64", "main", "none", 1, 1.0)
    assert ok and g.boots[0]["spec"].profile == ""


@pytest.mark.parametrize("how", ["report", "script-failed", "script-missing"])
def test_a_profile_run_with_a_report_or_a_failed_or_missing_script_fails(fake, how):
    names = list(guest.manifest("arm64", "debug"))
    if how == "script-failed":
        names[-1] = "!" + names[-1]
    if how == "script-missing":
        names.pop(0)
    fake(results=tuple(names), profile_report=how == "report")
    ok, fails = debug("arm64", "debug", "none", 1, 1.0)
    assert not ok and fails and all(f.startswith("test-debug arm64 profile/debug:")
                                    for f in fails)


def test_the_window_bound_reaches_the_guest_and_a_negative_one_is_refused(fake):
    g = fake(results=tuple(guest.manifest("arm64", "debug")))
    ok, _ = debug("arm64", "debug", "none", 1, 1.0, fail_nth_step=20, fail_nth_window=8)
    assert ok and "spmu.fail_nth_window=8" in g.boots[0]["params"].split()
    for step, window in ((20, -1), (1, 8)):
        with pytest.raises(PipelineError, match=f"--fail-nth-window {window}: 0 .* above 1"):
            debug("arm64", "debug", "none", 1, 1.0, fail_nth_step=step, fail_nth_window=window)
    assert len(g.boots) == 1


@pytest.mark.parametrize("step, cycles", [(0, 1), (1, 0)])
def test_a_sweep_step_or_cycle_count_below_one_is_refused(fake, step, cycles):
    g = fake()
    with pytest.raises(PipelineError, match="each 1 or more"):
        debug("arm64", "debug", "all", cycles, 1.0, fail_nth_step=step)
    assert g.boots == []


# --- the part of `invoke test` ------------------------------------------------------------

def test_ci_debug_runs_the_detectors_and_the_debug_profile_every_20th_point(monkeypatch):
    seen = []
    monkeypatch.setattr(commands, "test_debug",
                        lambda *a, **kw: seen.append((a, kw)) or True)
    fails: list[str] = []
    assert commands.ci_debug(fails) is True
    (((arch, profiles, bugs, _cycles, timeout, step, passed), kw),) = seen
    assert (arch, profiles, bugs, step) == ("arm64", "debug", "all", 20)
    # The whole init walked at 15 s a point outlived the guest's 30 minutes (stop 37).
    assert kw == {"fail_nth_window": 8} and timeout == 1800
    assert passed is fails  # its failures reach the summary of `invoke test`


def test_ci_debug_failing_or_raising_is_a_failure_of_invoke_test(monkeypatch):
    def raises(*a, **kw):
        raise PipelineError("building the debug kernel failed")

    monkeypatch.setattr(commands, "test_debug", raises)
    fails: list[str] = []
    assert commands.ci_debug(fails) is False
    assert fails == ["test-debug arm64: building the debug kernel failed"]
    monkeypatch.setattr(commands, "test_debug", lambda *a, **kw: False)
    assert commands.ci_debug([]) is False


@pytest.mark.parametrize("debug_ok", [True, False])
def test_invoke_test_fails_when_only_the_debug_part_failed(monkeypatch, tmp_path, debug_ok):
    class Pkg:
        pid = 0

        def poll(self):
            return 0

        def wait(self):
            return 0

    monkeypatch.setattr(commands, "REPO", tmp_path)
    monkeypatch.setattr(commands.subprocess, "Popen", lambda *a, **k: Pkg())
    monkeypatch.setattr(commands.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0))
    monkeypatch.setattr(commands, "test_qemu", lambda *a, **k: True)
    monkeypatch.setattr(commands, "ci_debug", lambda fails: debug_ok)
    assert commands.test_all(1.0, 1) is debug_ok
