"""The module, and a module with deliberate bugs, run on the debug kernels (issue 24).

Each guest boots a pmubuild.guests.debugkernel image with spmu.debug=1: tests/guest/init marks
the kernel log, and at the end scans kmemleak and prints the log, which
pmubuild.guests.debugjudge reads. The detectors are proven first, each by the one bug of
tests/debug/broken it must report; then the project's module runs the guest profiles
there, and any report fails it.
"""

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say
from pmubuild.guests import debugjudge, debugkernel, guest, qemu
from pmubuild.modbuild import build
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.matrix import GNU_TRIPLET, KERNEL_ARCH

REPO = Path(__file__).resolve().parents[2]
BROKEN_SRC = REPO / "tests" / "debug" / "broken"
# bug= of tests/debug/broken/broken.c -> the report kind that must show it. One guest
# commits them in this order: lockdep turns itself off after its first report, and the
# mutex in a timer is one for lockdep too (invalid wait context) and a KASAN report turns
# it off (taint: "Disabling lock debugging"), so lock order comes before both; KASAN
# reports only its first: its bug comes last.
DETECTOR_BUGS = {
    "leak": "kmemleak",
    "leak-on-error": "kmemleak",
    "shift": "ubsan",
    "timer-freed": "debugobjects",
    "lock-order": "lockdep",
    "sleep-in-timer": "atomic-sleep",
    "use-after-free": "kasan",
    "data-race": "kcsan",
}
# The kernel (pmubuild.guests.debugkernel's flavour) whose detector catches each bug; the rest
# are the "debug" kernel's. KCSAN excludes KASAN: its bug has a kernel of its own.
BUG_FLAVOUR = {"data-race": "kcsan"}


def flavour_bugs(flavour: str) -> list[str]:
    """DETECTOR_BUGS whose detector the `flavour` kernel has, in the guest's order."""
    return [b for b in DETECTOR_BUGS if BUG_FLAVOUR.get(b, "debug") == flavour]


# Each bug's load marked in the log with the loading process (its kmemleak entries
# name it); busybox insmod retries a failed finit_module() with init_module(), so a
# failing init runs twice.
BUG_SCRIPT = """\
sh -c 'echo "spmu-detector: bug={bug} pid=$$" > /dev/kmsg
exec insmod /work/broken/spmu_broken.ko bug={bug}'
echo "insmod bug={bug} rc=$?"
grep -q '^spmu_broken ' /proc/modules && rmmod spmu_broken
"""
# The kernel log is read once, at the end: large enough for a whole run (the kernel's
# 128 KiB holds about 100 load/unload cycles; a log that lost its start fails the judge).
LOG_BUF_LEN = "32M"
# Debug kernels under TCG are slow (KASAN, lockdep): a generous bound per guest.
DEBUG_TIMEOUT_S = 1800
# Guests only a debug kernel can run (tests/guest/ARCH-debug): fault injection, hotplug
# during load and unload. Without -icount, as the detectors: faster, and exact counts
# are not what these check.
# slub_debug=A: fault injection in every slab cache but kmemleak's and debug objects'
# (failslab's cache-filter, set by the scripts), whose failures they absorb.
# initcall_debug: the load sweep tells a failure in the module's init (one message due)
# from one in the kernel's loader, before the module ran ("calling  spmu_init" logged).
DEBUG_PROFILES = {"arm64": (guest.Profile(
    "debug", False, python=False,
    params="initcall_debug "
           "slub_debug=A;-,kmemleak_object,kmemleak_scan_area,debug_objects_cache"),)}


@dataclass(frozen=True)
class DebugRun:
    label: str
    run: qemu.GuestRun
    verdict: debugjudge.Verdict
    seconds: float
    expected: tuple[str, ...] = ()  # a profile's manifest: every script must report
    console_file: Path | None = None  # the whole console, kept

    def problems(self) -> list[str]:
        out = self.verdict.problems()
        problem = self.run.problem()
        if problem:
            out.append(problem)
        if self.expected:
            missing = guest.manifest_problem(self.expected, [r.name for r in self.run.results])
            if missing:
                out.append(missing)
        out += [f"{r.name}: {r.verdict} {r.detail}" for r in self.run.results
                if r.verdict == "FAIL"]
        return out


def _work(arch: str, flavour: str = "debug") -> Path:
    """build/FLAVOUR-ARCH: initramfs images, the broken module, the kept consoles."""
    work = REPO / "build" / f"{flavour}-{arch}"
    work.mkdir(parents=True, exist_ok=True)
    return work


def build_broken(kdir: Path, arch: str, out: Path) -> Path:
    """tests/debug/broken built against the debug tree, in `out` (a copy of the source)."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(BROKEN_SRC, out)
    argv = ["make", "-C", str(kdir), f"M={out}", f"ARCH={KERNEL_ARCH[arch]}", "modules"]
    if arch != "amd64":
        argv.append(f"CROSS_COMPILE={GNU_TRIPLET[arch]}-")
    proc = subprocess.run(argv, capture_output=True, text=True)
    ko = out / "spmu_broken.ko"
    if proc.returncode != 0 or not ko.exists():
        raise PipelineError(f"building tests/debug/broken failed:\n{proc.stdout[-2000:]}"
                            f"{proc.stderr[-2000:]}")
    return ko


def _boot(label: str, spec: guest.GuestSpec, image: Path, apt: PrivateApt, work: Path,
          timeout: float, icount: bool, el2: bool = False, params: str = "",
          expected: tuple[str, ...] = (), kmemleak: bool = True) -> DebugRun:
    start = time.monotonic()
    initrd = guest.initramfs(spec, apt, work / f"initrd-{label.replace('/', '-')}.gz")
    def progress(line: str) -> None:  # each script's verdict as it comes: runs are long
        for head in ("@@SPMU TEST ", "@@SPMU PROGRESS "):
            if line.startswith(head):
                say(f"{work.name} {label}: {line[len(head):].strip()[:150]} "
                    f"({time.monotonic() - start:.0f}s)")

    # arm64: QEMU's tree plus a PSCI idle state, so that each idle goes through CPU PM
    # and the module's notifier (the debug kernels have CPU_IDLE; pmubuild.guests.idledt).
    run = qemu.boot(spec.arch, image, initrd, spec.mode, timeout, icount=icount, el2=el2,
                    params=f"spmu.debug=1 log_buf_len={LOG_BUF_LEN} "
                           f"spmu.idle_states={int(spec.arch == 'arm64')} {params}".rstrip(),
                    on_line=progress, idle_states=spec.arch == "arm64")
    took = time.monotonic() - start
    # The whole console stays for reading a report in full.
    kept = work / f"{label.replace('/', '-')}.console"
    kept.write_text(run.console)
    verdict = debugjudge.judge(run.console, kmemleak)
    say(f"{work.name} {label}: {took:.0f}s, reports "
        + (", ".join(f"{k} {n}" for k, n in verdict.counts().items()) or "none"))
    return DebugRun(label, run, verdict, took, expected, kept)


def detectors(apt: PrivateApt, arch: str, bugs: list[str], timeout: float = DEBUG_TIMEOUT_S,
              flavour: str = "debug") -> tuple[DebugRun, dict[str, list[debugjudge.Report]]]:
    """One boot of the `flavour` kernel loading tests/debug/broken with each of `bugs` in
    turn (in DETECTOR_BUGS' order): the run, and its reports by bug."""
    unknown = [b for b in bugs if b not in DETECTOR_BUGS]
    if unknown or not bugs:
        what = f"unknown bug {unknown[0]!r}" if unknown else "no bug named"
        raise PipelineError(f"{what}: one or more of {', '.join(DETECTOR_BUGS)}")
    elsewhere = [b for b in bugs if b not in flavour_bugs(flavour)]
    if elsewhere:
        other = BUG_FLAVOUR.get(elsewhere[0], "debug")
        raise PipelineError(f"bug {elsewhere[0]!r} is caught by the {other} kernel's "
                            f"detector, not the {flavour} kernel's (--flavour {other})")
    debugkernel.fragment(flavour, arch)  # an arch without that kernel: say so first
    k = debugkernel.ensure(apt, arch, flavour)
    work = _work(arch, flavour)
    ko = build_broken(k.kdir, arch, work / "broken")
    script = "".join(BUG_SCRIPT.format(bug=b) for b in DETECTOR_BUGS if b in bugs) + "true\n"
    spec = guest.GuestSpec(arch, k.release, None, mode="cmd", command=script, add=[ko.parent])
    run = _boot("detectors", spec, k.image, apt, work, timeout, icount=False,
                kmemleak=debugkernel.has_kmemleak(flavour))
    return run, debugjudge.by_bug(run.run.console)


def check_profiles(arch: str, names: list[str], flavour: str = "debug"
                   ) -> dict[str, guest.Profile]:
    """The guest profiles of `arch` the `flavour` kernel runs, by name ("" is main);
    an error naming them when one of `names` is not among them."""
    debugkernel.fragment(flavour, arch)  # an arch without that kernel: say so first
    # The debug profile injects faults: only the kernel with fault injection has it.
    extra = DEBUG_PROFILES.get(arch, ()) if flavour == "debug" else ()
    known = {p.name: p for p in (*guest.PROFILES.get(arch, ()), *extra)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise PipelineError(f"no {arch} guest profile {unknown[0]!r} on the {flavour} "
                            "kernel: " + ", ".join(repr(n or "main") for n in known))
    return known


def profiles(apt: PrivateApt, arch: str, names: list[str], stress_cycles: int,
             timeout: float = DEBUG_TIMEOUT_S, fail_nth_step: int = 1,
             flavour: str = "debug", fail_nth_window: int = 0) -> list[DebugRun]:
    """The project's module built for the `flavour` kernel, each named guest profile of
    `arch` booted on it ("" is the main suite). fail_nth_step: the load sweep of the
    debug profile tries every that-many-th fault point, then every one around the first
    it met in the module's init: on from it at most fail_nth_window (0: to the init's
    end), then the last fail_nth_window calls."""
    known = check_profiles(arch, names, flavour)
    k = debugkernel.ensure(apt, arch, flavour)
    ko = build.build(k.kdir).ko
    work = _work(arch, flavour)
    runs = []
    for name in names:
        p = known[name]
        spec = guest.GuestSpec(arch, k.release, ko, profile=p.name, python=p.python)
        runs.append(_boot(f"profile/{p.name or 'main'}", spec, k.image, apt, work, timeout,
                          icount=p.icount, el2=p.el2,
                          params=f"spmu.stress_cycles={stress_cycles} "
                                 f"spmu.fail_nth_step={fail_nth_step} "
                                 f"spmu.fail_nth_window={fail_nth_window} {p.params}".rstrip(),
                          expected=guest.manifest(arch, p.name),
                          kmemleak=debugkernel.has_kmemleak(flavour)))
    return runs
