"""What each invoke task does; tasks.py only maps arguments onto these functions."""

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say
from pmubuild.debian import pkgtest
from pmubuild.guests import debugkernel, debugrun, matrixrun
from pmubuild.kbuild import compat
from pmubuild.modbuild import build, signing
from pmubuild.modbuild import checkpatch as checkpatch_mod
from pmubuild.trees import kernels, matrix
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.kdir import KernelTree, inspect

REPO = Path(__file__).resolve().parents[1]

DEMO_SCRIPT = """\
echo "--- arm64 guest: $(uname -r), $(nproc) CPUs, QEMU -cpu max (emulated PMUv3)"
echo "--- before loading the module, user reads of PMCCNTR_EL0 trap:"
pmuread all
echo "--- modprobe simple-pmu"
modprobe simple-pmu || exit 1
for f in /sys/devices/system/simple-pmu/simple-pmu0/*; do
    case "$f" in */uevent) continue ;; esac
    [ -f "$f" ] && echo "    $(basename "$f") = $(cat "$f")"
done
echo "--- now user space reads the cycle counter on every CPU (first/second reading):"
pmuread all || exit 1
echo "--- rmmod simple-pmu: access is withdrawn again"
rmmod simple-pmu && pmuread all
exit 0
"""


def kdir(kernel: str, arch: str, refresh: bool = False) -> Path:
    suite = matrix.check_suite(kernel)
    matrix.check_arch(arch)
    return kernels.fetch(PrivateApt(), suite, arch, refresh=refresh).kdir


def kdir_list(refresh: bool = False) -> list[str]:
    apt = PrivateApt()
    apt.update(force=refresh)
    lines = [f"{'suite':<19} {'arch':<6} {'release':<24} {'version':<22} cached"]
    for suite in matrix.SUITES.values():
        for arch in matrix.ARCHES:
            kp = kernels.resolve(apt, suite, arch)
            cached = "yes" if kernels.load_entry(kernels.entry_dir(kp)) else "no"
            lines.append(f"{suite.name:<19} {arch:<6} {kp.release:<24} {kp.version:<22} {cached}")
    return lines


def render(kdir_path: str) -> list[str]:
    """Write build/<release>-<arch>/compat.h for the tree; the table of what was probed."""
    tree = inspect(kdir_path)
    out = build.build_dir_for(tree)
    results = build.render_compat(tree, out)
    return [*compat.table(results), f"wrote {out / 'compat.h'}"]


def build_one(kdir_path: str, w1: bool) -> build.BuildResult:
    # With W=1 the user asks for the module's warnings: all of them, from a clean build.
    result = build.authoritative_w1(kdir_path) if w1 else build.build(kdir_path)
    say(f"built for {result.tree.release} with {result.toolchain.cc} on "
        f"{result.toolchain.where} ({result.toolchain.reason})")
    for w in result.warnings:
        say(f"warning: {w}")
    for line in result.report.table():
        say(line)
    return result


def _modules(tree_path: str, kos: list[str]) -> tuple[KernelTree, list[Path]]:
    tree = inspect(tree_path)
    if not kos:
        default = build.build_dir_for(tree) / f"{build.MODULE_NAME}.ko"
        if not default.exists():
            raise PipelineError(f"no module built for {tree.release} yet ({default}): run "
                                f"invoke build --kdir {tree.path}, or name the .ko files")
        return tree, [default]
    paths = [Path(k).expanduser().resolve() for k in kos]
    for p in paths:
        if not p.is_file():
            raise PipelineError(f"{p}: no such file")
    return tree, paths


def verify(tree_path: str, kos: list[str], cert: str, require_signature: bool) -> list[str]:
    tree, paths = _modules(tree_path, kos)
    cert_path = Path(cert).expanduser().resolve() if cert else None
    if cert_path and not cert_path.is_file():
        raise PipelineError(f"--cert {cert_path}: no such file")
    reports = build.verify(tree, paths, cert_path, require_signature or None)
    return [ln for r in reports for ln in r.table()] + [f"{len(reports)} module(s): ok"]


def sign(tree_path: str, kos: list[str], key: str, cert: str) -> list[str]:
    # Arguments first, then the modules, and only then may a default key be created.
    given = signing.given_keypair(key, cert) if key or cert else None
    tree, paths = _modules(tree_path, kos)
    pair = given or signing.default_keypair()
    say(f"signing with {pair.origin}: {pair.key}, certificate {pair.cert}")
    signing.sign(tree, paths, pair)
    reports = build.verify(tree, paths, pair.cert, require_signature=True)
    return [ln for r in reports for ln in r.table()] + [f"{len(reports)} module(s) signed"]


def build_suite(kernel: str, arch: str, w1: bool) -> list[build.BuildResult]:
    apt = PrivateApt()
    results = []
    for suite, a in matrix.expand(kernel, arch):
        fk = kernels.fetch(apt, suite, a)
        results.append(build_one(str(fk.kdir), w1))
    return results


def test_qemu(kernel: str, arch: str, timeout: float, jobs: int,
              stress_cycles: str = "", steps: matrixrun.Steps | None = None,
              apt: PrivateApt | None = None, skips: list[str] | None = None,
              fails: list[str] | None = None) -> bool:
    """Run the matrix and print its report; True when nothing failed. The SKIP lines, with
    their reasons, are appended to `skips` when given, the failures (with the end of their
    output) to `fails`. steps and apt: fakes for tests."""
    combos = matrix.expand(kernel, arch)
    cycles = None
    if stress_cycles != "":
        if not stress_cycles.isdigit() or not 1 <= int(stress_cycles) <= 10000:
            raise PipelineError(f"--stress-cycles {stress_cycles!r}: want a number of"
                                " load/unload cycles from 1 to 10000")
        cycles = int(stress_cycles)
    start = time.monotonic()
    results = matrixrun.test_matrix(combos, timeout=timeout, jobs=jobs, stress_cycles=cycles,
                                    steps=steps or matrixrun.Steps(), apt=apt)
    for line in matrixrun.report(results):
        print(line)
    tests = [t for r in results for t in r.results]
    failed = sum(t.verdict == "FAIL" for t in tests) + sum(r.error is not None for r in results)
    passed = sum(t.verdict == "PASS" for t in tests)
    skipped = sum(t.verdict == "SKIP" for t in tests)
    print("slowest guest scripts (host wall time):")
    for line in matrixrun.slowest(results):
        print(f"  {line}")
    print(f"test-qemu: {len(results)} kernel(s), wall time {time.monotonic() - start:.0f}s")
    retried = [f"{r.suite}/{r.arch}: {why}" for r in results for why in r.retries]
    for line in retried:
        print(f"retried: {line}")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "")
          + (f", {len(retried)} guest(s) booted again" if retried else ""))
    if skips is not None:
        skips.extend(matrixrun.skipped(results))
    if fails is not None:
        fails.extend(matrixrun.failed(results))
    return failed == 0


def debug_bugs(bugs: str, flavour: str = "debug") -> list[str]:
    """--bugs: "all" (those the `flavour` kernel catches), "none" or a comma-separated
    list of DETECTOR_BUGS' names."""
    if bugs.strip() == "all":
        return debugrun.flavour_bugs(flavour)
    if bugs.strip() == "none":
        return []
    names = [b.strip() for b in bugs.split(",") if b.strip()]
    unknown = [b for b in names if b not in debugrun.DETECTOR_BUGS]
    if unknown or not names:
        raise PipelineError(f"--bugs {bugs!r}: all, none, or some of "
                            + ", ".join(debugrun.DETECTOR_BUGS))
    return names


# test-debug's profiles when none are named: the sweeps where fault injection is, the
# load/unload loop with readers on both kernels (those the arch has: amd64's guests only
# check the refusal, its main suite).
DEBUG_DEFAULT_PROFILES = {"debug": "debug,stress", "kcsan": "stress"}


def test_debug(arch: str, profiles: str | None, bugs: str, stress_cycles: int,
               timeout: float, fail_nth_step: int = 1, fails: list[str] | None = None,
               flavour: str = "debug", fail_nth_window: int = 0) -> bool:
    """The `flavour` kernel (pmubuild.guests.debugkernel: "debug" or "kcsan") for `arch`: the
    detectors proven, each on its deliberate bug (`bugs`, one guest), then the named guest
    profiles ("main", "stress", "kvm", "debug") with the module; every report printed.
    True when each detector caught its bug and the module's runs have none."""
    if flavour not in debugkernel.FLAVOURS:
        raise PipelineError(f"test-debug: --flavour {flavour!r}: one of "
                            + ", ".join(debugkernel.FLAVOURS))
    where = arch if flavour == "debug" else f"{flavour} {arch}"
    if profiles is None:  # the flavour's defaults that the arch has, or its main suite
        known = debugrun.check_profiles(arch, [], flavour)
        profiles = ",".join(n for n in DEBUG_DEFAULT_PROFILES[flavour].split(",")
                            if n in known) or "main"
    names = [p.strip() for p in profiles.split(",") if p.strip()]
    # Every name checked before the first guest boots: an hour's run must not end there.
    debugrun.check_profiles(arch, ["" if n == "main" else n for n in names], flavour)
    chosen = debug_bugs(bugs, flavour)
    if fail_nth_step < 1 or stress_cycles < 1:
        raise PipelineError(f"test-debug: --fail-nth-step {fail_nth_step} and "
                            f"--stress-cycles {stress_cycles}: each 1 or more")
    if fail_nth_window < 0 or (fail_nth_window and fail_nth_step == 1):
        raise PipelineError(f"test-debug: --fail-nth-window {fail_nth_window}: 0 (no bound) "
                            "or more, and only with a --fail-nth-step above 1")
    fails = fails if fails is not None else []
    if not chosen and not names:
        raise PipelineError("test-debug: nothing to run (no --profiles and --bugs none)")
    apt = PrivateApt()
    ok = True
    start = time.monotonic()
    if chosen:
        r, found = debugrun.detectors(apt, arch, chosen, timeout, flavour)
        print(f"{flavour} {arch} detectors: one guest, {len(chosen)} bugs, {r.seconds:.0f}s")
        for bug in chosen:
            kind = debugrun.DETECTOR_BUGS[bug]
            mine = found.get(bug, [])
            # The kernel's own report of that kind in the window would not do: it must
            # name the broken module (kmemleak's entries are the loading pid's already).
            caught = [x for x in mine if x.kind == kind and
                      (kind == "kmemleak" or "spmu_broken" in x.text or "broken.c" in x.text)]
            if caught and r.verdict.klog:
                print(f"PASS detector {kind} caught bug={bug}: {caught[0].title}")
            else:
                ok = False
                fails.append(f"test-debug {where}: detector {kind} missed bug={bug}")
                print(f"FAIL detector {kind} missed bug={bug}; its reports: "
                      + ("; ".join(x.title for x in mine) or "none"))
        stray = found.get("", [])
        for x in stray:  # after init, before the first bug: not the broken module's
            fails.append(f"test-debug {where}: a report before the first bug: {x.title}")
            print(f"FAIL a report before the first bug: {x.kind}: {x.title}")
        trouble = r.run.problem()
        if trouble:
            fails.append(f"test-debug {where}: detectors guest: {trouble}")
            print(f"FAIL detectors guest: {trouble}")
        if stray or trouble or not ok:
            ok = False
            print(f"    console: {r.console_file}")
    runs = debugrun.profiles(apt, arch, ["" if n == "main" else n for n in names],
                             stress_cycles, timeout, fail_nth_step, flavour,
                             fail_nth_window) if names else []
    for r in runs:
        problems = r.problems()
        passed = sum(t.verdict == "PASS" for t in r.run.results)
        print(f"{'FAIL' if problems else 'PASS'} {r.label}: {passed} guest scripts passed, "
              f"{len(r.verdict.reports)} debugger reports, {r.seconds:.0f}s")
        for t in r.run.results:
            took = f"{t.seconds:6.1f}s" if t.seconds is not None else "      ?"
            print(f"    {t.verdict:4} {took} {t.name}: {t.detail}")
        for line in problems:
            print("    " + line.replace("\n", "\n    "))
        if problems:
            print(f"    console: {r.console_file}")
            fails += [f"test-debug {where} {r.label}: {line.splitlines()[0]}"
                      for line in problems]
        for b in r.verdict.boot:
            print(f"    (before init, the kernel's own) {b.kind}: {b.title}")
        for k, why in r.verdict.known:
            print(f"    (not counted, {why}) {k.kind}: {k.title}")
        ok = ok and not problems
    print(f"test-debug {where}: {'ok' if ok else 'FAILED'} in {time.monotonic() - start:.0f}s")
    return ok


def qemu_run(kernel: str, arch: str, argv: str, add: list[str], timeout: float) -> int:
    if not argv.strip():
        raise PipelineError("qemu-run needs a command after --, e.g. "
                            "invoke qemu-run --kernel trixie --arch arm64 -- 'modprobe simple-pmu'")
    suite = matrix.check_suite(kernel)
    matrix.check_arch(arch)
    run = matrixrun.qemu_run(suite, arch, argv, [Path(p).resolve() for p in add], timeout)
    print(run.command_output)
    assert run.command_rc is not None
    return run.command_rc


def demo() -> int:
    for res in build_suite(matrix.DEFAULT_SUITE, "all", w1=False):
        print(f"module: {res.ko}")
    print(f"booting the {matrix.DEFAULT_SUITE} arm64 kernel under QEMU ...", flush=True)
    return qemu_run(matrix.DEFAULT_SUITE, "arm64", DEMO_SCRIPT, [], 300)


def checkpatch() -> list[str]:
    return checkpatch_mod.run()


def pytest_skips(junit_xml: Path) -> list[str]:
    """"pytest MODULE::TEST: reason" for each skipped test of a pytest --junitxml report."""
    out = []
    for case in ET.parse(junit_xml).iter("testcase"):
        skip = case.find("skipped")
        if skip is not None:
            reason = " ".join(skip.get("message", "").split())
            out.append(f"pytest {case.get('classname')}::{case.get('name')}: {reason}")
    return out


def package_summary(log_lines: list[str]) -> list[str]:
    """test-package's summary in its log: its per-chroot heads and PASS/FAIL/SKIP lines."""
    return [x for x in log_lines
            if x.startswith(("test-package ", "  PASS", "  FAIL", "  SKIP", "  NOTE"))]


def package_skips(log_lines: list[str]) -> list[str]:
    """"test-package SUITE ARCH: reason" for each "  SKIP: reason" line of its log."""
    out, head = [], "test-package"
    for line in log_lines:
        if line.startswith("test-package ") and line.endswith(":"):
            head = line[:-1]
        elif line.startswith("  SKIP"):
            out.append(f"{head}: {line.strip().removeprefix('SKIP').lstrip(': ')}")
    return out


def pytest_failures(junit_xml: Path) -> list[str]:
    """"pytest MODULE::TEST: first line of the failure" for each failed or erroring test
    (a collection error has no class: its module's name, and the last "E " line)."""
    out = []
    for case in ET.parse(junit_xml).iter("testcase"):
        for bad in (case.find("failure"), case.find("error")):
            if bad is None:
                continue
            msg = (bad.get("message") or "").strip().splitlines()
            e_lines = [ln[1:].strip() for ln in (bad.text or "").splitlines()
                       if ln.startswith("E ")]
            if e_lines and (not msg or msg[0] == "collection failure"):
                msg = [f"{msg[0]}: {e_lines[-1]}" if msg else e_lines[-1]]
            where = "::".join(x for x in (case.get("classname"), case.get("name")) if x)
            out.append(f"pytest {where}: {msg[0][:300] if msg else bad.tag}")
    return out


def package_failures(log_lines: list[str]) -> list[str]:
    """test-package's failures in its log, each named by its chroot: its "  FAIL" lines,
    its errors, and a FAIL verdict for a chroot that said nothing else (its process died)."""
    out, head, named = [], "test-package", set()
    for line in log_lines:
        key = " ".join(line.split(":", 1)[0].split()[1:])
        if line.startswith("test-package ") and line.endswith(":"):
            head = line[:-1]
        elif line.startswith("  FAIL"):
            out.append(f"{head}: {line.strip().removeprefix('FAIL').lstrip(': ')}")
            named.add(" ".join(head.split()[1:]))
        elif line.startswith("test-package ") and ": error: " in line:
            out.append(line)
            named.add(key)
        elif line.startswith("test-package ") and ": FAIL (" in line and key not in named:
            out.append(line)
    return out


def all_failures(pytest_fails: list[str], unit_rc: int, qemu_fails: list[str],
                 pkg_lines: list[str], pkg_rc: int) -> list[str]:
    """Every failure of `invoke test` for its last lines; a part that failed without
    naming anything is still listed, with its exit status."""
    fails = list(pytest_fails)
    if unit_rc != 0 and not fails:
        fails.append(f"pytest: exit status {unit_rc}, no test named (its output above)")
    fails += qemu_fails
    pkg = package_failures(pkg_lines)
    if pkg_rc != 0 and not pkg:
        pkg = [f"test-package: exit status {pkg_rc}, no check named (its log above)"]
    return fails + pkg


def fail_summary(fails: list[str]) -> list[str]:
    """The failed checks again, last, so that the tail of a long log names them."""
    if not fails:
        return []
    heads = [f for f in fails if not f.startswith("    | ")]
    return [f"failed checks ({len(heads)}):", *(f"  FAIL {f}" if not f.startswith("    | ")
                                                 else f"  {f}" for f in fails)]


def skip_summary(skips: list[str]) -> list[str]:
    """The checks that could not run here, each with its reason, for the end of
    `invoke test`: skipped, so neither passed nor failed."""
    if not skips:
        return ["skipped checks: none"]
    return [f"skipped checks ({len(skips)}; not counted as passed):",
            *(f"  SKIP {s}" for s in skips)]


# What `invoke test` runs on the debug kernel (issue 24; docs/DEVELOPING.md "Under the
# kernel's debuggers"): the detectors (one guest) and the debug profile with every 20th
# point of its load sweep, every point on at most 8 from the first in the module's init,
# and the last 8 (each point is 15 s; the init has a hundred and more). `invoke
# test-debug` runs the whole sweep and the stress profile.
CI_DEBUG_PROFILES = "debug"
CI_FAIL_NTH_STEP = 20
CI_FAIL_NTH_WINDOW = 8


def ci_debug(fails: list[str]) -> bool:
    """The debug kernel's part of `invoke test`; its failures go to `fails`."""
    say(f"test-debug: arm64 detectors and the {CI_DEBUG_PROFILES} profile (every "
        f"{CI_FAIL_NTH_STEP}th fault point at load, window {CI_FAIL_NTH_WINDOW} around the "
        "init's first and at the end); the rest: invoke test-debug")
    try:
        return test_debug("arm64", CI_DEBUG_PROFILES, "all", 1, debugrun.DEBUG_TIMEOUT_S,
                          CI_FAIL_NTH_STEP, fails, fail_nth_window=CI_FAIL_NTH_WINDOW)
    except PipelineError as e:
        fails.append(f"test-debug arm64: {e}")
        print(f"test-debug arm64: error: {e}")
        return False


def test_all(timeout: float, jobs: int) -> bool:
    """`invoke test` after lint: the Debian packaging tests start in the background (at a
    lower CPU priority: mostly apt, dpkg and DKMS builds), pytest and then test-qemu run in
    the foreground; the packaging tests' output goes to a log file, their summary to the
    terminal at the end."""
    log = REPO / "build" / "test-package.log"
    junit = REPO / "build" / "pytest-junit.xml"
    log.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    skips: list[str] = []
    pytest_fails: list[str] = []
    qemu_fails: list[str] = []
    start = time.monotonic()
    with open(log, "w") as f:
        say("test-package: bookworm, trixie, sid (amd64), bookworm (arm64), bullseye (refusal)"
            f" in the background, one at a time until test-qemu ends, then two; output in {log}")
        pkg = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", pkgtest.__name__,
                                "--lanes=1"],
                               cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            # -rs: pytest ends with each skip's reason; the junit report keeps them for
            # the summary at the very end.
            unit_rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs",
                                      f"--junitxml={junit}", "tests"],
                                     cwd=REPO).returncode
            unit_ok = unit_rc == 0
            if junit.is_file():
                skips += pytest_skips(junit)
                pytest_fails += pytest_failures(junit)
            say(f"pytest done after {time.monotonic() - start:.0f}s")
            qemu_ok = test_qemu("all", "all", timeout, jobs, skips=skips,
                                fails=qemu_fails)
            debug_ok = ci_debug(qemu_fails)
            say(f"test-debug done after {time.monotonic() - start:.0f}s")
            if pkg.poll() is None:
                pkg.send_signal(pkgtest.MORE_LANES)  # the CPUs are free now
                say(f"test-qemu done after {time.monotonic() - start:.0f}s; "
                    "waiting for test-package")
            pkg_rc = pkg.wait()
            pkg_ok = pkg_rc == 0
        finally:
            if pkg.poll() is None:  # interrupted: its chroots and guests go with it
                os.killpg(pkg.pid, signal.SIGKILL)
    lines = log.read_text(errors="replace").splitlines()
    say(f"test-package done after {time.monotonic() - start:.0f}s:")
    summary = package_summary(lines)
    for line in summary if pkg_ok else summary + ["--- end of its log:", *lines[-40:]]:
        print(line)
    for line in skip_summary(skips + package_skips(lines)):
        print(line)
    for line in fail_summary(all_failures(pytest_fails, unit_rc, qemu_fails, lines, pkg_rc)):
        print(line)
    if not unit_ok:
        print("pytest failed (output above)")
    if not pkg_ok:
        print(f"test-package failed (its summary above; whole output in {log})")
    return unit_ok and pkg_ok and qemu_ok and debug_ok
