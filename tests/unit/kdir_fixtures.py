"""Small hand-made kernel build trees for kdir and toolchain tests."""

from pathlib import Path

CONFIG_ARM64 = """\
CONFIG_CC_VERSION_TEXT="gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0"
CONFIG_CC_IS_GCC=y
CONFIG_GCC_VERSION=120200
CONFIG_ARM64=y
CONFIG_PERF_EVENTS=y
# CONFIG_X86_64 is not set
"""


def make_tree(root: Path, *, config: str = CONFIG_ARM64, makefile: str = "# kernel\n",
              release: str = "6.1.0-57-arm64", tools: tuple[str, ...] = (
                  "scripts/basic/fixdep", "scripts/mod/modpost"),
              skip: tuple[str, ...] = ()) -> Path:
    """A tree that passes kdir.inspect unless `skip` names files to leave out."""
    files = {
        "Makefile": makefile,
        ".config": config,
        "include/generated/autoconf.h": "#define CONFIG_ARM64 1\n",
        "Module.symvers": "0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n",
        "include/generated/utsrelease.h": f'#define UTS_RELEASE "{release}"\n',
    }
    for t in tools:
        files[t] = "\x7fELF"
    return write_files(root, files, skip)


def write_files(root: Path, files: dict[str, str], skip=()) -> Path:
    """Create root with each relative path holding its text, except those in skip."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        if rel in skip:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root
