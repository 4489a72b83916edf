"""`invoke test-qemu` and `invoke qemu-run`: build, boot and report across the matrix."""

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import build, guest, kernels, qemu, signing
from .apt import PrivateApt
from .errors import PipelineError
from .matrix import SUITES, Suite
from .progress import say

FULL_STRESS_CYCLES = 200
REDUCED_STRESS_CYCLES = 50
_fetch_lock = threading.Lock()  # apt and chroot creation are not safe to run twice at once


@dataclass
class ComboResult:
    suite: str
    arch: str
    release: str
    results: list[qemu.TestResult]
    error: str | None
    seconds: float

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
    with _fetch_lock:
        fk = kernels.fetch(apt, suite, arch)
        result = build.build(fk.kdir, w1=True, apt_factory=lambda: apt)
        for w in result.warnings:
            say(f"{suite.name}/{arch}: (not judged here) {w}")
        pair = signing.default_keypair()
        signing.sign(result.tree, [result.ko], pair, apt_factory=lambda: apt)
        build.verify(result.tree, [result.ko], pair.cert, require_signature=True)
    return fk, result.ko


def stress_cycles_for(suite: Suite, combos: list[tuple[Suite, str]], forced: int | None) -> int:
    """Load/unload cycles of the stress guest: FULL_STRESS_CYCLES on the oldest and the
    newest suite of the run, REDUCED_STRESS_CYCLES on those between (under contention a
    cycle costs up to 1.4 s of real time, and the CI run has 15 minutes), or `forced`."""
    if forced is not None:
        return forced
    names = [s.name for s, _ in combos]
    order = [n for n in SUITES if n in names]
    return FULL_STRESS_CYCLES if suite.name in (order[0], order[-1]) else REDUCED_STRESS_CYCLES


def run_combo(apt: PrivateApt, suite: Suite, arch: str, timeout: float,
              stress_cycles: int = FULL_STRESS_CYCLES) -> ComboResult:
    start = time.monotonic()
    release = "?"
    try:
        fk, ko = prepare(apt, suite, arch)
        release = fk.release
        say(f"{suite.name}/{arch}: built, verified and signed in {time.monotonic() - start:.0f}s")
        results: list[qemu.TestResult] = []
        errors = []
        for profile in guest.PROFILES[arch]:
            spec = guest.GuestSpec(arch, fk.release, ko, profile=profile.name,
                                   python=profile.python)
            boot_start = time.monotonic()
            initrd = guest.initramfs(spec, apt, ko.parent / f"initrd-test{profile.name}.gz")
            run = qemu.boot(arch, fk.image, initrd, "test", timeout, icount=profile.icount,
                            el2=profile.el2, params=f"spmu.stress_cycles={stress_cycles}")
            prefix = f"{profile.name}/" if profile.name else ""
            say(f"{suite.name}/{arch}: {prefix or 'main suite '}guest ran in "
                f"{time.monotonic() - boot_start:.0f}s")
            results += [dataclasses.replace(r, name=prefix + r.name) for r in run.results]
            error = run.problem()
            if error is None and not run.results:
                error = "the guest ran no test"
            if error:
                errors.append(f"{prefix or 'main suite'}: {error}")
        return ComboResult(suite.name, arch, release, results,
                           "\n".join(errors) or None, time.monotonic() - start)
    except PipelineError as e:
        return ComboResult(suite.name, arch, release, [], str(e), time.monotonic() - start)


def test_matrix(combos: list[tuple[Suite, str]], timeout: float = 600,
                jobs: int = 2, stress_cycles: int | None = None) -> list[ComboResult]:
    apt = PrivateApt()
    apt.update()
    say(f"test-qemu: {len(combos)} kernel(s), {jobs} at a time")
    done: list[ComboResult] = []

    def one(combo: tuple[Suite, str]) -> ComboResult:
        r = run_combo(apt, combo[0], combo[1], timeout,
                      stress_cycles_for(combo[0], combos, stress_cycles))
        done.append(r)
        say(f"[{len(done)}/{len(combos)}] {r.suite}/{r.arch} {r.release}: "
            f"{'ok' if r.ok else 'FAILED'} in {r.seconds:.0f}s")
        return r

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, combos))


def report(results: list[ComboResult]) -> list[str]:
    """One line per test per kernel, then details of whatever failed."""
    lines = []
    for r in results:
        head = f"{r.suite:<19} {r.arch:<6} {r.release:<24}"
        for t in r.results:
            lines.append(f"{head} {t.verdict:<4} {t.name}: {t.detail}")
            if t.verdict == "FAIL":
                lines.extend(f"{'':>52}| {ln}" for ln in t.output)
        if r.error:
            lines.append(f"{head} FAIL (guest): {r.error}")
    return lines


def qemu_run(suite: Suite, arch: str, command: str, add: list[Path],
             timeout: float = 300) -> qemu.GuestRun:
    apt = PrivateApt()
    fk, ko = prepare(apt, suite, arch)
    spec = guest.GuestSpec(arch, fk.release, ko, mode="cmd", command=command, add=add,
                           python=True)
    initrd = guest.initramfs(spec, apt, ko.parent / "initrd-cmd.gz")
    run = qemu.boot(arch, fk.image, initrd, "cmd", timeout)
    problem = run.problem()
    if problem:
        raise PipelineError(problem)
    return run
