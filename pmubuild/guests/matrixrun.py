"""`invoke test-qemu` and `invoke qemu-run`: build, boot and report across the matrix."""

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say
from pmubuild.guests import guest, qemu
from pmubuild.modbuild import build, signing
from pmubuild.trees import cache, kernels
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.matrix import DEFAULT_SUITE, Suite

FULL_STRESS_CYCLES = 200
REDUCED_STRESS_CYCLES = 30
_fetch_lock = threading.Lock()  # apt and chroot creation are not safe to run twice at once


@dataclass
class ComboResult:
    suite: str
    arch: str
    release: str
    results: list[qemu.TestResult]
    error: str | None
    seconds: float
    # Host wall time of each stage: ("prepare", s), then one entry per guest booted.
    timings: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    # Guests booted again, and why (a kernel crash before the guest's init: see boot_once).
    retries: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and all(r.verdict != "FAIL" for r in self.results)


def prepare(apt: PrivateApt, suite: Suite, arch: str) -> tuple[kernels.FetchedKernel, Path]:
    """Fetch the kernel, build the module, verify it, sign it with the default key and
    verify the signature (serialized: downloads and chroots are shared).

    Warnings are not judged here: tests/integration/test_w1_builds.py does, from a clean
    build directory (build.authoritative_w1); an incremental make here would see only
    what it recompiles. Built with the same flags (W=1, same directory) as that build, so
    after pytest this make compiles nothing."""
    # Across processes too: test-package boots the same kernels beside test-qemu.
    with _fetch_lock, cache.locked(f"prepare-{suite.name}-{arch}"):
        fk = kernels.fetch(apt, suite, arch)
        result = build.build(fk.kdir, w1=True, apt_factory=lambda: apt)
        for w in result.warnings:
            say(f"{suite.name}/{arch}: (not judged here) {w}")
        pair = signing.default_keypair()
        signing.sign(result.tree, [result.ko], pair, apt_factory=lambda: apt)
        build.verify(result.tree, [result.ko], pair.cert, require_signature=True)
    return fk, result.ko


def stress_cycles_for(suite: Suite, combos: list[tuple[Suite, str]], forced: int | None) -> int:
    """Load/unload cycles of the stress guest: FULL_STRESS_CYCLES on the default suite
    (Debian stable) and in a run of one suite, REDUCED_STRESS_CYCLES on the others, or
    `forced`. The CI run has 15 minutes: bullseye's 5.10 costs about 1.5 s of real time a
    cycle under TCG (five times the others'), so 200 there alone took 340 s; 200 on the
    newest kernel and 50 on the others put the run at 16 minutes once the benchmarks came."""
    if forced is not None:
        return forced
    names = {s.name for s, _ in combos}
    return FULL_STRESS_CYCLES if suite.name == DEFAULT_SUITE or len(names) == 1 \
        else REDUCED_STRESS_CYCLES


@dataclass(frozen=True)
class Steps:
    """What one kernel's run does; tests replace them with fakes (no kernel, no QEMU)."""

    prepare: Callable[[PrivateApt, Suite, str], tuple[kernels.FetchedKernel, Path]] = prepare
    initramfs: Callable[[guest.GuestSpec, PrivateApt, Path], Path] = guest.initramfs
    boot: Callable[..., qemu.GuestRun] = qemu.boot
    manifest: Callable[[str, str], tuple[str, ...]] = guest.manifest


def run_combo(apt: PrivateApt, suite: Suite, arch: str, timeout: float,
              stress_cycles: int = FULL_STRESS_CYCLES, steps: Steps = Steps()) -> ComboResult:
    """Prepare the module, then boot each guest profile of `arch`; every guest must end
    cleanly and report exactly the scripts of its manifest."""
    start = time.monotonic()
    release = "?"
    timings: list[tuple[str, float]] = []
    try:
        fk, ko = steps.prepare(apt, suite, arch)
        release = fk.release
        timings.append(("prepare", time.monotonic() - start))
        say(f"{suite.name}/{arch}: built, verified and signed in {time.monotonic() - start:.0f}s")
        results: list[qemu.TestResult] = []
        errors = []
        retries: list[str] = []
        for profile in guest.PROFILES[arch]:
            label = f"{profile.name} guest" if profile.name else "main guest"
            expected = steps.manifest(arch, profile.name)
            spec = guest.GuestSpec(arch, fk.release, ko, profile=profile.name,
                                   python=profile.python, suite=suite.name)
            t0 = time.monotonic()
            initrd = steps.initramfs(spec, apt, ko.parent / f"initrd-test{profile.name}.gz")
            t1 = time.monotonic()
            run, retry = boot_once_more(functools.partial(
                steps.boot, arch, fk.image, initrd, "test", timeout, icount=profile.icount,
                el2=profile.el2,
                params=f"spmu.stress_cycles={stress_cycles} {profile.params}".rstrip()))
            if retry:
                retries.append(f"{label}: {retry}")
            took = time.monotonic() - t0
            parts = [("initramfs", t1 - t0)]
            if run.boot_seconds is not None:
                parts.append(("boot", run.boot_seconds))  # QEMU start to the guest's init
            timings += [(label, took), *((f"{label}: {n}", s) for n, s in parts)]
            prefix = f"{profile.name}/" if profile.name else ""
            say(f"{suite.name}/{arch}: {label} ran in {took:.0f}s ("
                + ", ".join(f"{n} {s:.0f}s" for n, s in parts) + ")")
            results += [dataclasses.replace(r, name=prefix + r.name) for r in run.results]
            error = run.problem() or guest.manifest_problem(
                expected, [r.name for r in run.results])
            if error:
                errors.append(f"{label}: {error}")
        return ComboResult(suite.name, arch, release, results,
                           "\n".join(errors) or None, time.monotonic() - start, timings,
                           retries)
    except PipelineError as e:
        return ComboResult(suite.name, arch, release, [], str(e), time.monotonic() - start,
                           timings)


def boot_once_more(boot: Callable[[], qemu.GuestRun]) -> tuple[qemu.GuestRun, str | None]:
    """Boot; if the guest's kernel crashed before its init ran (no BOOTED line: no module
    loaded, no test started), boot once more and say why. Seen in the CI on sid and trixie
    amd64 under QEMU 7.2: "Oops: int3" in sched_clock_cpu, a stale translation of patched
    kernel text, which amd64 guests now avoid with single-threaded TCG (qemu.command); an
    amd64 retry after that would prove that diagnosis wrong. A crash after the init
    started is never retried."""
    run = boot()
    if run.crash is None or run.booted:
        return run, None
    why = f"booted again: the kernel crashed before the guest's init ({run.crash.strip()})"
    return boot(), why


def test_matrix(combos: list[tuple[Suite, str]], timeout: float = 600,
                jobs: int = 2, stress_cycles: int | None = None, steps: Steps = Steps(),
                apt: PrivateApt | None = None) -> list[ComboResult]:
    """Run every combo, `jobs` at a time; results in the order of `combos`."""
    if apt is None:
        apt = PrivateApt()
        apt.update()
    say(f"test-qemu: {len(combos)} kernel(s), {jobs} at a time")
    done: list[ComboResult] = []

    def one(combo: tuple[Suite, str]) -> ComboResult:
        assert apt is not None
        r = run_combo(apt, combo[0], combo[1], timeout,
                      stress_cycles_for(combo[0], combos, stress_cycles), steps)
        done.append(r)
        say(f"[{len(done)}/{len(combos)}] {r.suite}/{r.arch} {r.release}: "
            f"{'ok' if r.ok else 'FAILED'} in {r.seconds:.0f}s")
        return r

    order = start_order(combos, stress_cycles)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        by_combo = dict(zip(order, pool.map(one, order), strict=True))
    return [by_combo[c] for c in combos]


def start_order(combos: list[tuple[Suite, str]],
                stress_cycles: int | None = None) -> list[tuple[Suite, str]]:
    """The combos longest first, so that the short ones fill the lanes at the end instead
    of one long kernel running alone: an arm64 kernel runs three guests under TCG
    (several minutes, more with the full stress cycles), an amd64 one a single short
    guest (about half a minute). Stable otherwise."""
    def cost(combo: tuple[Suite, str]) -> int:
        if combo[1] != "arm64":
            return 0
        full = stress_cycles_for(combo[0], combos, stress_cycles) >= FULL_STRESS_CYCLES
        return 2 if full else 1
    return sorted(combos, key=cost, reverse=True)


def report(results: list[ComboResult]) -> list[str]:
    """One line per test per kernel with its host wall time, then details of whatever
    failed; one line per kernel with the wall time of each stage."""
    lines = []
    for r in results:
        head = f"{r.suite:<19} {r.arch:<6} {r.release:<24}"
        for t in r.results:
            took = f"{t.seconds:6.1f}s" if t.seconds is not None else f"{'?':>7}"
            lines.append(f"{head} {t.verdict:<4} {took} {t.name}: {t.detail}")
            if t.verdict == "FAIL":
                lines.extend(f"{'':>52}| {ln}" for ln in t.output)
        if r.error:
            lines.append(f"{head} FAIL (guest): {r.error}")
        lines.extend(f"{head} NOTE {why}" for why in r.retries)
        stages = _stages(r.timings)
        lines.append(f"{head} time {r.seconds:.0f}s" + (f" ({stages})" if stages else ""))
    return lines


def skipped(results: list[ComboResult]) -> list[str]:
    """One line per guest script that reported SKIP, with its reason: a check that could
    not run here (e.g. a seed document absent from a plain clone). Never counted passed."""
    return [f"test-qemu {r.suite}/{r.arch} {t.name}: {t.detail}"
            for r in results for t in r.results if t.verdict == "SKIP"]


def failed(results: list[ComboResult], lines: int = 12) -> list[str]:
    """Each failed guest script (or guest) with the last lines of its output: repeated at
    the very end of `invoke test`, because a CI log that keeps only its tail must still
    name what failed."""
    out = []
    for r in results:
        for t in r.results:
            if t.verdict == "FAIL":
                out.append(f"test-qemu {r.suite}/{r.arch} {t.name}: {t.detail}")
                out.extend(f"    | {ln}" for ln in t.output[-lines:] if lines > 0)
        if r.error:
            head, *rest = r.error.splitlines() or [""]
            out.append(f"test-qemu {r.suite}/{r.arch} (guest): {head}")
            out.extend(f"    | {ln}" for ln in rest)
    return out


def _stages(timings: list[tuple[str, float]]) -> str:
    """"prepare 4s, main guest 39s [initramfs 12s, boot 8s]": a stage's parts ("main
    guest: boot") in brackets after it."""
    out: list[str] = []
    for name, secs in timings:
        stage, _, part = name.partition(": ")
        if part and out:
            opened = out[-1].endswith("]")
            out[-1] = (out[-1][:-1] + ", " if opened else out[-1] + " [") + f"{part} {secs:.0f}s]"
        else:
            out.append(f"{stage} {secs:.0f}s")
    return ", ".join(out)


def slowest(results: list[ComboResult], n: int = 10) -> list[str]:
    """The n guest scripts that took the most host wall time in the run."""
    timed = [(t.seconds, r, t) for r in results for t in r.results if t.seconds is not None]
    timed.sort(key=lambda x: -x[0])
    return [f"{s:7.1f}s {r.suite}/{r.arch} {t.name}" for s, r, t in timed[:n]]


def qemu_run(suite: Suite, arch: str, command: str, add: list[Path],
             timeout: float = 300) -> qemu.GuestRun:
    apt = PrivateApt()
    fk, ko = prepare(apt, suite, arch)
    spec = guest.GuestSpec(arch, fk.release, ko, mode="cmd", command=command, add=add,
                           python=True, suite=suite.name)
    initrd = guest.initramfs(spec, apt, ko.parent / "initrd-cmd.gz")
    run = qemu.boot(arch, fk.image, initrd, "cmd", timeout)
    problem = run.problem()
    if problem:
        raise PipelineError(problem)
    return run
