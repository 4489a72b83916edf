"""kdir.inspect and toolchain.choose against the 10 real Debian trees of the matrix."""

import shutil

import pytest

from pmubuild.modbuild import build
from pmubuild.trees import kdir, kernels, matrix, toolchain
from pmubuild.trees.apt import PrivateApt

pytestmark = pytest.mark.kernels

COMBOS = [(s, a) for s in matrix.SUITES for a in matrix.ARCHES]


@pytest.fixture(scope="module")
def apt():
    return PrivateApt()


@pytest.fixture(scope="module")
def default_gcc(apt):
    return build.default_gcc_by_suite(apt)


@pytest.mark.parametrize(("suite", "arch"), COMBOS, ids=[f"{s}-{a}" for s, a in COMBOS])
def test_real_tree(apt, default_gcc, suite, arch):
    fk = kernels.fetch(apt, matrix.SUITES[suite], arch)
    assert fk.suite == suite and fk.arch == arch
    assert fk.image.is_file()
    tree = kdir.inspect(fk.kdir)
    assert tree.arch == arch
    assert tree.release == fk.release
    assert tree.release.endswith(f"-{arch}")
    # What the kernel wants, read independently of KernelTree.cc_major.
    gcc_version = int(kdir.read_config(fk.kdir / ".config")["CONFIG_GCC_VERSION"])
    major = gcc_version // 10000
    assert tree.cc_major == major
    # The suite's own userland builds its kernels with its default gcc.
    assert default_gcc[matrix.SUITES[suite].userland] == major

    tc = toolchain.choose(tree, default_gcc)
    host = toolchain.host_info()
    _, kbuild_glibc = toolchain.kbuild_needs(tree)
    cc = ("" if arch == host.arch else f"{matrix.GNU_TRIPLET[arch]}-") + f"gcc-{major}"
    assert tc.cc == cc
    assert f"ARCH={matrix.KERNEL_ARCH[arch]}" in tc.make_vars
    assert (f"CROSS_COMPILE={matrix.GNU_TRIPLET[arch]}-" in tc.make_vars) == (arch != host.arch)
    if shutil.which(cc) and host.glibc >= kbuild_glibc:
        assert tc.chroot_suite is None, tc.reason
    else:
        assert tc.chroot_suite == matrix.SUITES[suite].userland, tc.reason
