"""kdir.inspect on small fixture trees: each missing piece is named."""

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.trees import kdir

from ..kbuild.kdir_fixtures import CONFIG_ARM64, make_tree


def error(path) -> str:
    with pytest.raises(PipelineError) as e:
        kdir.inspect(path)
    return str(e.value)


def test_good_tree(tmp_path):
    tree = kdir.inspect(make_tree(tmp_path / "t"))
    assert tree.path == (tmp_path / "t").resolve()
    assert tree.arch == "arm64"
    assert tree.release == "6.1.0-57-arm64"
    assert tree.cc_major == 12
    assert tree.cc_text == "gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0"
    assert tree.config["CONFIG_PERF_EVENTS"] == "y"
    assert "CONFIG_X86_64" not in tree.config
    assert tree.symvers == tree.path / "Module.symvers"


def test_x86_tree(tmp_path):
    config = CONFIG_ARM64.replace("CONFIG_ARM64=y", "CONFIG_X86_64=y").replace(
        "120200", "140200")
    tree = kdir.inspect(make_tree(tmp_path / "t", config=config))
    assert tree.arch == "amd64" and tree.cc_major == 14


def test_missing_dir(tmp_path):
    msg = error(tmp_path / "nope")
    assert "no such directory" in msg and "nope" in msg


def test_not_a_kernel_tree(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    msg = error(tmp_path / "etc")
    assert "not a kernel build tree" in msg
    assert "Makefile" in msg and ".config" in msg


def test_only_config_missing(tmp_path):
    msg = error(make_tree(tmp_path / "t", skip=(".config",)))
    assert "missing .config" in msg and "Makefile and" not in msg


COMMON = "linux-headers-6.1.0-57-common"


def debian_makefile(root):
    """The arch headers' Makefile as Debian ships it, naming the common headers by absolute
    path; under a per-test root instead of /usr/src, so what the host has installed in
    /usr/src cannot change the outcome."""
    return f"include {root}/usr/src/{COMMON}/Makefile\n"


def test_missing_common_makefile_with_sibling_hint(tmp_path):
    root = tmp_path / "root"
    tree = make_tree(tmp_path / "linux-headers-6.1.0-57-cloud-amd64",
                     makefile=debian_makefile(root))
    (tmp_path / COMMON).mkdir()
    (tmp_path / COMMON / "Makefile").write_text("# top\n")
    msg = error(tree)
    assert f"includes {root}/usr/src/{COMMON}/Makefile, which does not exist" in msg
    # The hint points at the sibling directory (by relative or absolute path).
    hint = msg.split("which does not exist", 1)[1]
    assert "beside" in hint
    assert f"../{COMMON}" in hint or str(tmp_path / COMMON) in hint
    # Pointing the line at the sibling, as the hint says, makes the tree valid.
    (tree / "Makefile").write_text(f"include {tmp_path / COMMON}/Makefile\n")
    assert kdir.inspect(tree).release == "6.1.0-57-arm64"


def test_missing_common_makefile_without_sibling(tmp_path):
    root = tmp_path / "root"
    tree = make_tree(tmp_path / "t", makefile=debian_makefile(root))
    msg = error(tree)
    assert f"{root}/usr/src/{COMMON}/Makefile" in msg
    assert f"extract the {COMMON} package" in msg


def test_common_makefile_present_where_named(tmp_path):
    """The counterpart of the two above: the check looks where the Makefile points (here
    the injected root), so installing the common headers there is what satisfies it."""
    root = tmp_path / "root"
    tree = make_tree(tmp_path / "t", makefile=debian_makefile(root))
    assert "does not exist" in error(tree)
    (root / "usr" / "src" / COMMON).mkdir(parents=True)
    (root / "usr" / "src" / COMMON / "Makefile").write_text("# top\n")
    assert kdir.inspect(tree).release == "6.1.0-57-arm64"


def test_relative_include_missing(tmp_path):
    tree = make_tree(tmp_path / "t", makefile=f"include ../{COMMON}/Makefile\n")
    msg = error(tree)
    assert f"../{COMMON}/Makefile" in msg and "does not exist" in msg


# A full kernel build tree's top Makefile has `include $(srctree)/scripts/Kbuild.include`
# (and arch/$(SRCARCH)/Makefile) at column 0: those are make's, not paths to check.
def test_full_kernel_tree_with_make_variables_in_includes(tmp_path):
    top = ("VERSION = 6\nPATCHLEVEL = 1\n"
           "include $(srctree)/scripts/Kbuild.include\n"
           "include $(srctree)/scripts/subarch.include\n"
           "include $(srctree)/arch/$(SRCARCH)/Makefile\n")
    tree = make_tree(tmp_path / "linux", makefile=top)
    for rel in ("scripts/Kbuild.include", "scripts/subarch.include", "arch/arm64/Makefile"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("# make\n")
    assert kdir.inspect(tree).arch == "arm64"


def test_unsupported_arch(tmp_path):
    config = CONFIG_ARM64.replace("CONFIG_ARM64=y", "CONFIG_RISCV=y")
    msg = error(make_tree(tmp_path / "t", config=config))
    assert "architecture simple-pmu does not support" in msg
    assert "CONFIG_X86_64" in msg and "CONFIG_ARM64" in msg


def test_arm64_not_set_is_unsupported(tmp_path):
    config = CONFIG_ARM64.replace("CONFIG_ARM64=y", "# CONFIG_ARM64 is not set")
    assert "does not support" in error(make_tree(tmp_path / "t", config=config))


@pytest.mark.parametrize("rel", ["Module.symvers", "include/generated/autoconf.h"])
def test_missing_prepared_files(tmp_path, rel):
    msg = error(make_tree(tmp_path / "t", skip=(rel,)))
    assert f"{rel} is missing" in msg and "modules_prepare" in msg


def test_missing_kbuild_tools(tmp_path):
    msg = error(make_tree(tmp_path / "t", tools=()))
    assert "scripts/basic/fixdep" in msg and "scripts/mod/modpost" in msg
    assert "linux-kbuild" in msg


def test_only_modpost_missing(tmp_path):
    msg = error(make_tree(tmp_path / "t", tools=("scripts/basic/fixdep",)))
    assert "scripts/mod/modpost" in msg and "fixdep" not in msg


def test_clang_kernel(tmp_path):
    config = ('CONFIG_CC_VERSION_TEXT="Debian clang version 16.0.6"\nCONFIG_CC_IS_CLANG=y\n'
              "CONFIG_GCC_VERSION=0\nCONFIG_CLANG_VERSION=160006\nCONFIG_ARM64=y\n")
    msg = error(make_tree(tmp_path / "t", config=config))
    assert "clang" in msg and "Debian clang version 16.0.6" in msg


def test_no_gcc_version(tmp_path):
    config = CONFIG_ARM64.replace("CONFIG_GCC_VERSION=120200\n", "")
    assert "CONFIG_GCC_VERSION" in error(make_tree(tmp_path / "t", config=config))


def test_release_prefers_utsrelease(tmp_path):
    tree = make_tree(tmp_path / "t", release="6.1.0-57-cloud-amd64")
    (tree / ".kernelvariables").write_text("override KERNELRELEASE = from-kernelvariables\n")
    (tree / "include/config").mkdir(parents=True)
    (tree / "include/config/kernel.release").write_text("6.1.192\n")
    assert kdir.inspect(tree).release == "6.1.0-57-cloud-amd64"
    (tree / "include/generated/utsrelease.h").unlink()
    assert kdir.inspect(tree).release == "from-kernelvariables"
    (tree / ".kernelvariables").unlink()
    assert kdir.inspect(tree).release == "6.1.192"
    (tree / "include/config/kernel.release").unlink()
    msg = error(tree)
    assert "cannot tell the kernel release" in msg and "utsrelease.h" in msg
