"""A Python for the test guests, and simple_pmu built for it.

Debian bookworm's python3.11 and the few libraries `import json, ctypes, argparse` need,
extracted with dpkg and trimmed, precompiled on the host (same 3.11 bytecode) so the
guest does not compile the stdlib under TCG. It is cached as its own gzipped cpio
archive: the kernel unpacks concatenated archives, so each guest's initramfs is this
archive followed by the small per-guest one (which holds simple_pmu, rebuilt each time).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import step
from pmubuild.guests import cpio
from pmubuild.trees import cache
from pmubuild.trees.apt import Package, PrivateApt
from pmubuild.trees.matrix import GNU_TRIPLET

SUITES = ("bookworm", "bookworm-security")
PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "libc6",
            "libgcc-s1", "libffi8", "zlib1g", "libexpat1",
            # The guests validate simple-pmu's --json output against its JSON Schema
            # (tests/guest/*/*-json.sh): Debian's jsonschema and what it imports.
            "python3-jsonschema", "python3-attr", "python3-pyrsistent")
DEV_PACKAGE = "libpython3.11-dev"
PY_VERSION = (3, 11)
# Parts of the packages no test imports or reads: smaller archive, faster boot.
TRIM = ("usr/share", "usr/lib/python3.11/test", "usr/lib/python3.11/idlelib",
        "usr/lib/python3.11/tkinter", "usr/lib/python3.11/turtledemo",
        "usr/lib/python3.11/ensurepip", "usr/lib/python3.11/lib2to3",
        "usr/lib/python3.11/pydoc_data", "usr/lib/python3.11/unittest/test")
REPO = Path(__file__).resolve().parents[2]
USERLIB = REPO / "userlib" / "simple_pmu"
SITE = "usr/lib/python3/dist-packages"
CLI = "#!/usr/bin/python3.11\nimport sys\nfrom simple_pmu.cli import main\nsys.exit(main())\n"


def _newest(apt: PrivateApt, name: str, arch: str) -> Package:
    # Pinned to bookworm: a multi-suite index would offer sid's libc6.
    return apt.newest(name, SUITES, arch)


def _extract(debs: list[Path], root: Path) -> None:
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)


def archive(apt: PrivateApt, arch: str) -> Path:
    """python3.11 for `arch` as a gzipped cpio archive, built once per package set."""
    pkgs = [_newest(apt, n, arch) for n in PACKAGES]
    digest = hashlib.sha256(" ".join(p.spec for p in pkgs).encode()).hexdigest()[:10]
    final = cache.subdir("guest") / f"python-{arch}-{digest}"
    out = final / "python.cpio.gz"
    if out.exists():
        return out
    with cache.locked("guest-python"):
        if out.exists():
            return out
        cache.remove_stale_partials(final.parent)
        cache.ensure_free_space(final.parent, 300, f"a Python for {arch} guests")
        debs = apt.download(pkgs)
        with step(f"assembling python3.11 for {arch} guests"), cache.atomic_dir(final) as tmp:
            root = tmp / "root"
            _extract(debs, root)
            for rel in TRIM:
                shutil.rmtree(root / rel, ignore_errors=True)
            _precompile(root)
            entries: list[cpio.Entry] = []
            for child in sorted(root.iterdir()):
                cpio.add_tree(entries, child, child.name)
            entries.append(cpio.symlink("usr/bin/python3", "python3.11"))
            cpio.write_gz(entries, tmp / "python.cpio.gz")
            shutil.rmtree(root)
    return out


def _precompile(root: Path) -> None:
    """Bytecode made by the host's python3.11 (bookworm's, like the guest's): unchecked
    hashes, because the archive's mtimes are not the sources' any more."""
    if sys.version_info[:2] != PY_VERSION:
        return  # a different host Python would write the wrong magic; the guest compiles
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0",
                    "--invalidation-mode", "unchecked-hash", str(root / "usr/lib/python3.11"),
                    str(root / SITE)], check=True, capture_output=True)


def headers(apt: PrivateApt, arch: str) -> Path:
    """usr/include of libpython3.11-dev for `arch` (pyconfig.h differs per arch) and of
    the guest's own libc6-dev: the extension must not ask for a newer glibc than the
    guest's (a Debian 13 host's glibc 2.41 headers turn strtol into __isoc23_strtol,
    GLIBC_2.38, which bookworm's 2.36 lacks)."""
    pkgs = [_newest(apt, DEV_PACKAGE, arch), _newest(apt, "libc6-dev", arch)]
    final = cache.subdir("guest") / f"pydev-{arch}-{pkgs[0].version}-libc{pkgs[1].version}"
    inc = final / "usr" / "include"
    if inc.is_dir():
        return inc
    with cache.locked("guest-python"):
        if not inc.is_dir():
            debs = apt.download(pkgs)
            with cache.atomic_dir(final) as tmp:
                _extract(debs, tmp)
    return inc


def glibc_needed(so: Path) -> tuple[int, ...]:
    """The newest GLIBC_x.y symbol version a shared object needs; () for none."""
    with open(so, "rb") as f:
        sec = ELFFile(f).get_section_by_name(".gnu.version_r")
        if not isinstance(sec, GNUVerNeedSection):
            return ()
        found = [tuple(int(x) for x in aux.name.removeprefix("GLIBC_").split("."))
                 for _, auxes in sec.iter_versions() for aux in auxes
                 if re.fullmatch(r"GLIBC_\d+(\.\d+)*", aux.name)]
    return max(found, default=())


def extension(apt: PrivateApt, arch: str, out_dir: Path) -> Path:
    """simple_pmu._native for the guest, from include/cycles.h, rebuilt when a source
    changed: the compiler line the userlib documents for cross builds."""
    triplet = GNU_TRIPLET[arch]
    cc = "gcc" if arch == "amd64" else f"{triplet}-gcc"
    so = out_dir / f"_native.cpython-311-{triplet}.so"
    sources = [USERLIB / "_native.c", REPO / "include" / "cycles.h"]
    libc = _newest(apt, "libc6", arch).version
    if so.exists() and so.stat().st_mtime >= max(s.stat().st_mtime for s in sources) \
            and glibc_needed(so) <= _upstream(libc):
        return so
    inc = headers(apt, arch)
    out_dir.mkdir(parents=True, exist_ok=True)
    # A file of this build's own: test-qemu prepares two kernels' guests at once, and both
    # may build it (the same bytes); the rename makes whichever lands last the one read.
    fd, name = tempfile.mkstemp(prefix=f".{so.name}.", suffix=".tmp", dir=out_dir)
    os.close(fd)
    tmp = Path(name)
    try:
        # The guest's libc headers before the compiler's own (-isystem comes first).
        proc = subprocess.run([cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC",
                               "-isystem", str(inc), "-isystem", str(inc / triplet),
                               f"-I{inc}/python3.11", f"-I{REPO / 'include'}", "-o", str(tmp),
                               str(sources[0])], capture_output=True, text=True)
        if proc.returncode != 0:
            raise PipelineError(f"building simple_pmu._native for {arch} failed:\n{proc.stderr}")
        need = glibc_needed(tmp)
        if need > _upstream(libc):
            raise PipelineError(f"simple_pmu._native for {arch} needs GLIBC_"
                                f"{'.'.join(map(str, need))}, newer than the guest's libc6 "
                                f"{libc}")
        os.replace(tmp, so)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return so


def _upstream(version: str) -> tuple[int, ...]:
    """2.36 of "2.36-9+deb12u10"."""
    m = re.match(r"(?:\d+:)?(\d+(?:\.\d+)*)", version)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def package_entries(apt: PrivateApt, arch: str, out_dir: Path) -> list[cpio.Entry]:
    """simple_pmu (pure Python modules + the extension) and the simple-pmu command."""
    entries = [cpio.directory(d) for d in ("usr", "usr/lib", "usr/lib/python3", SITE,
                                           f"{SITE}/simple_pmu", "usr/bin")]
    for src in sorted(USERLIB.glob("*.py")):
        entries.append(cpio.file(f"{SITE}/simple_pmu/{src.name}", src.read_bytes()))
    entries.append(cpio.directory(f"{SITE}/simple_pmu/schema"))
    for src in sorted((USERLIB / "schema").glob("*.json")):
        entries.append(cpio.file(f"{SITE}/simple_pmu/schema/{src.name}", src.read_bytes()))
    so = extension(apt, arch, out_dir)
    entries.append(cpio.file(f"{SITE}/simple_pmu/{so.name}", so.read_bytes()))
    entries.append(cpio.file("usr/bin/simple-pmu", CLI.encode(), executable=True))
    return entries
