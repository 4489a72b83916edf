"""invoke tasks for simple-pmu: argument handling only; the work is in pmubuild."""

import sys
from pathlib import Path

from invoke import Exit, task

from pmubuild import commands
from pmubuild.bench import bench as bench_mod
from pmubuild.common.errors import PipelineError
from pmubuild.debian import package as package_mod
from pmubuild.debian import pkgtest
from pmubuild.guests import debugrun
from pmubuild.hw import run as hw_run


def _run(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except PipelineError as e:
        raise Exit(f"error: {e}", code=2) from None


@task(help={"kernel": "Debian suite: bullseye, bookworm, bookworm-backports, trixie, sid",
            "arch": "amd64 or arm64", "list": "print the matrix with resolved releases",
            "refresh": "refresh the package index even if it is recent"})
def kdir(c, kernel="", arch="", list=False, refresh=False):
    """Print the path of a ready kernel build tree, fetching it on first use."""
    if list:
        for line in _run(commands.kdir_list, refresh):
            print(line)
        return
    if not kernel or not arch:
        raise Exit("error: give --kernel SUITE and --arch ARCH, or --list", code=2)
    print(_run(commands.kdir, kernel, arch, refresh))


@task(help={"kdir": "kernel build tree to probe"})
def render(c, kdir):
    """Probe a kernel tree and write its compat.h; print feature, value and evidence."""
    for line in _run(commands.render, kdir):
        print(line)


@task(help={"kdir": "kernel build tree (headers package tree or full build tree)",
            "kernel": "build for this suite of the matrix instead (or 'all')",
            "arch": "with --kernel: amd64, arm64 or all", "w1": "build with W=1 warnings"})
def build(c, kdir="", kernel="", arch="all", w1=False):
    """Build simple-pmu.ko for a kernel tree and print where it is."""
    if kdir:
        results = [_run(commands.build_one, kdir, w1)]
    else:
        results = _run(commands.build_suite, kernel or "bookworm", arch, w1)
    for r in results:
        print(r.ko)


@task(iterable=["ko"],
      help={"kdir": "target kernel build tree", "ko": "module to check (repeatable; default: "
            "the one built for that tree)", "cert": "certificate to verify signatures with",
            "require_signature": "an unsigned module is an error"})
def verify(c, kdir, ko=None, cert="", require_signature=False):
    """Check built modules against a kernel tree with pyelftools: one table per module."""
    for line in _run(commands.verify, kdir, ko or [], cert, require_signature):
        print(line)


@task(iterable=["ko"],
      help={"kdir": "kernel build tree whose scripts/sign-file signs",
            "ko": "module to sign (repeatable; default: the one built for that tree)",
            "key": "private key (PEM); default: DKMS's MOK key or simple-pmu's own",
            "cert": "certificate of --key (DER or PEM)"})
def sign(c, kdir, ko=None, key="", cert=""):
    """Sign modules with the tree's sign-file, then verify the signature offline."""
    for line in _run(commands.sign, kdir, ko or [], key, cert):
        print(line)


# Seconds before a guest counts as hung. The arm64 main guest takes about 75 s on an idle
# machine and was seen at 400 s with the load at 10 (a CI run beside four builds): the
# bound must catch a hang, not a busy machine (issue 21).
GUEST_TIMEOUT_S = 1500


@task(name="test-qemu",
      help={"kernel": "suite or 'all'", "arch": "amd64, arm64 or 'all'",
            "timeout": "seconds per guest", "jobs": "guests run in parallel",
            "stress-cycles": "arm64 load/unload cycles on every kernel (default: 200 on"
                             " bookworm and the run's newest suite, 50 on the others)"})
def test_qemu(c, kernel="all", arch="all", timeout=GUEST_TIMEOUT_S, jobs=2, stress_cycles=""):
    """Build, boot each kernel under QEMU, run the in-guest suite: one line per test."""
    if not _run(commands.test_qemu, kernel, arch, float(timeout), int(jobs), stress_cycles):
        raise Exit(code=1)


@task(name="test-debug",
      help={"arch": "arm64 or amd64", "profiles": "guest profiles with the module, comma-"
            "separated: main, stress, kvm, debug (default: debug,stress; stress on kcsan)",
            "bugs": "the detectors proven first, each on a module with that bug: all "
            "(default: those of the flavour's kernel), none, or some of "
            + ", ".join(debugrun.DETECTOR_BUGS),
            "flavour": "the kernel: debug (lockdep, KASAN, kmemleak, fault injection; "
            "default) or kcsan (data races; arm64; no debug profile)",
            "stress-cycles": "load/unload cycles of the stress profile",
            "fail-nth-step": "the debug profile's load sweep tries every Kth fault point "
            "(default 1: all)",
            "fail-nth-window": "with --fail-nth-step above 1: every point on at most W from the "
            "first the stride met in the module's init, then the last W (default 0: on to the "
            "init's end)", "timeout": "seconds per guest"})
def test_debug(c, arch="arm64", profiles=None, bugs="all", stress_cycles=200,
               fail_nth_step=1, fail_nth_window=0, timeout=10800, flavour="debug"):
    """The module under lockdep, KASAN, kmemleak, UBSAN, debug objects and fault injection
    (a kernel built from Debian's linux-source): the detectors proven, then the guest
    profiles; every report fails."""
    if not _run(commands.test_debug, arch, profiles, bugs, int(stress_cycles),
                float(timeout), int(fail_nth_step), None, flavour, int(fail_nth_window)):
        raise Exit(code=1)


@task(name="qemu-run", iterable=["add"],
      help={"kernel": "suite", "arch": "amd64 or arm64",
            "add": "file or directory to copy into the guest's working directory (repeatable)",
            "timeout": "seconds before the guest is killed"})
def qemu_run(c, kernel="bookworm", arch="arm64", add=None, timeout=300):
    """Boot one guest with the module installed (not loaded) and run the command after --."""
    rc = _run(commands.qemu_run, kernel, arch, c.remainder, add or [], float(timeout))
    sys.exit(rc)


@task
def demo(c):
    """Build both modules for the default kernel; show the arm64 one reading real counters."""
    sys.exit(_run(commands.demo))


@task(help={"suite": "Debian suite to build in: bookworm, trixie or sid",
            "out": "directory for the source package and .debs (default: build/debs/SUITE)",
            "version": "build as this newer Debian version (e.g. 0.1.1-1; the checkout's "
                       "debian/changelog is not changed)"})
def package(c, suite="bookworm", out="", version=""):
    """Build all .debs in a clean chroot of the suite, then run lintian on them."""
    r = _run(package_mod.build, suite, Path(out) if out else None, version or None)
    print(f"lintian: {'clean' if r.lintian_ok else 'errors or warnings (above)'}")
    for f in r.files:
        print(f)
    if not r.lintian_ok:
        raise Exit("lintian reported errors or warnings", code=1)


@task(name="test-package",
      help={"suite": "Debian suite: bookworm, trixie or sid",
            "arch": "amd64 (every stage) or arm64 (install and boot, under qemu-user)"})
def test_package(c, suite="bookworm", arch="amd64"):
    """Build the .debs; apt install, second kernel, upgrade, purge, failures; boot the result."""
    if not _run(pkgtest.test, suite, arch):
        raise Exit(f"test-package {suite} {arch} failed", code=1)


@task(name="test-hw",
      help={"json": "where to write the JSON report (default: build/test-hw-report.json)"})
def test_hw(c, json=""):
    """As root on a real Intel machine: load, sysfs, counts, perf, hotplug, unload; a
    table and a JSON report. Stops at once, loading nothing, where there is no PMU."""
    if _run(hw_run.run, Path(json) if json else None) != 0:
        raise Exit("test-hw: some steps failed (table above)", code=1)


@task(help={"runs": "C benchmark: timed runs per path (median and spread over them)",
            "calls": "Python benchmark: calls per timing", "repeats": "Python: timings",
            "json": "where to write the JSON (default: build/bench.json)",
            "plot": "where to write the plot (default: docs/benchmarks.png; '' for none)"})
def bench(c, runs=11, calls=200000, repeats=7, json="", plot=str(bench_mod.PLOT_OUT)):
    """Cost of one read of every counter and clock path here, C and Python: a table,
    build/bench.json and the plot of docs/benchmarks.md."""
    for line in _run(bench_mod.run, int(runs), int(calls), int(repeats),
                     Path(json) if json else bench_mod.JSON_OUT, Path(plot) if plot else None):
        print(line)


@task
def lint(c):
    """ruff and mypy --strict over the Python code; checkpatch.pl --strict over the drivers."""
    c.run("ruff check pmubuild tests tasks.py userlib", pty=False)
    c.run("mypy pmubuild", pty=False)
    c.run("mypy userlib/simple_pmu", pty=False)
    problems = _run(commands.checkpatch)
    for line in problems:
        print(line)
    if problems:
        raise Exit("checkpatch --strict found problems", code=1)
    print("checkpatch --strict: clean")


@task(name="unit")
def unit(c):
    """Unit and real-tree tests (pytest), no QEMU."""
    c.run("pytest -q tests", pty=False)


@task(pre=[lint])
def test(c):
    """The whole suite: lint; pytest beside test-package (bookworm, trixie, sid amd64 and
    bookworm arm64); then test-qemu on all 10 kernels."""
    if not _run(commands.test_all, float(GUEST_TIMEOUT_S), 2):
        raise Exit("invoke test failed", code=1)
