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


# include/linux/vermagic.h as 6.1 has it (PREEMPT_BUILD tested first, so an RT kernel
# that also selects PREEMPT_BUILD says "preempt"); 6.12 tests PREEMPT_RT first; 7.x no
# longer includes the randstruct hash itself (compiler-version.h, forced by kbuild, does).
VERMAGIC_H = """\
#ifndef _LINUX_VERMAGIC_H
#define _LINUX_VERMAGIC_H
#ifndef INCLUDE_VERMAGIC
#error "This header can be included from kernel/module.c or *.mod.c only"
#endif
#include <generated/utsrelease.h>
#include <asm/vermagic.h>
#ifdef CONFIG_SMP
#define MODULE_VERMAGIC_SMP "SMP "
#else
#define MODULE_VERMAGIC_SMP ""
#endif
#ifdef CONFIG_{first}
#define MODULE_VERMAGIC_PREEMPT "{first_word} "
#elif defined(CONFIG_{second})
#define MODULE_VERMAGIC_PREEMPT "{second_word} "
#else
#define MODULE_VERMAGIC_PREEMPT ""
#endif
#ifdef CONFIG_MODULE_UNLOAD
#define MODULE_VERMAGIC_MODULE_UNLOAD "mod_unload "
#else
#define MODULE_VERMAGIC_MODULE_UNLOAD ""
#endif
#ifdef CONFIG_MODVERSIONS
#define MODULE_VERMAGIC_MODVERSIONS "modversions "
#else
#define MODULE_VERMAGIC_MODVERSIONS ""
#endif
#ifdef RANDSTRUCT
{randstruct_include}#define MODULE_RANDSTRUCT "RANDSTRUCT_" RANDSTRUCT_HASHED_SEED
#else
#define MODULE_RANDSTRUCT
#endif
#define VERMAGIC_STRING UTS_RELEASE " " MODULE_VERMAGIC_SMP MODULE_VERMAGIC_PREEMPT \\
	MODULE_VERMAGIC_MODULE_UNLOAD MODULE_VERMAGIC_MODVERSIONS MODULE_ARCH_VERMAGIC \\
	MODULE_RANDSTRUCT
#endif
"""
# Each arch header wants its compiler's predefine and not the host's, standing in for the
# arch headers that test __x86_64__/__aarch64__ (a host gcc expanding a cross tree).
ARCH_VERMAGIC_H = {
    "x86": """\
#if !defined(__x86_64__) || defined(__aarch64__)
#error not an x86_64 compiler
#endif
#ifdef CONFIG_X86_64
#elif defined CONFIG_MCORE2
#define MODULE_PROC_FAMILY "CORE2 "
#else
#error unknown processor family
#endif
#ifdef CONFIG_X86_32
# define MODULE_ARCH_VERMAGIC MODULE_PROC_FAMILY
#else
# define MODULE_ARCH_VERMAGIC ""
#endif
""",
    "arm64": """\
#if !defined(__aarch64__) || defined(__x86_64__)
#error not an aarch64 compiler
#endif
#define MODULE_ARCH_VERMAGIC\t"aarch64"
""",
}
COMPILER_VERSION_H = """\
#ifdef __LINUX_COMPILER_VERSION_H
#error "Please do not include <linux/compiler-version.h>. This is done by the build system."
#endif
#define __LINUX_COMPILER_VERSION_H
{randstruct}"""
RANDSTRUCT_INCLUDE = "#include <generated/randstruct_hash.h>\n"
KCONFIG_H = "#include <generated/autoconf.h>\n#define IS_ENABLED(option) 0\n"
PREEMPT_ORDER = {"6.1": ("PREEMPT_BUILD", "PREEMPT_RT"), "6.12": ("PREEMPT_RT", "PREEMPT_BUILD"),
                 "7.2": ("PREEMPT_RT", "PREEMPT_BUILD")}


def make_debian_tree(root: Path, config: dict[str, str], *, release: str = "6.1.0-9-rt-amd64",
                     header: str = "6.1", skip: tuple[str, ...] = ()) -> Path:
    """Debian's split headers: linux-headers-X-common holds include/ and arch/*/include,
    linux-headers-<release> the .config, generated headers and a Makefile including the
    former. config maps CONFIG_ names to values ("y" or a string). Returns the build tree."""
    first, second = PREEMPT_ORDER[header]
    words = {"PREEMPT_BUILD": "preempt", "PREEMPT_RT": "preempt_rt"}
    common = "linux-headers-common"
    config = {k: v for k, v in config.items() if v != "n"}  # as kconfig writes "not set"
    autoconf = "".join(f"#define {k} 1\n" if v == "y" else f'#define {k} "{v}"\n'
                       for k, v in config.items())
    files = {
        f"{common}/Makefile": "# the kernel's Makefile\n",
        f"{common}/include/linux/vermagic.h": VERMAGIC_H.format(
            first=first, first_word=words[first], second=second, second_word=words[second],
            randstruct_include="" if header == "7.2" else RANDSTRUCT_INCLUDE),
        f"{common}/include/linux/compiler-version.h": COMPILER_VERSION_H.format(
            randstruct="#ifdef RANDSTRUCT\n" + RANDSTRUCT_INCLUDE + "#endif\n"
            if header == "7.2" else ""),
        f"{common}/include/linux/kconfig.h": KCONFIG_H,
        f"{release}/Makefile": f"include ../{common}/Makefile\n",
        f"{release}/.config": "".join(f"{k}={v}\n" for k, v in config.items()),
        f"{release}/include/generated/autoconf.h": autoconf,
        f"{release}/include/generated/utsrelease.h": f'#define UTS_RELEASE "{release}"\n',
        f"{release}/Module.symvers": "",
    }
    for srcarch, text in ARCH_VERMAGIC_H.items():
        files[f"{common}/arch/{srcarch}/include/asm/vermagic.h"] = text
    write_files(root, files, skip)
    return root / release
