"""Choose the compiler a kernel wants, and where to run it: host, host cross, or a chroot.

The kernel's .config names its compiler (CONFIG_CC_VERSION_TEXT, CONFIG_GCC_VERSION). We use
the same gcc major version, because kbuild flags and plugins are checked against it. The
kbuild host tools (fixdep, modpost) of newer Debian suites need a newer glibc than the host
has; then the build runs in a debootstrap chroot of the suite whose default gcc matches.
"""

import os
import platform
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

from pmubuild.common.errors import PipelineError
from pmubuild.kbuild.kbuildfiles import KBUILD_TOOLS
from pmubuild.trees.kdir import KernelTree
from pmubuild.trees.matrix import GNU_TRIPLET, KERNEL_ARCH

_MACHINE_TO_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
_ELF_MACHINE_TO_ARCH = {"EM_X86_64": "amd64", "EM_AARCH64": "arm64"}


@dataclass(frozen=True)
class Host:
    arch: str
    glibc: tuple[int, int]
    compilers: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Toolchain:
    cc: str  # compiler command, e.g. aarch64-linux-gnu-gcc-14
    make_vars: tuple[str, ...]  # ARCH=, CROSS_COMPILE=, CC=
    chroot_suite: str | None  # None: runs on the host
    reason: str

    @property
    def where(self) -> str:
        return f"chroot of Debian {self.chroot_suite}" if self.chroot_suite else "host"


def host_info(candidates: list[str] | None = None) -> Host:
    arch = _MACHINE_TO_ARCH.get(platform.machine())
    if arch is None:
        raise PipelineError(f"unsupported build machine {platform.machine()}")
    libc = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"
    m = re.search(r"(\d+)\.(\d+)", libc)
    glibc = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    found = frozenset(c for c in (candidates or []) if shutil.which(c))
    return Host(arch, glibc, found)


def kbuild_needs(tree: KernelTree) -> tuple[str, tuple[int, int]]:
    """(arch the kbuild tools run on, newest GLIBC_x.y symbol version they need)."""
    need = (0, 0)
    arch = ""
    for rel in KBUILD_TOOLS:
        with open(tree.tool(rel), "rb") as f:
            try:
                elf = ELFFile(f)
            except Exception as e:  # noqa: BLE001 - any parse failure means "not a tool we run"
                raise PipelineError(f"{tree.tool(rel)} is not an ELF program: {e}") from e
            arch = _ELF_MACHINE_TO_ARCH.get(elf["e_machine"], elf["e_machine"])
            for section in elf.iter_sections():
                if isinstance(section, GNUVerNeedSection):
                    for _verneed, auxs in section.iter_versions():
                        for aux in auxs:
                            vm = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name)
                            if vm:
                                need = max(need, (int(vm.group(1)), int(vm.group(2))))
    return arch, need


def compiler_name(tree_arch: str, host_arch: str, major: int) -> str:
    prefix = "" if tree_arch == host_arch else f"{GNU_TRIPLET[tree_arch]}-"
    return f"{prefix}gcc-{major}"


def select(tree: KernelTree, host: Host, kbuild_arch: str, kbuild_glibc: tuple[int, int],
           default_gcc: dict[str, int]) -> Toolchain:
    """Pure decision: which compiler, on the host or in which Debian suite's chroot."""
    if kbuild_arch != host.arch:
        raise PipelineError(
            f"{tree.path}: its kbuild tools ({KBUILD_TOOLS[0]}) are built for {kbuild_arch}, "
            f"this machine is {host.arch}: install the linux-kbuild package for {host.arch} "
            "(Debian: apt-get download linux-kbuild-VERSION:" + host.arch + ")")
    cc = compiler_name(tree.arch, host.arch, tree.cc_major)
    make_vars = [f"ARCH={KERNEL_ARCH[tree.arch]}", f"CC={cc}"]
    if tree.arch != host.arch:
        make_vars.insert(1, f"CROSS_COMPILE={GNU_TRIPLET[tree.arch]}-")
    wants = f"the kernel was built with {tree.cc_text or f'gcc {tree.cc_major}'}"
    glibc_ok = host.glibc >= kbuild_glibc
    if glibc_ok and cc in host.compilers:
        return Toolchain(cc, tuple(make_vars), None, f"{wants}; host has {cc}")
    suites = [s for s, major in default_gcc.items() if major == tree.cc_major]
    if not suites:
        raise PipelineError(
            f"{wants}, and no Debian suite has gcc-{tree.cc_major} as its default compiler; "
            f"install {cc} on this machine")
    why = (f"its kbuild tools need glibc {kbuild_glibc[0]}.{kbuild_glibc[1]}, host has "
           f"{host.glibc[0]}.{host.glibc[1]}" if not glibc_ok else f"host lacks {cc}")
    return Toolchain(cc, tuple(make_vars), suites[0], f"{wants}; {why}")


def choose(tree: KernelTree, default_gcc: dict[str, int]) -> Toolchain:
    arch, glibc = kbuild_needs(tree)
    host = host_info([compiler_name(tree.arch, _MACHINE_TO_ARCH.get(platform.machine(), ""),
                                    tree.cc_major)])
    return select(tree, host, arch, glibc, default_gcc)


def tree_paths(tree: KernelTree) -> list[Path]:
    """Every real directory a build in this tree reads (for bind mounts in a chroot)."""
    paths = {tree.path.resolve()}
    for link in ("scripts", "tools"):
        p = tree.path / link
        if p.exists():
            paths.add(p.resolve().parent)
    m = re.search(r"^include\s+(\S+)/Makefile$", (tree.path / "Makefile").read_text(), re.M)
    if m:
        inc = Path(m.group(1))
        inc = inc if inc.is_absolute() else tree.path / inc
        paths.add(inc.resolve())
        for link in ("scripts", "tools"):
            if (inc / link).exists():
                paths.add((inc / link).resolve().parent)
    return sorted(paths)
