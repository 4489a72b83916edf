"""Build the Debian packages in a clean chroot of the target suite, then run lintian.

The way Debian builds them: an upstream tarball (simple-pmu_VERSION.orig.tar.xz, the
checkout's files without debian/), the source tree unpacked beside it with debian/ added,
and `dpkg-buildpackage -us -uc` in a chroot that has only build-essential, with the
Build-Depends installed there by apt. The chroot is a cached debootstrap (pmubuild.chroot)
that is never changed: each build runs in a throw-away overlay on top of it.

lintian runs in an overlay of a Debian 13 (trixie) chroot on the .changes (source and
every .deb): Debian judges packages with its current lintian, and an older one (bookworm's)
flags the current Standards-Version as newer than it knows.
"""

import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import cache, chroot
from .errors import PipelineError
from .progress import say, step

REPO = Path(__file__).resolve().parents[1]
SUITES = ("bookworm", "trixie", "sid")
NOT_SUPPORTED = {
    "bullseye": "Debian 11's dkms 2.8.4 does not sign modules, and its python3 3.9 and "
                "jinja2 2.11 are older than the build scripts support; use bookworm or later",
}
BUILD_PKGS = ["build-essential", "dpkg-dev"]
BUILD_MARKER = "usr/bin/dpkg-buildpackage"
LINT_SUITE = "trixie"
LINT_PKGS = ["lintian"]
LINT_MARKER = "usr/bin/lintian"


@dataclass(frozen=True)
class PackageResult:
    out: Path
    changes: Path
    files: tuple[Path, ...]
    lintian: tuple[str, ...]  # lintian's output lines
    lintian_ok: bool


def source_version(debian: Path = REPO / "debian") -> tuple[str, str]:
    """(source name, version) from the first line of debian/changelog."""
    first = (debian / "changelog").read_text().splitlines()[0]
    m = re.match(r"(\S+) \(([^)]+)\)", first)
    if not m:
        raise PipelineError(f"{debian}/changelog: cannot read name and version from {first!r}")
    return m.group(1), m.group(2)


def upstream_version(version: str) -> str:
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def checkout_files(repo: Path = REPO) -> list[str]:
    """Files of the checkout as git sees them (tracked and new, not ignored), without
    debian/: what the upstream tarball holds. Uncommitted edits are included."""
    proc = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                           "--exclude-standard"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"git ls-files in {repo} failed: {proc.stderr.strip()}")
    names = sorted({n for n in proc.stdout.split("\0") if n})
    return [n for n in names if not n.startswith("debian/") and (repo / n).is_file()]


def write_orig(out: Path, name: str, upstream: str, repo: Path = REPO) -> Path:
    """NAME_UPSTREAM.orig.tar.xz with prefix NAME-UPSTREAM/, reproducible (sorted names,
    mtime of the last commit, owner root)."""
    mtime = int(subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%ct"],
                               capture_output=True, text=True).stdout.strip() or 0)
    orig = out / f"{name}_{upstream}.orig.tar.xz"
    prefix = f"{name}-{upstream}"
    with tarfile.open(orig, "w:xz") as tar:
        for rel in checkout_files(repo):
            info = tar.gettarinfo(str(repo / rel), arcname=f"{prefix}/{rel}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "root", "root"
            with open(repo / rel, "rb") as f:
                tar.addfile(info, f)
    return orig


def stage_source(out: Path, orig: Path, name: str, upstream: str,
                 repo: Path = REPO) -> Path:
    src = out / f"{name}-{upstream}"
    with tarfile.open(orig) as tar:
        tar.extractall(out)  # our own tarball, written just above
    shutil.copytree(repo / "debian", src / "debian")
    return src


def run_in_overlay(base: Path, binds: list[Path], script: str, label: str) -> tuple[int, list[str]]:
    """Run `script` (sh, as root) in a throw-away overlay of the chroot `base`, with
    `binds` mounted at their own paths; stream its output, prefixed with `label`."""
    work = Path(tempfile.mkdtemp(prefix="overlay-", dir=cache.subdir("overlays")))
    try:
        upper, wdir, merged = work / "upper", work / "work", work / "merged"
        for d in (upper, wdir, merged):
            d.mkdir()
        lines = ["set -e",
                 f"mount -t overlay overlay -o lowerdir={base},upperdir={upper},"
                 f"workdir={wdir} {merged}"]
        for p in [Path("/dev"), Path("/dev/pts"), Path("/proc"), *binds]:
            target = shlex.quote(f"{merged}{p}")
            lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(p))} {target}"]
        lines.append(f"cp /etc/resolv.conf {merged}/etc/resolv.conf")
        lines.append(f"exec chroot {merged} /usr/bin/env -i "
                     "PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root "
                     f"DEBIAN_FRONTEND=noninteractive /bin/sh -ec {shlex.quote(script)}")
        proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private",
                                 "sh", "-c", "\n".join(lines)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout
        out = []
        for line in proc.stdout:
            out.append(line.rstrip("\n"))
            say(f"  [{label}] {line.rstrip()}")
        return proc.wait(), out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build(suite: str = "bookworm", out: Path | None = None) -> PackageResult:
    if suite in NOT_SUPPORTED:
        raise PipelineError(f"{suite} is not supported: {NOT_SUPPORTED[suite]}")
    if suite not in SUITES:
        raise PipelineError(f"unknown suite {suite!r}: choose one of {', '.join(SUITES)}")
    name, version = source_version()
    upstream = upstream_version(version)
    out = (out or REPO / "build" / "debs" / suite).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    with step(f"writing {name}_{upstream}.orig.tar.xz and the source tree"):
        orig = write_orig(out, name, upstream)
        src = stage_source(out, orig, name, upstream)

    cache.ensure_free_space(cache.subdir("chroots"), 1500, "package build chroots")
    base = chroot.ensure_set(suite, BUILD_PKGS, BUILD_MARKER)
    with step(f"building {name} {version} in a clean Debian {suite} chroot"):
        script = (f"cd {shlex.quote(str(src))}\n"
                  "apt-get update -q\n"
                  "apt-get build-dep -q -y --no-install-recommends ./\n"
                  "dpkg-buildpackage -us -uc\n")
        rc, log = run_in_overlay(base, [out], script, f"build {suite}")
        if rc != 0:
            tail = "\n  ".join(log[-15:])
            raise PipelineError(f"dpkg-buildpackage in Debian {suite} failed:\n  {tail}")

    changes = next(iter(sorted(out.glob("*.changes"))), None)
    if changes is None:
        raise PipelineError(f"the build left no .changes in {out}")
    files = tuple(sorted(p for p in out.iterdir() if p.is_file()))

    lint_base = chroot.ensure_set(LINT_SUITE, LINT_PKGS, LINT_MARKER)
    with step(f"lintian (Debian {LINT_SUITE}) on {changes.name}"):
        # As nobody: lintian unpacks what it checks and warns when run as root.
        script = ("lintian --version\n"
                  "exec setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/tmp "
                  f"lintian --info --display-info --fail-on error,warning "
                  f"{shlex.quote(str(changes))}\n")
        rc, lint = run_in_overlay(lint_base, [out], script, "lintian")
    return PackageResult(out, changes, files, tuple(lint), rc == 0)


TEST_PKGS = {suite: ["apt-utils", "linux-headers-amd64"] for suite in SUITES}
TEST_MARKER = "usr/bin/apt-ftparchive"

# Runs in a throw-away overlay of a cached chroot that has the suite's kernel headers:
# the .debs go into a local apt repository, and apt installs simple-pmu-dkms from it.
INSTALL_TEST = r"""
echo "--- local apt repository with: $(cd "$DEBS" && ls *.deb | tr '\n' ' ')"
mkdir -p /srv/repo && cp "$DEBS"/*.deb /srv/repo/
(cd /srv/repo && apt-ftparchive packages . > Packages)
echo 'deb [trusted=yes] file:/srv/repo ./' > /etc/apt/sources.list.d/simple-pmu.list
apt-get update -q
KVER=$(ls /usr/src | sed -n 's/^linux-headers-\(.*-amd64\)$/\1/p' | head -n1)
echo "--- kernel headers: $KVER"
echo "--- apt-get install simple-pmu-dkms"
apt-get install -y -q -o Dpkg::Use-Pty=0 simple-pmu-dkms
echo "--- DKMS's make.log: compat.h rendered, kbuild, modverify's table"
log=$(find /var/lib/dkms/simple-pmu -name make.log | head -n1)
grep -v -e '^  CC' -e '^  LD' -e '^  MODPOST' "$log" || true
echo "--- dkms status"
dkms status | tee /tmp/status
grep -q "^simple-pmu/.*, $KVER, x86_64: installed" /tmp/status
ko=$(find /lib/modules/"$KVER" -name 'simple-pmu.ko*' | head -n1)
test -n "$ko" || { echo "FAIL: no module installed for $KVER"; exit 1; }
echo "--- installed: $ko"
modinfo "$ko" | grep -E '^(vermagic|signer|sig_hashalgo):'
modinfo -F signer "$ko" | grep -q "DKMS module signing key" ||
  { echo "FAIL: not signed by DKMS"; exit 1; }
test -e /usr/lib/udev/rules.d/60-simple-pmu-dkms.rules
echo "--- python3-simple-pmu and simple-pmu-dev from the same repository"
apt-get install -y -q -o Dpkg::Use-Pty=0 python3-simple-pmu simple-pmu-dev > /dev/null
/usr/bin/python3 -c 'import simple_pmu, simple_pmu._native as n; print("import", n.__name__, "ok")'
simple-pmu status || echo "(simple-pmu status exited $?)"
printf '#define _GNU_SOURCE 1\n#include <simple-pmu/cycles.h>\n#include <stdio.h>\n%s\n' \
  'int main(void) { printf("perfmon_available() = %d\n", perfmon_available()); return 0; }' \
  > /tmp/t.c
gcc -O2 -Wall -o /tmp/t /tmp/t.c && /tmp/t
apt-get purge -y -q -o Dpkg::Use-Pty=0 python3-simple-pmu simple-pmu-dev > /dev/null
V=$(ls /usr/src | sed -n 's/^simple-pmu-//p')
cp -a /usr/src/simple-pmu-$V /tmp/src
echo "--- apt-get purge simple-pmu-dkms"
apt-get purge -y -q -o Dpkg::Use-Pty=0 simple-pmu-dkms
left=$(find /lib/modules /var/lib/dkms /usr/src /lib/udev /usr/lib/udev /usr/libexec \
  /usr/include /usr/lib/python3 /usr/bin /usr/share/man \
  -name '*simple-pmu*' -o -name '*simple_pmu*' 2>/dev/null)
test -z "$left" || { echo "FAIL: left after purge:"; echo "$left"; exit 1; }
dkms status | grep simple-pmu && { echo "FAIL: dkms still lists it"; exit 1; }
echo "--- a module that fails verification fails the DKMS build (one MAKE[0] command)"
# On the sources as packaged, with dkms directly (a failed forced rebuild of an installed
# module would leave dkms 3.0.10 keeping the old .ko past purge: not what this checks).
cp -a /tmp/src /usr/src/simple-pmu-$V
sed -i '1a import sys; sys.exit("modverify: forced failure by test-package")' \
  /usr/src/simple-pmu-$V/pmubuild/modverify.py
dkms add -m simple-pmu -v "$V" > /dev/null
if dkms build -m simple-pmu -v "$V" -k "$KVER" > /tmp/fail.out 2>&1; then
  echo "FAIL: dkms build succeeded although modverify failed"; exit 1
fi
tail -n 4 /tmp/fail.out
grep "forced failure by test-package" $(find /var/lib/dkms/simple-pmu -name make.log | head -n1)
test -z "$(find /lib/modules -name 'simple-pmu.ko*')" ||
  { echo "FAIL: a module got installed"; exit 1; }
echo "dkms build failed with modverify's reason in make.log; no module installed"
dkms remove -m simple-pmu -v "$V" --all > /dev/null
rm -rf /usr/src/simple-pmu-$V
test ! -e /var/lib/dkms/simple-pmu
echo "--- OK: installed, signed, purged without trace; a failing verification fails the build"
"""


def test_install(suite: str = "bookworm", debs: Path | None = None) -> bool:
    """apt install simple-pmu-dkms from a local repository in a fresh chroot with the
    suite's amd64 kernel headers; dkms status, signature, then purge leaves nothing."""
    if suite in NOT_SUPPORTED:
        raise PipelineError(f"{suite} is not supported: {NOT_SUPPORTED[suite]}")
    if suite not in TEST_PKGS:
        raise PipelineError(f"unknown suite {suite!r}: choose one of {', '.join(TEST_PKGS)}")
    debs = (debs or REPO / "build" / "debs" / suite).resolve()
    if not any(debs.glob("simple-pmu-dkms_*.deb")):
        raise PipelineError(f"no simple-pmu-dkms .deb in {debs}: run invoke package first")
    cache.ensure_free_space(cache.subdir("chroots"), 2000, "a chroot with kernel headers")
    base = chroot.ensure_set(suite, TEST_PKGS[suite], TEST_MARKER)
    with step(f"apt install simple-pmu-dkms in a fresh Debian {suite} amd64 chroot"):
        rc, _ = run_in_overlay(base, [debs], f"DEBS={shlex.quote(str(debs))}\n{INSTALL_TEST}",
                               f"test {suite}")
    return rc == 0
