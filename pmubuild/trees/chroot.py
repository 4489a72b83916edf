"""Cached debootstrap chroots that build for kernels the host toolchain cannot serve.

One chroot per Debian suite and package set (the name carries a hash of the set), created
whole or not at all. Builds run in a private mount namespace: the kernel tree and the build
directory are bind-mounted at their own paths, so nothing inside the chroot needs rewriting.
"""

import hashlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import step
from pmubuild.trees import binfmt, cache
from pmubuild.trees.apt import PrivateApt, mirrors
from pmubuild.trees.matrix import GNU_TRIPLET

# Libraries and tools the kbuild tools use (objtool: libelf; sign-file: libssl); the first name the
# suite has wins (t64 renames from trixie on).
# pahole generates BTF for modules when the headers ship vmlinux (Debian 6.12 and later).
LIBRARY_ALTERNATIVES = (("libelf1t64", "libelf1"), ("libssl3t64", "libssl3", "libssl1.1"),
                        ("pahole", "dwarves"))


def packages_for(apt: PrivateApt, suite: str, gcc_major: int, host_arch: str) -> list[str]:
    names = {p.name for p in apt.packages(suite, host_arch)}
    # perl (W=1 runs kernel-doc) and python3 (kernel-doc from 6.17) as kbuild calls them.
    pkgs = ["make", "libc6-dev", "perl", "python3", f"gcc-{gcc_major}"]
    for arch, triplet in GNU_TRIPLET.items():
        if arch != host_arch:
            pkgs.append(f"gcc-{gcc_major}-{triplet}")
    for alternatives in LIBRARY_ALTERNATIVES:
        found = next((n for n in alternatives if n in names), None)
        if found:
            pkgs.append(found)
    missing = [p for p in pkgs if p.startswith("gcc") and p not in names]
    if missing:
        raise PipelineError(f"Debian {suite} has no {', '.join(missing)} in the index")
    return sorted(pkgs)


def chroot_dir(suite: str, pkgs: list[str]) -> Path:
    digest = hashlib.sha256(" ".join([suite, *pkgs]).encode()).hexdigest()[:10]
    return cache.subdir("chroots") / f"{suite}-{digest}"


def ensure(apt: PrivateApt, suite: str, gcc_major: int, host_arch: str) -> Path:
    """The chroot for `suite` with gcc-N (native and cross), created on first use."""
    pkgs = packages_for(apt, suite, gcc_major, host_arch)
    final = chroot_dir(suite, pkgs)
    return _once(final, final / "usr" / "bin" / f"gcc-{gcc_major}",
                 lambda: _create(suite, pkgs, final))


# Hundreds of lines each; the rest of debootstrap's output is progress enough.
_DEBOOTSTRAP_NOISE = ("I: Retrieving", "I: Validating")


def _once(final: Path, ready: Path, create: Callable[[], None]) -> Path:
    """`final`, created by `create` unless `ready` (a path inside it) shows it complete;
    under the chroots lock, checked again inside it."""
    if ready.exists():
        return final
    with cache.locked("chroots"):
        if not ready.exists():
            create()
    return final


def _prepare(final: Path, mib: int, what: str) -> None:
    if not shutil.which("debootstrap"):
        raise PipelineError("debootstrap is not installed (apt-get install debootstrap)")
    cache.remove_stale_partials(final.parent)
    cache.ensure_free_space(final.parent, mib, what)


def _create(suite: str, pkgs: list[str], final: Path) -> None:
    _prepare(final, 1500, f"a Debian {suite} build chroot")
    with step(f"creating Debian {suite} build chroot ({', '.join(pkgs)})"), \
            cache.atomic_dir(final) as tmp:
        _stream(["debootstrap", "--variant=minbase", f"--include={','.join(pkgs)}",
                 suite, str(tmp), mirrors()[0]], f"debootstrap {suite}", _DEBOOTSTRAP_NOISE)


def run(root: Path, binds: list[Path], argv: list[str],
        cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run argv inside the chroot with `binds` mounted at their own paths; output captured."""
    lines = ["set -e"]
    # /dev for /dev/null, /proc for objtool (7.x reads its stack limit there).
    for p in [Path("/dev"), Path("/proc"), *binds]:
        target = f"{root}{p}"
        lines.append(f"mkdir -p {shlex.quote(target)}")
        lines.append(f"mount --bind {shlex.quote(str(p))} {shlex.quote(target)}")
    inner = f"cd {shlex.quote(str(cwd))} && exec {shlex.join(argv)}"
    lines.append(f"exec chroot {shlex.quote(str(root))} /usr/bin/env -i "
                 "PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root "
                 f"/bin/sh -c {shlex.quote(inner)}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           "\n".join(lines)], capture_output=True, text=True)


# The registry here serves sid as a snapshot whose Release is past its Valid-Until (apt then
# refuses the suite); signatures are still checked. Written into every package chroot.
NO_VALID_UNTIL = 'Acquire::Check-Valid-Until "false";'
NO_VALID_UNTIL_FILE = "etc/apt/apt.conf.d/99snapshot-no-valid-until"


def ensure_set(suite: str, pkgs: list[str], marker: str, arch: str = "amd64") -> Path:
    """A cached chroot of `suite`: minbase, then `pkgs` installed by apt, created on first use.

    `arch` other than amd64 runs under qemu-user (pmubuild.trees.binfmt registers it).

    For callers that need their own package set (pmubuild.debian.package). apt, not debootstrap's
    --include, installs the set: debootstrap's resolver fails on deep dependency trees
    (lintian on trixie). `marker` is a path inside the chroot that exists once it is
    complete. Never modified after creation: users run in an overlay of it.
    """
    pkgs = sorted(pkgs)
    # amd64 keys stay as they were (no arch in the name): existing caches remain valid.
    final = chroot_dir(suite, ["apt:", *pkgs] if arch == "amd64" else [f"apt-{arch}:", *pkgs])
    if arch == "arm64":
        binfmt.ensure_aarch64()
        final = final.with_name(f"{final.name}-{arch}")
    elif arch != "amd64":
        raise PipelineError(f"chroots are amd64 or arm64, not {arch!r}")
    return _once(final, final / marker.lstrip("/"),
                 lambda: _create_with_apt(suite, pkgs, final, arch))


def _create_with_apt(suite: str, pkgs: list[str], final: Path, arch: str = "amd64") -> None:
    _prepare(final, 2000, f"a Debian {suite} {arch} chroot")
    with step(f"creating Debian {suite} {arch} chroot with {', '.join(pkgs)}"), \
            cache.atomic_dir(final) as tmp:
        _stream(["debootstrap", f"--arch={arch}", "--variant=minbase", suite, str(tmp),
                 mirrors()[0]], f"debootstrap {suite} {arch}", _DEBOOTSTRAP_NOISE)
        lines = ["set -e"]
        for p in ("/dev", "/dev/pts", "/proc"):
            lines += [f"mkdir -p {tmp}{p}", f"mount --bind {p} {tmp}{p}"]
        lines.append(f"cp /etc/resolv.conf {tmp}/etc/resolv.conf")
        lines.append(f"echo {shlex.quote(NO_VALID_UNTIL)} > {tmp}/{NO_VALID_UNTIL_FILE}")
        inner = ("apt-get update -q && apt-get install -y -q --no-install-recommends "
                 f"{shlex.join(pkgs)} && apt-get clean")
        lines.append(f"exec chroot {tmp} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "
                     f"LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/sh -c {shlex.quote(inner)}")
        _stream(["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)],
                f"apt {suite}", skip=("Get:", "Selecting", "Preparing", "Unpacking"))


def _stream(argv: list[str], label: str, skip: tuple[str, ...] = ()) -> None:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout
    tail: list[str] = []
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-20:]
        if not line.startswith(skip):
            print(f"  [{label}] {line.rstrip()}", file=sys.stderr, flush=True)
    if proc.wait() != 0:
        raise PipelineError(f"{label} failed:\n  " + "\n  ".join(tail))
