"""toolchain.select (pure) and kbuild_needs on real ELF programs."""

import shutil
import subprocess
from pathlib import Path

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.trees import toolchain
from pmubuild.trees.kdir import KernelTree
from pmubuild.trees.toolchain import Host

DEFAULT_GCC = {"bullseye": 10, "bookworm": 12, "trixie": 14, "sid": 16}


def tree(arch="amd64", major=12, text=None) -> KernelTree:
    cc_text = text if text is not None else f"gcc-{major} (Debian {major}.2.0-1) {major}.2.0"
    return KernelTree(Path("/k"), arch, "6.1.0-57-" + arch, cc_text, major, {})


def test_host_native():
    host = Host("amd64", (2, 36), frozenset({"gcc-12"}))
    tc = toolchain.select(tree("amd64", 12), host, "amd64", (2, 34), DEFAULT_GCC)
    assert tc.chroot_suite is None and tc.where == "host"
    assert tc.cc == "gcc-12"
    assert tc.make_vars == ("ARCH=x86", "CC=gcc-12")
    assert "host has gcc-12" in tc.reason and "gcc-12 (Debian" in tc.reason


def test_host_cross():
    host = Host("amd64", (2, 36), frozenset({"aarch64-linux-gnu-gcc-12"}))
    tc = toolchain.select(tree("arm64", 12), host, "amd64", (2, 34), DEFAULT_GCC)
    assert tc.chroot_suite is None
    assert tc.cc == "aarch64-linux-gnu-gcc-12"
    assert tc.make_vars == ("ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-",
                            "CC=aarch64-linux-gnu-gcc-12")


def test_native_compiler_does_not_serve_cross_tree():
    host = Host("amd64", (2, 36), frozenset({"gcc-12"}))
    tc = toolchain.select(tree("arm64", 12), host, "amd64", (2, 34), DEFAULT_GCC)
    assert tc.chroot_suite == "bookworm"
    assert "host lacks aarch64-linux-gnu-gcc-12" in tc.reason


def test_chroot_when_glibc_too_old():
    # Even with gcc-14 on the host: trixie's kbuild tools need glibc 2.38.
    host = Host("amd64", (2, 36), frozenset({"gcc-14", "aarch64-linux-gnu-gcc-14"}))
    tc = toolchain.select(tree("arm64", 14), host, "amd64", (2, 38), DEFAULT_GCC)
    assert tc.chroot_suite == "trixie"
    assert tc.where == "chroot of Debian trixie"
    assert "glibc 2.38" in tc.reason and "2.36" in tc.reason
    assert tc.make_vars == ("ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-",
                            "CC=aarch64-linux-gnu-gcc-14")


def test_glibc_minor_compared_numerically():
    host = Host("amd64", (2, 36), frozenset({"gcc-12"}))
    # 2.4 < 2.36 numerically (not as a string).
    tc = toolchain.select(tree("amd64", 12), host, "amd64", (2, 4), DEFAULT_GCC)
    assert tc.chroot_suite is None


def test_chroot_when_host_lacks_gcc():
    host = Host("amd64", (2, 36), frozenset({"gcc-12"}))
    tc = toolchain.select(tree("amd64", 10), host, "amd64", (2, 28), DEFAULT_GCC)
    assert tc.chroot_suite == "bullseye"
    assert tc.cc == "gcc-10"
    assert "host lacks gcc-10" in tc.reason


def test_no_suite_has_that_gcc():
    host = Host("amd64", (2, 36), frozenset({"gcc-12"}))
    with pytest.raises(PipelineError) as e:
        toolchain.select(tree("amd64", 13), host, "amd64", (2, 34), DEFAULT_GCC)
    assert "no Debian suite has gcc-13" in str(e.value)
    assert "install gcc-13" in str(e.value)


def test_empty_suite_map_errors_when_host_cannot_build():
    host = Host("amd64", (2, 36), frozenset())
    with pytest.raises(PipelineError, match="no Debian suite"):
        toolchain.select(tree("amd64", 12), host, "amd64", (2, 34), {})


def test_kbuild_tools_for_another_arch():
    host = Host("amd64", (2, 36), frozenset({"aarch64-linux-gnu-gcc-12"}))
    with pytest.raises(PipelineError) as e:
        toolchain.select(tree("arm64", 12), host, "arm64", (2, 34), DEFAULT_GCC)
    msg = str(e.value)
    assert "built for arm64" in msg and "this machine is amd64" in msg
    assert "linux-kbuild" in msg and "scripts/basic/fixdep" in msg


def test_compiler_name():
    assert toolchain.compiler_name("amd64", "amd64", 14) == "gcc-14"
    assert toolchain.compiler_name("arm64", "amd64", 14) == "aarch64-linux-gnu-gcc-14"
    assert toolchain.compiler_name("amd64", "arm64", 12) == "x86_64-linux-gnu-gcc-12"


def _compile_tools(cc: str, root: Path) -> KernelTree:
    src = root / "t.c"
    src.write_text('#include <stdio.h>\nint main(void){puts("x");return 0;}\n')
    for rel in ("scripts/basic/fixdep", "scripts/mod/modpost"):
        out = root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([cc, "-O0", "-o", str(out), str(src)], check=True)
    return KernelTree(root, "amd64", "r", "", 12, {})


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no host gcc")
def test_kbuild_needs_native_elf(tmp_path):
    arch, glibc = toolchain.kbuild_needs(_compile_tools("gcc", tmp_path))
    assert arch == toolchain.host_info().arch
    # Linked against this machine's glibc: needs at least 2.2.5, at most what the host has.
    assert (2, 2) <= glibc <= toolchain.host_info().glibc


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None, reason="no cross gcc")
def test_kbuild_needs_cross_elf(tmp_path):
    arch, _ = toolchain.kbuild_needs(_compile_tools("aarch64-linux-gnu-gcc", tmp_path))
    assert arch == "arm64"


def test_kbuild_tool_not_elf(tmp_path):
    for rel in ("scripts/basic/fixdep", "scripts/mod/modpost"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("#!/bin/sh\n")
    with pytest.raises(PipelineError, match="not an ELF program"):
        toolchain.kbuild_needs(KernelTree(tmp_path, "amd64", "r", "", 12, {}))
