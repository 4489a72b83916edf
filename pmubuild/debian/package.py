"""Build the Debian packages in a clean chroot of the target suite, then run lintian.

The way Debian builds them: an upstream tarball (simple-pmu_VERSION.orig.tar.xz, the
checkout's files without debian/), the source tree unpacked beside it with debian/ added,
and `dpkg-buildpackage -us -uc` in a chroot that has only build-essential, with the
Build-Depends installed there by apt. The chroot is a cached debootstrap (pmubuild.trees.chroot)
that is never changed: each build runs in a throw-away overlay on top of it.

lintian runs in an overlay of a Debian 13 (trixie) chroot on the .changes (source and
every .deb): Debian judges packages with its current lintian, and an older one (bookworm's)
flags the current Standards-Version as newer than it knows.
"""

import hashlib
import json
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say, step
from pmubuild.trees import cache, chroot

REPO = Path(__file__).resolve().parents[2]
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
    lintian_ok: bool | None  # None: not run (build(lint=False))


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
    """The checkout's tracked files without debian/: what the upstream tarball holds.
    Edits not yet committed are included; files git does not track are not."""
    proc = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached"],
                          capture_output=True, text=True)
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


def run_in_overlay(base: Path, binds: list[Path], script: str, label: str,
                   mounts: dict[Path, str] | None = None) -> tuple[int, list[str]]:
    """Run `script` (sh, as root) in a throw-away overlay of the chroot `base`, with
    `binds` mounted at their own paths and `mounts` (host dir -> path inside) where
    given; stream its output, prefixed with `label`. Overlays sharing host directories
    through `mounts` (apt's caches) run one at a time: apt locks them."""
    if mounts:
        shared = sorted(str(h) for h in mounts)[0]
        lock = "apt-overlay-" + hashlib.sha256(shared.encode()).hexdigest()[:8]
        with cache.locked(lock):
            return _run_in_overlay(base, binds, script, label, mounts)
    return _run_in_overlay(base, binds, script, label, {})


def _run_in_overlay(base: Path, binds: list[Path], script: str, label: str,
                    mounts: dict[Path, str]) -> tuple[int, list[str]]:
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
        for host, inside in mounts.items():
            target = shlex.quote(f"{merged}{inside}")
            lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(host))} {target}"]
        lines.append(f"cp /etc/resolv.conf {merged}/etc/resolv.conf")
        # The overlay is thrown away after: dpkg need not fsync each file it unpacks
        # (as mk-sbuild's chroots and Docker's Debian images have it); a tenth off
        # each chroot's run here.
        lines.append(f"echo force-unsafe-io > {merged}/etc/dpkg/dpkg.cfg.d/unsafe-io")
        lines.append(f"echo {shlex.quote(chroot.NO_VALID_UNTIL)} > "
                     f"{merged}/{chroot.NO_VALID_UNTIL_FILE}")
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


def check_suite(suite: str) -> None:
    if suite in NOT_SUPPORTED:
        raise PipelineError(f"{suite} is not supported: {NOT_SUPPORTED[suite]}")
    if suite not in SUITES:
        raise PipelineError(f"unknown suite {suite!r}: choose one of {', '.join(SUITES)}")


def check_version(version: str, than: str) -> None:
    """A Debian version (upstream-revision, no epoch) newer than `than`, or an error."""
    if not re.fullmatch(r"[0-9][A-Za-z0-9.+~]*-[A-Za-z0-9.+~]+", version):
        raise PipelineError(f"version {version!r}: want UPSTREAM-REVISION, e.g. 0.1.1-1")
    proc = subprocess.run(["dpkg", "--compare-versions", version, "gt", than])
    if proc.returncode != 0:
        raise PipelineError(f"version {version} is not newer than debian/changelog's {than}")


def changelog_entry(name: str, version: str, suite: str, date: str) -> str:
    return (f"{name} ({version}) unstable; urgency=medium\n\n"
            f"  * Local rebuild as {version} for {suite} (invoke package --version).\n\n"
            f" -- simple-pmu test builds <simple-pmu@localhost>  {date}\n\n")


def apt_cache_mounts(suite: str, arch: str = "amd64", role: str = "build") -> dict[Path, str]:
    """Persistent apt package and index caches for overlays of one suite and arch (as
    pbuilder's aptcache): a throw-away overlay would otherwise download every package
    and index again on every run. The index cache is per `role`: apt-get update drops the
    lists of suites its sources do not name, and the roles' sources differ."""
    root = cache.subdir("apt-overlay") / f"{suite}-{arch}"
    archives, lists = root / "archives", root / f"lists-{role}"
    for d in (archives / "partial", lists / "partial"):
        d.mkdir(parents=True, exist_ok=True)
    return {archives: "/var/cache/apt/archives", lists: "/var/lib/apt/lists"}


# What dpkg-buildpackage builds: everything (source and every binary package), or as a
# buildd does, only the architecture-independent (-A) or the architecture-dependent (-B)
# binary packages, in separate builds.
BUILD_KINDS = {"full": [], "indep": ["-A"], "arch": ["-B"]}


def content_key(suite: str, version: str, run_lintian: bool, repo: Path = REPO,
                kind: str = "full") -> str:
    """What a build's result depends on: every file of the source package (content and
    name), the target version and suite, the build and lintian chroots' package sets."""
    extra = "" if kind == "full" else f" {kind}"
    h = hashlib.sha256(f"{suite} {version} {run_lintian} {BUILD_PKGS} {LINT_SUITE} "
                       f"{LINT_PKGS}{extra}\n".encode())
    debian = sorted(str(p.relative_to(repo)) for p in (repo / "debian").rglob("*")
                    if p.is_file())
    for rel in checkout_files(repo) + debian:
        h.update(rel.encode() + b"\0" + (repo / rel).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build(suite: str = "bookworm", out: Path | None = None, version: str | None = None,
          run_lintian: bool = True, kind: str = "full") -> PackageResult:
    """Source package and .debs of the checkout, built in a clean `suite` chroot, then
    lintian. `version` builds the same sources as that (newer) version: a changelog entry
    is added to the staged copy, never to the checkout. `kind` (BUILD_KINDS): "indep" or
    "arch" builds only those binary packages, as Debian's buildds do.

    Cached by content (content_key): the same sources give the same packages, so a build
    of unchanged sources copies the earlier result (and its lintian verdict) instead."""
    check_suite(suite)
    if kind not in BUILD_KINDS:
        raise PipelineError(f"unknown build kind {kind!r}: choose one of {', '.join(BUILD_KINDS)}")
    name, current = source_version()
    if version:
        check_version(version, current)
    version = version or current
    out = (out or REPO / "build" / "debs" / suite).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cached = cache.subdir("debs") / f"{suite}-{content_key(suite, version, run_lintian, kind=kind)}"
    if not (cached / RESULT).exists():
        # Built in `out`, not in the cache: the unprivileged build cannot enter /root.
        result = _build(suite, out, name, current, version, run_lintian, kind)
        cache.ensure_free_space(cached.parent, 500, "built Debian packages")
        with cache.locked("debs"), cache.atomic_dir(cached) as tmp:
            for f in result.files:
                shutil.copy2(f, tmp / f.name)
            (tmp / RESULT).write_text(json.dumps(
                {"lintian": result.lintian, "lintian_ok": result.lintian_ok}))
        return result
    say(f"{name} {version} for {suite}: sources unchanged since {cached.name}, "
        "using that build")
    for f in cached.iterdir():
        if f.is_file() and f.name != RESULT:
            shutil.copy2(f, out / f.name)
    meta = json.loads((cached / RESULT).read_text())
    changes = next(iter(sorted(out.glob("*.changes"))))
    return PackageResult(out, changes, tuple(sorted(out.iterdir())), tuple(meta["lintian"]),
                         meta["lintian_ok"])


RESULT = "build-result.json"


def _build(suite: str, out: Path, name: str, current: str, version: str,
           run_lintian: bool, kind: str = "full") -> PackageResult:
    upstream = upstream_version(version)

    with step(f"writing {name}_{upstream}.orig.tar.xz and the source tree"):
        orig = write_orig(out, name, upstream)
        src = stage_source(out, orig, name, upstream)
        if version != current:
            changelog = src / "debian" / "changelog"
            date = subprocess.run(["date", "-R"], capture_output=True, text=True).stdout.strip()
            changelog.write_text(changelog_entry(name, version, suite, date)
                                 + changelog.read_text())

    cache.ensure_free_space(cache.subdir("chroots"), 1500, "package build chroots")
    base = chroot.ensure_set(suite, BUILD_PKGS, BUILD_MARKER)
    flags = " ".join(BUILD_KINDS[kind])
    with step(f"building {name} {version}{' ' + flags if flags else ''} in a clean Debian "
              f"{suite} chroot"):
        # As Debian's buildds do: the build itself unprivileged (Rules-Requires-Root: no)
        # and without network (nothing may be fetched during the build).
        script = (f"cd {shlex.quote(str(src))}\n"
                  "apt-get update -q\n"
                  "apt-get build-dep -q -y --no-install-recommends ./\n"
                  f"chown -R nobody:nogroup {shlex.quote(str(out))}\n"
                  "exec unshare --net setpriv --reuid=nobody --regid=nogroup --clear-groups "
                  f"env HOME=/tmp dpkg-buildpackage -us -uc {flags}\n")
        rc, log = run_in_overlay(base, [out], script, f"build {suite}",
                                 apt_cache_mounts(suite))
        if rc != 0:
            tail = "\n  ".join(log[-15:])
            raise PipelineError(f"dpkg-buildpackage in Debian {suite} failed:\n  {tail}")

    changes = next(iter(sorted(out.glob("*.changes"))), None)
    if changes is None:
        raise PipelineError(f"the build left no .changes in {out}")
    shutil.rmtree(src)  # the unpacked tree: the .dsc and tarballs are the source package
    files = tuple(sorted(p for p in out.iterdir() if p.is_file()))
    if not run_lintian:
        return PackageResult(out, changes, files, (), None)

    lint_base = chroot.ensure_set(LINT_SUITE, LINT_PKGS, LINT_MARKER)
    with step(f"lintian (Debian {LINT_SUITE}) on {changes.name}"):
        # As nobody: lintian unpacks what it checks and warns when run as root.
        script = ("lintian --version\n"
                  "exec setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/tmp "
                  f"lintian --info --display-info --fail-on error,warning "
                  f"{shlex.quote(str(changes))}\n")
        rc, lint = run_in_overlay(lint_base, [out], script, "lintian")
    return PackageResult(out, changes, files, tuple(lint), rc == 0)
