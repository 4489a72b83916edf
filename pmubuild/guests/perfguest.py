"""Debian's own perf for the arm64 test guests (issue 22: perf's self-monitoring programs
run beside the readers and the module, tests/guest/arm64/47-perf-own-tests.sh).

`linux-perf` of the guest kernel's own suite and the shared libraries its binary loads,
taken from the Debian archive the machine's apt uses (pmubuild.trees.apt), cached as one gzipped
cpio archive per package set. The guest's root already holds bookworm's libc for Python
(pmubuild.guests.pyguest), so perf lives in its own tree, /opt/perf: its binary, every library
its ELF NEEDED closure reaches (and only those) and its own dynamic loader, which
/usr/bin/perf (a shell script) runs with --library-path /opt/perf/lib.

The libraries are found by soname, not by installing the package's whole Depends
closure: linux-perf is extracted, the sonames its binary needs are looked up in what was
extracted, and only the direct Depends of packages that supplied a needed library are
fetched next, until every soname resolves (or none of the remaining Depends can supply
it: an error naming the sonames).
"""

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.segments import InterpSegment

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import step
from pmubuild.guests import cpio
from pmubuild.trees import cache
from pmubuild.trees.apt import Package, PrivateApt
from pmubuild.trees.matrix import Suite

# Matrix suites whose guests get perf: Linux >= 5.17 (arm64 user access through perf),
# Debian ships linux-perf there. bookworm (6.1) and bookworm-backports (6.12) qualify by
# kernel too but are not enabled (cost: a download and a bigger initramfs per guest);
# their guests report SKIP with this reason.
PERF_SUITES = ("trixie", "sid")
ARCHES = ("arm64",)
PACKAGE = "linux-perf"
GUEST_ROOT = "opt/perf"
# Where a Debian package puts shared libraries and perf (usrmerged or not).
LIB_DIRS = ("usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib", "lib",
            "usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
MAX_ROUNDS = 12


def not_provided(suite: str, arch: str) -> str | None:
    """Why a guest of this suite and arch gets no perf, or None when it does."""
    if arch not in ARCHES:
        return f"perf is put only in {'/'.join(ARCHES)} guests (this one is {arch})"
    if suite not in PERF_SUITES:
        return (f"no Debian perf in the {suite} guest (pmubuild/guests/perfguest.py gives perf to "
                f"the {', '.join(PERF_SUITES)} guests only)")
    return None


def wrapper(version: str) -> bytes:
    """/usr/bin/perf in the guest: perf with its own loader and libraries."""
    return (f"#!/bin/sh\n# Debian linux-perf {version}, with its own libraries "
            f"(pmubuild/guests/perfguest.py)\n"
            f"exec /{GUEST_ROOT}/lib/ld-linux.so --library-path /{GUEST_ROOT}/lib "
            f"/{GUEST_ROOT}/bin/perf \"$@\"\n").encode()


# -- ELF ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Elf:
    needed: tuple[str, ...]
    interp: str | None


def read_elf(path: Path) -> Elf | None:
    """NEEDED entries and PT_INTERP of an ELF file; None if it is not one."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return None
        f.seek(0)
        elf = ELFFile(f)
        needed: list[str] = []
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                needed += [str(t.needed)  # type: ignore[attr-defined]
                           for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
        interp = None
        for seg in elf.iter_segments():
            if isinstance(seg, InterpSegment):
                interp = seg.get_interp_name()
        return Elf(tuple(needed), interp)


def real_path(root: Path, path: Path) -> Path:
    """`path` with its symlinks followed inside `root` (an absolute target means one in
    the package, not on this machine)."""
    for _ in range(40):
        if not path.is_symlink():
            return path
        target = Path(os.readlink(path))
        path = root / str(target).lstrip("/") if target.is_absolute() else path.parent / target
    raise PipelineError(f"{path}: too many levels of symbolic links")


@dataclass
class Tree:
    """Packages extracted side by side, one directory each: which package has which
    file, so only the Depends of packages that supplied a needed library are followed."""

    base: Path
    packages: dict[str, Path] = field(default_factory=dict)

    def add(self, name: str, deb: Path,
            extract: Callable[[Path, Path], None]) -> None:
        dest = self.base / name
        extract(deb, dest)
        self.packages[name] = dest

    def find_lib(self, soname: str) -> tuple[str, Path] | None:
        """(package, path) of the first file named `soname` in a library directory."""
        for name, root in self.packages.items():
            for d in LIB_DIRS:
                p = real_path(root, root / d / soname)
                if p.is_file():
                    return name, p
        return None

    def find_path(self, abspath: str) -> tuple[str, Path] | None:
        """A file by its absolute path in the guest (PT_INTERP), also through usrmerge."""
        rel = abspath.lstrip("/")
        alts = [rel, "usr/" + rel] + ([rel[4:]] if rel.startswith("usr/") else [])
        for name, root in self.packages.items():
            for r in alts:
                p = real_path(root, root / r)
                if p.is_file():
                    return name, p
        return None


@dataclass
class Closure:
    binary: Path
    libs: dict[str, Path]  # soname -> file (symlinks resolved)
    loader: Path
    used: set[str]  # packages that supplied the binary, a library or the loader
    missing: set[str]  # sonames nothing extracted supplies


def resolve(tree: Tree, binary_pkg: str, binary_rel: str,
            elf: Callable[[Path], Elf | None] = read_elf) -> Closure:
    """The NEEDED closure of binary_pkg's binary_rel within what `tree` holds."""
    binary = tree.packages[binary_pkg] / binary_rel
    info = elf(binary)
    if info is None:
        raise PipelineError(f"{binary}: not an ELF file")
    used = {binary_pkg}
    libs: dict[str, Path] = {}
    missing: set[str] = set()
    loader: Path | None = None
    if info.interp:
        found = tree.find_path(info.interp)
        if found:
            used.add(found[0])
            loader = found[1]
        else:
            missing.add(info.interp)
    todo = list(info.needed)
    while todo:
        soname = todo.pop()
        if soname in libs or soname in missing:
            continue
        found = tree.find_lib(soname)
        if found is None:
            missing.add(soname)
            continue
        pkg, path = found
        used.add(pkg)
        libs[soname] = path
        sub = elf(libs[soname])
        if sub is not None:
            todo += sub.needed
    if loader is None:
        missing.add(info.interp or "(no PT_INTERP)")
    return Closure(binary, libs, loader or binary, used, missing)


def perf_binary(root: Path, elf: Callable[[Path], Elf | None] = read_elf) -> str:
    """The path, in linux-perf's package, of the perf executable (usr/bin/perf, or the
    versioned perf_X.Y of older packages)."""
    bins = sorted(p for p in (root / "usr/bin").glob("perf*")
                  if p.is_file() and not p.is_symlink() and elf(p) is not None)
    if not bins:
        raise PipelineError(f"linux-perf has no perf executable under usr/bin ({root})")
    plain = [p for p in bins if p.name == "perf"]
    return str((plain or bins)[0].relative_to(root))


# -- assembly ------------------------------------------------------------------------------

def _dpkg_extract(deb: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)


def collect(apt: PrivateApt, suites: Iterable[str], arch: str, work: Path,
            extract: Callable[[Path, Path], None] = _dpkg_extract,
            elf: Callable[[Path], Elf | None] = read_elf) -> tuple[Closure, Package]:
    """linux-perf of `suites` and the packages that supply its libraries, extracted
    under `work`; the closure of its binary."""
    suites = list(suites)
    top = apt.newest(PACKAGE, suites, arch)
    index: dict[str, Package] = {top.name: top}
    tree = Tree(work)
    (deb,) = apt.download([top])
    tree.add(top.name, deb, extract)
    rel = perf_binary(tree.packages[top.name], elf)
    tried: set[str] = {top.name}
    for _ in range(MAX_ROUNDS):
        closure = resolve(tree, top.name, rel, elf)
        if not closure.missing:
            return closure, top
        wanted = []
        for name in sorted(closure.used):
            for dep in index[name].dependency_names():
                if dep in tried:
                    continue
                tried.add(dep)
                found = apt.find(re.escape(dep), suites, arch)
                if found:  # virtual packages (perl:any, python3:any) are not in the index
                    index[dep] = found[-1]
                    wanted.append(found[-1])
        if not wanted:
            break
        for pkg, deb in zip(wanted, apt.download(wanted), strict=True):
            tree.add(pkg.name, deb, extract)
    closure = resolve(tree, top.name, rel, elf)
    if closure.missing:
        raise PipelineError(
            f"{PACKAGE} {top.version} ({arch}): no package among its libraries' Depends "
            f"supplies {', '.join(sorted(closure.missing))}")
    return closure, top


def entries(closure: Closure, version: str) -> list[cpio.Entry]:
    """The guest's /opt/perf and /usr/bin/perf."""
    out = [cpio.directory(d) for d in ("opt", GUEST_ROOT, f"{GUEST_ROOT}/bin",
                                       f"{GUEST_ROOT}/lib", "usr", "usr/bin")]
    out.append(cpio.file(f"{GUEST_ROOT}/bin/perf", closure.binary.read_bytes(),
                         executable=True))
    out.append(cpio.file(f"{GUEST_ROOT}/lib/ld-linux.so", closure.loader.read_bytes(),
                         executable=True))
    for soname in sorted(closure.libs):
        out.append(cpio.file(f"{GUEST_ROOT}/lib/{soname}", closure.libs[soname].read_bytes(),
                             executable=True))
    out.append(cpio.file(f"{GUEST_ROOT}/VERSION", f"{PACKAGE} {version}\n".encode()))
    out.append(cpio.file("usr/bin/perf", wrapper(version), executable=True))
    return out


def archive(apt: PrivateApt, suite: Suite, arch: str) -> Path | None:
    """Debian's perf for a guest of `suite`/`arch` as a gzipped cpio archive (cached by
    the package set: linux-perf's version and the suite's index), or None where
    not_provided() says why not."""
    if not_provided(suite.name, arch):
        return None
    top = apt.newest(PACKAGE, suite.apt_suites, arch)
    digest = hashlib.sha256(f"{suite.name} {top.spec} v1".encode()).hexdigest()[:10]
    final = cache.subdir("guest") / f"perf-{suite.name}-{arch}-{digest}"
    out = final / "perf.cpio.gz"
    if out.exists():
        return out
    with cache.locked("guest-perf"):
        if out.exists():
            return out
        cache.remove_stale_partials(final.parent, final.name)
        cache.ensure_free_space(final.parent, 400, f"Debian's perf for {arch} guests")
        with step(f"assembling {PACKAGE} {top.version} for {suite.name} {arch} guests"), \
                cache.atomic_dir(final) as tmp:
            closure, top = collect(apt, suite.apt_suites, arch, tmp / "pkgs")
            listing = "".join(f"{s} {p.relative_to(tmp / 'pkgs')}\n"
                              for s, p in sorted(closure.libs.items()))
            cpio.write_gz(entries(closure, top.version), tmp / "perf.cpio.gz")
            (tmp / "libs.txt").write_text(f"{PACKAGE} {top.version}\n{listing}")
            shutil.rmtree(tmp / "pkgs")
    return out
