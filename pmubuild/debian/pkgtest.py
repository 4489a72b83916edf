"""End-to-end test of the Debian packages: real apt, dpkg and DKMS in a fresh chroot, then
the module DKMS built there booted in the matching kernel under QEMU.

One throw-away overlay of a cached minimal chroot per run; the checkout's packages go into
a local apt repository there and `apt-get install simple-pmu-dkms` is run literally. The
kernel headers are those of the kernel the harness boots for that suite (pmubuild.trees.kernels
resolves it from the index), so the module DKMS built can be booted. Stages print
`PASS: name: detail` or `FAIL: name: why` (then stop), or `SKIP: name: why` for a check
that cannot run here (the seed documents' tcyc.c on a plain clone; the run goes on and
still passes); the summary lists them, each indented by two spaces.
"""

import lzma
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common import seeds
from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say, step
from pmubuild.debian import package
from pmubuild.guests import matrixrun
from pmubuild.trees import cache, chroot, kernels, matrix
from pmubuild.trees.apt import PrivateApt, mirrors

REPO = package.REPO
# What `invoke test` runs: every supported suite on amd64 (every stage), one on arm64, and
# the refusal on an unsupported suite. Grouped into units that run in a process each, the
# longest first; bullseye's refusal installs the bookworm build, so it follows bookworm.
UNITS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("trixie", "amd64"),), (("sid", "amd64"),),
    (("bookworm", "amd64"), ("bullseye", "amd64")), (("bookworm", "arm64"),))
ALL = tuple(combo for unit in UNITS for combo in unit)
# Units at a time. Beside pytest and test-qemu (which keep both CPUs busy: a second
# chroot there only slowed them down, pytest 210 -> 400 s) one; when `invoke test` says
# test-qemu has ended (SIGUSR1, see MORE_LANES) two, so that the last units do not leave a
# CPU idle. The units share nothing a second one could break (each its own build
# directories, overlay, apt cache and guest; the cache's writers take its locks).
LANES = 2
MORE_LANES = signal.SIGUSR1
# What runs one unit: this module with SUITE/ARCH arguments (main). Its name from its spec:
# run with -m, __name__ is "__main__" and the spec still names the module.
WORKER = (sys.executable, "-m", __spec__.name if __spec__ else __name__)
BASE_PKGS = ["apt-utils"]
# Under qemu-user every dpkg and maintainer script is emulated: the arm64 base already has
# what simple-pmu-dkms pulls in (dkms, Python, the compiler), so the run unpacks only
# headers and our packages. The Depends are proven complete on amd64 (no such head start).
EMULATED_BASE_EXTRA = ["dkms", "gcc", "libc6-dev", "make", "openssl", "python3",
                       "python3-jinja2", "python3-pyelftools"]
BASE_MARKER = "usr/bin/apt-ftparchive"
# A second kernel of the same release: another flavour's headers (first one published).
SECOND_FLAVOURS = ("cloud", "rt")
# arm64 runs under qemu-user (every compiler and Python call emulated): the install and
# the boot, not the stages whose logic is the same on both architectures.
FULL_ARCHES = ("amd64",)
# Where the buildd-style -A and -B builds are tried as well: the suites buildds build for
# (unstable, then the stable release it becomes); bookworm's older debhelper only ever
# builds the packages whole here (a minute of CI saved).
SPLIT_SUITES = ("trixie", "sid")
# Stages of a full run left out on a suite, and why (said in its summary): what they test
# is what trixie's and sid's DKMS do differently (no-headers: dkms 3.2 no longer
# recommends headers), or what runs the same there (autopkgtest: the package's own tests,
# which the stages before it already ran on bookworm one by one). Two minutes of CI saved.
OMIT = {"bookworm": ("no-headers", "autopkgtest")}
# Unsupported suites: apt must refuse simple-pmu-dkms (built for bookworm: it is arch all),
# naming an unmet versioned dependency, and leave nothing installed.
REFUSAL = r"""
fail() { echo "FAIL: refusal: $*"; exit 1; }
mkdir -p /srv/repo && cp "$DEBS"/simple-pmu-dkms_*.deb /srv/repo/
(cd /srv/repo && apt-ftparchive packages . > Packages)
echo 'deb [trusted=yes] file:/srv/repo ./' > /etc/apt/sources.list.d/localrepo.list
apt-get update -q > /tmp/update.log 2>&1 || { cat /tmp/update.log; fail "apt-get update"; }
rc=0
apt-get install -y -q --no-install-recommends simple-pmu-dkms > /tmp/apt.log 2>&1 || rc=$?
cat /tmp/apt.log
[ "$rc" != 0 ] || fail "apt-get install succeeded"
dep="Depends: (dkms|python3|python3-jinja2|python3-pyelftools) \(>= "
why=$(grep -E "$dep" /tmp/apt.log | head -n1)
[ -n "$why" ] || fail "no unmet versioned dependency named"
! dpkg -l simple-pmu-dkms 2>/dev/null | grep -q '^[ih]' || fail "installed"
[ -z "$(ls -d /usr/src/simple-pmu-* 2>/dev/null)" ] || fail "sources left"
echo "PASS: refusal: apt-get install exits $rc:$(echo "$why" | tr -s ' ')"
"""


def refused(suite: str, arch: str) -> bool:
    """apt on an unsupported suite refuses the package (its versioned Depends), changing
    nothing."""
    # A directory of its own: package.build empties its output directory first, and
    # the other units' bookworm builds may be running.
    debs = package.build("bookworm", REPO / "build" / "debs" / f"bookworm-for-{suite}").out
    base = chroot.ensure_set(suite, BASE_PKGS, BASE_MARKER, arch)
    with step(f"apt install simple-pmu-dkms in Debian {suite} {arch} (unsupported)"):
        rc, log = package.run_in_overlay(
            base, [debs], f"DEBS={shlex.quote(str(debs))}\n{REFUSAL}", f"{suite} {arch}",
            package.apt_cache_mounts(suite, arch, "test"))
    results = [x for x in log if x.startswith(("PASS: ", "FAIL: "))] or [
        f"FAIL: refusal: exit status {rc}, no verdict (output above)"]
    say(f"test-package {suite} {arch}:")
    for r in results:
        say(f"  {r}")
    return rc == 0 and results[-1].startswith("PASS")


# Every stage pkgtest.sh runs for an arch, in order; one missing is a failure.
STAGES_FULL = ("setup", "no-headers", "install", "second-kernel", "userland", "tcyc", "upgrade",
               "remove", "purge", "autopkgtest", "broken-headers", "nonfatal-verification",
               "failed-verification")
STAGES_INSTALL = ("setup", "install", "userland", "tcyc", "remove", "purge")
GUEST_SCRIPTS = {
    "arm64": ["arm64/30-read-every-cpu.sh", "arm64/32-exact-counts.sh",
              "common/99-kernel-log-clean.sh"],
    "amd64": ["common/99-kernel-log-clean.sh"],
}


@dataclass(frozen=True)
class Kernels:
    first_pkg: str  # linux-headers-6.1.0-57-amd64
    first: str  # 6.1.0-57-amd64: the release the harness boots
    second_pkg: str
    second: str
    version: str  # Debian version of both headers packages


def kernels_for(apt: PrivateApt, suite: str, arch: str) -> Kernels:
    apt.update()  # on a cold cache nothing else may have fetched the index yet
    kp = kernels.resolve(apt, matrix.check_suite(suite), arch)
    abi = kp.release.removesuffix(f"-{arch}")
    for flavour in SECOND_FLAVOURS:
        name = f"linux-headers-{abi}-{flavour}-{arch}"
        try:
            apt.exact(name, kp.version, arch)
        except PipelineError:
            continue
        return Kernels(kp.headers.name, kp.release, name, f"{abi}-{flavour}-{arch}", kp.version)
    raise PipelineError(f"{suite}/{arch}: no second flavour ({', '.join(SECOND_FLAVOURS)}) of "
                        f"{kp.release} at {kp.version} in the index")


def sources(suite: str) -> str:
    """sources.list lines for every apt suite the matrix takes the suite's kernel from."""
    main, security = mirrors()
    return "\n".join(f"deb {security if s.endswith('-security') else main} {s} main"
                     for s in matrix.check_suite(suite).apt_suites) + "\n"


STAGES = Path(__file__).with_name("pkgtest.sh")


def test(suite: str = "bookworm", arch: str = "amd64") -> bool:
    """Build the packages (and a newer version of them), install, upgrade, purge and break
    them in a fresh chroot of `suite`/`arch`, then boot the module DKMS built. True if
    every stage passed. For an unsupported suite (bullseye): that apt refuses the package."""
    matrix.check_arch(arch)
    if suite in package.NOT_SUPPORTED:
        return refused(suite, arch)
    package.check_suite(suite)
    full = arch in FULL_ARCHES
    name, current = package.source_version()
    upstream = package.upstream_version(current)
    nxt = f"{upstream}+pkgtest1-1"
    built = REPO / "build" / "debs"
    # Per suite and arch: the units run two at a time, and package.build empties its
    # output directory first (bookworm amd64 and arm64 each build bookworm's).
    first = package.build(suite, built / f"{suite}-{arch}")
    debs = first.out
    lint = ("PASS: lintian: no errors or warnings on the source package and every .deb"
            if first.lintian_ok else "FAIL: lintian: errors or warnings (above)")
    next_debs = package.build(suite, built / f"{suite}-{arch}-next", version=nxt,
                              run_lintian=False).out \
        if full else None
    split = [split_build(suite, kind, first) for kind in ("indep", "arch")] \
        if full and suite in SPLIT_SUITES else []

    apt = PrivateApt()
    k = kernels_for(apt, suite, arch)
    out = REPO / "build" / "pkgtest" / f"{suite}-{arch}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tcyc_skip = seeds.absent_reason() or ""
    try:
        tcyc = seeds.restored_tcyc()
    except ValueError as e:
        raise PipelineError(f"{seeds.TCYC}: {e}") from None
    if tcyc:
        (out / "tcyc.c").write_text(tcyc)

    cache.ensure_free_space(cache.subdir("chroots"), 3000, "a chroot with kernel headers")
    base = chroot.ensure_set(suite, BASE_PKGS + ([] if full else EMULATED_BASE_EXTRA),
                             BASE_MARKER, arch)
    env = {"DEBS": str(debs), "NEXT": str(next_debs or ""), "OUT": str(out),
           "NEXT_VERSION": package.upstream_version(nxt), "VERSION": upstream,
           "KPKG": k.first_pkg, "KREL": k.first, "K2PKG": k.second_pkg, "K2REL": k.second,
           "KVERSION": k.version, "MACH": matrix.UNAME_MACHINE[arch], "FULL": "1" if full else "",
           "OMIT": " ".join(OMIT.get(suite, ())),
           "SOURCES": sources(suite), "TCYC_SKIP": tcyc_skip}
    script = "".join(f"{key}={shlex.quote(v)}\n" for key, v in env.items()) + STAGES.read_text()
    binds = [debs, out] + ([next_debs] if next_debs else [])
    with step(f"{name}: apt install, upgrade, purge in a fresh Debian {suite} {arch} chroot"):
        rc, log = package.run_in_overlay(base, binds, script, f"{suite} {arch}",
                                         package.apt_cache_mounts(suite, arch, "test"))
    results = [lint, *split] + [line for line in log
                                 if line.startswith(("PASS: ", "FAIL: ", "SKIP: "))]
    if rc == 0:
        results += missing_stages(results, expected_stages(suite, full))
    elif not any(r.startswith("FAIL") for r in results):
        results.append(f"FAIL: the stages stopped with exit status {rc} (output above)")
    if full and suite in OMIT:
        results.append(f"NOTE: not run on {suite} (trixie and sid run them): "
                       f"{', '.join(OMIT[suite])}")
    if not any(r.startswith("FAIL") for r in results):
        results.append(boot(suite, arch, out))
    say(f"test-package {suite} {arch}:")
    for r in results:
        say(f"  {r}")
    return not any(r.startswith("FAIL") for r in results)


def split_build(suite: str, kind: str, full: package.PackageResult) -> str:
    """A buildd-style build of only the arch-independent (-A, "indep") or only the
    arch-dependent (-B, "arch") packages: it must build exactly those .debs of the full
    build, and lintian must find no error or warning in them."""
    flag = package.BUILD_KINDS[kind][0]
    try:
        r = package.build(suite, REPO / "build" / "debs" / f"{suite}-{kind}", kind=kind)
    except PipelineError as e:
        return f"FAIL: build {flag}: {e}"
    debs = sorted(f.name for f in r.files if f.suffix == ".deb")
    want = sorted(f.name for f in full.files if f.suffix == ".deb"
                  and (f.name.endswith("_all.deb") == (kind == "indep")))
    if debs != want:
        return f"FAIL: build {flag}: built {' '.join(debs) or 'nothing'}, want {' '.join(want)}"
    if not r.lintian_ok:
        return f"FAIL: build {flag}: lintian found errors or warnings (above)"
    return f"PASS: build {flag}: dpkg-buildpackage {flag} built {' '.join(debs)}; lintian: " \
           "no errors or warnings"


def expected_stages(suite: str, full: bool) -> tuple[str, ...]:
    """The stages pkgtest.sh must report on `suite`: every one (full), less OMIT's."""
    if not full:
        return STAGES_INSTALL
    return tuple(x for x in STAGES_FULL if x not in OMIT.get(suite, ()))


def missing_stages(results: list[str], expected: tuple[str, ...]) -> list[str]:
    """FAIL lines for the expected stages that reported nothing (PASS, FAIL or SKIP)."""
    seen = {r.split(": ", 2)[1] for r in results if r.startswith(("PASS: ", "FAIL: ", "SKIP: "))}
    return [f"FAIL: {name}: the stage never reported" for name in expected if name not in seen]


def boot(suite: str, arch: str, out: Path) -> str:
    """Boot the suite's kernel with the module DKMS built, loaded by insmod from /work."""
    packed = sorted(out.glob("simple-pmu.ko*"))
    if not packed:
        return "FAIL: boot: the stages left no module in " + str(out)
    ko = out / "dkms" / "simple-pmu.ko"
    ko.parent.mkdir(exist_ok=True)
    data = packed[0].read_bytes()
    # dkms 3.2 installs simple-pmu.ko.xz; busybox insmod takes the plain module.
    ko.write_bytes(lzma.decompress(data) if packed[0].suffix == ".xz" else data)
    signer = subprocess.run(["modinfo", "-F", "signer", str(ko)], capture_output=True,
                            text=True).stdout.strip()
    if signer != "DKMS module signing key":
        return f"FAIL: boot: {ko} is not the module DKMS signed (signer {signer!r})"
    scripts = [REPO / "tests" / "guest" / s for s in GUEST_SCRIPTS[arch]]
    command = (BOOT_ARM64 if arch == "arm64" else BOOT_AMD64).format(
        scripts=" ".join(f"/work/{s.name}" for s in scripts))
    with step(f"booting {suite} {arch} with the module DKMS built"):
        run = matrixrun.qemu_run(matrix.check_suite(suite), arch, command, [ko, *scripts], 300)
    for line in run.command_output.splitlines():
        say(f"  [guest] {line}")
    last = [x for x in run.command_output.splitlines() if x.startswith(("PASS", "FAIL"))]
    if run.command_rc == 0 and last and last[-1].startswith("PASS"):
        return last[-1]
    return f"FAIL: boot: guest command exited {run.command_rc}"


# The harness's own module is in the guest's /lib/modules: removed first, so that only
# DKMS's can be loaded.
BOOT_ARM64 = """\
rm -f /lib/modules/$(uname -r)/extra/simple-pmu.ko
insmod /work/simple-pmu.ko || {{ echo "FAIL: boot: insmod of DKMS's module failed"; exit 1; }}
for s in {scripts}; do
    echo "--- $s"; sh "$s" || {{ echo "FAIL: boot: $s"; exit 1; }}
done
simple-pmu read --scope cpu --json | grep -q '"backend": "driver"' ||
    {{ echo "FAIL: boot: simple-pmu read --scope cpu did not use the driver"; exit 1; }}
rmmod simple_pmu || {{ echo "FAIL: boot: rmmod"; exit 1; }}
echo "PASS: boot: DKMS's module loads in $(uname -r): user reads on every CPU," \
    "exact counts, simple-pmu read --scope cpu uses it, unloads, kernel log clean"
"""

BOOT_AMD64 = """\
rm -f /lib/modules/$(uname -r)/extra/simple-pmu.ko
if out=$(insmod /work/simple-pmu.ko 2>&1); then echo "FAIL: boot: it loaded under TCG"; exit 1; fi
echo "insmod: $out"
echo "$out" | grep -q "No such device" || {{ echo "FAIL: boot: not ENODEV"; exit 1; }}
line=$(dmesg | grep -m1 "simple-pmu: CPU has no architectural perfmon") ||
    {{ echo "FAIL: boot: not refused for lack of perfmon: $(dmesg | grep simple-pmu)"; exit 1; }}
[ ! -e /sys/devices/system/simple-pmu ] || {{ echo "FAIL: boot: sysfs left"; exit 1; }}
for s in {scripts}; do sh "$s" || {{ echo "FAIL: boot: $s"; exit 1; }}; done
echo "PASS: boot: DKMS's module refused in $(uname -r) (no PMU under TCG): ENODEV, $line"
"""


def test_unit(combos: list[tuple[str, str]]) -> bool:
    """The combinations in turn, a summary line each with its wall time (collected by
    test_all, which runs this in a process of its own)."""
    summary = []
    for suite, arch in combos:
        start = time.monotonic()
        try:
            ok = test(suite, arch)
        except PipelineError as e:
            say(f"test-package {suite} {arch}: error: {e}")
            ok = False
        summary.append(f"test-package {suite:<8} {arch}: {'PASS' if ok else 'FAIL'} "
                       f"({time.monotonic() - start:.0f}s)")
    for line in summary:
        say(line)
    return all(line.split(": ", 1)[1].startswith("PASS") for line in summary)


def is_summary_line(line: str) -> bool:
    """A unit's per-combination verdict (test_unit's last lines)."""
    return line.startswith("test-package ") and line.rstrip().endswith("s)") \
        and (": PASS (" in line or ": FAIL (" in line)


def test_all(lanes: int = LANES) -> bool:
    """Every unit of UNITS, `lanes` at a time (LANES from when MORE_LANES arrives), each
    in a process with a log of its own that is copied whole into this output when the
    unit ends (never interleaved); then every combination's verdict, in the order of ALL."""
    width = [lanes]

    def more(signum: int, frame: object) -> None:
        width[0] = max(width[0], LANES)

    signal.signal(MORE_LANES, more)
    try:
        return _run_units(width)
    finally:
        # Ignored from now on, never fatal: invoke test may send it a moment late.
        signal.signal(MORE_LANES, signal.SIG_IGN)


def _run_units(width: list[int]) -> bool:
    logs = REPO / "build" / "pkgtest" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pending = list(UNITS)
    running: list[tuple[subprocess.Popen[bytes], Path]] = []
    verdicts: dict[str, str] = {}
    rcs = []
    while pending or running:
        while pending and len(running) < width[0]:
            unit = pending.pop(0)
            name = "+".join(f"{s}-{a}" for s, a in unit)
            log = logs / f"{name}.log"
            with open(log, "wb") as f:
                proc = subprocess.Popen(
                    [*WORKER, *(f"{s}/{a}" for s, a in unit)],
                    cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
            say(f"==> test-package {name}: started, output in {log}")
            running.append((proc, log))
        time.sleep(1)
        for proc, log in [r for r in running if r[0].poll() is not None]:
            running.remove((proc, log))
            rcs.append(proc.returncode)
            for line in log.read_text(errors="replace").splitlines():
                if is_summary_line(line):  # "test-package SUITE ARCH: PASS (Ns)"
                    verdicts[" ".join(line.split(":", 1)[0].split()[1:])] = line
                else:
                    say(line)
    lines = [verdicts.get(f"{s} {a}", f"test-package {s:<8} {a}: FAIL (no verdict: the "
                          "unit's process ended without one, its output above)")
             for s, a in ALL]
    for line in lines:
        say(line)
    return all(rc == 0 for rc in rcs) and all(": PASS (" in line for line in lines)


def main(argv: list[str]) -> int:
    """No arguments: test_all (--lanes=N: N at a time until MORE_LANES). SUITE/ARCH ...:
    those combinations in turn (one unit)."""
    if not argv or argv[0].startswith("--lanes="):
        value = argv[0].removeprefix("--lanes=") if argv else str(LANES)
        if not value.isdigit() or not 1 <= int(value) <= LANES or argv[1:]:
            say(f"pkgtest: usage: --lanes=1..{LANES} alone, or SUITE/ARCH ...; got {argv}")
            return 2
        return 0 if test_all(int(value)) else 1
    combos = []
    for a in argv:
        suite, _, arch = a.partition("/")
        if (suite, arch) not in ALL:
            say(f"pkgtest: {a!r} is not one of {' '.join(f'{s}/{x}' for s, x in ALL)}")
            return 2
        combos.append((suite, arch))
    return 0 if test_unit(combos) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
