"""Inspect and validate a kernel build tree (KDIR): what it is, and what it lacks.

Accepts a Debian headers tree (any flavour, any arch, extracted by hand or by us) or a full
kernel build tree. Validation names the missing piece instead of letting make fail later.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.kbuild.kbuildfiles import (
    TreeError,
    kbuild_tools_problem,
    read_config,
    tree_arch,
    tree_release,
)


@dataclass(frozen=True)
class KernelTree:
    path: Path
    arch: str  # Debian arch name: amd64 or arm64
    release: str
    cc_text: str  # CONFIG_CC_VERSION_TEXT, e.g. "gcc-14 (Debian 14.2.0-19) 14.2.0"
    cc_major: int
    config: dict[str, str]

    @property
    def symvers(self) -> Path:
        return self.path / "Module.symvers"

    def tool(self, rel: str) -> Path:
        return self.path / rel


def _release(path: Path) -> str:
    try:
        return tree_release(path)
    except TreeError as e:
        raise PipelineError(str(e)) from None


def _makefile_path_problem(path: Path) -> str | None:
    """Debian's arch headers Makefile names other trees by absolute path: the common
    headers (include /usr/src/linux-headers-X-common/Makefile) and, from 7.x, itself
    (KBUILD_OUTPUT=/usr/src/linux-headers-X-ARCH). Both must exist where named."""
    text = (path / "Makefile").read_text(errors="replace")
    refs = [(m.group(1), "includes") for m in re.finditer(r"^include\s+(\S+)$", text, re.M)]
    refs += [(m.group(1), "sets KBUILD_OUTPUT to")
             for m in re.finditer(r"^KBUILD_OUTPUT\s*:?=\s*(\S+)$", text, re.M)]
    for ref, verb in refs:
        if "$" in ref:
            continue  # make variables ($(srctree)/...): a full tree's own includes
        target = Path(ref)
        full = target if target.is_absolute() else path / target
        if full.exists():
            continue
        named = target.parent if target.name == "Makefile" else target
        hint = ""
        if target.is_absolute() and (path.parent / named.name).is_dir():
            hint = (f"; the tree it names sits beside this one: replace {named} with "
                    f"{path.parent / named.name} in {path}/Makefile")
        elif named.name.endswith("-common"):
            hint = f"; extract the {named.name} package beside this tree"
        return f"{path}/Makefile {verb} {target}, which does not exist{hint}"
    return None


def inspect(path_str: str | Path) -> KernelTree:
    """Validate `path` as a kernel build tree for external modules, or raise PipelineError."""
    path = Path(path_str).expanduser().resolve()
    if not path.is_dir():
        raise PipelineError(f"--kdir {path}: no such directory")
    missing = [f for f in ("Makefile", ".config") if not (path / f).exists()]
    if missing:
        raise PipelineError(f"--kdir {path} is not a kernel build tree: missing "
                            f"{' and '.join(missing)} (want e.g. /lib/modules/RELEASE/build "
                            "or /usr/src/linux-headers-RELEASE)")
    problem = _makefile_path_problem(path)
    if problem:
        raise PipelineError(problem)
    config = read_config(path / ".config")
    arch = tree_arch(config)
    if arch is None:
        raise PipelineError(f"{path}/.config is for an architecture simple-pmu does not "
                            "support (need CONFIG_X86_64 or CONFIG_ARM64)")
    for rel in ("include/generated/autoconf.h", "Module.symvers"):
        if not (path / rel).exists():
            raise PipelineError(f"{path}: {rel} is missing; run 'make modules_prepare' "
                                "(and a full build for Module.symvers) in that tree")
    problem = kbuild_tools_problem(path)
    if problem:
        raise PipelineError(problem)
    cc_text = config.get("CONFIG_CC_VERSION_TEXT", "")
    if config.get("CONFIG_CC_IS_CLANG") == "y":
        raise PipelineError(f"{path}: kernel built with clang ({cc_text}); only gcc-built "
                            "kernels are supported")
    gcc_version = config.get("CONFIG_GCC_VERSION", "")
    if not gcc_version.isdigit() or int(gcc_version) == 0:
        raise PipelineError(f"{path}/.config has no CONFIG_GCC_VERSION: cannot tell "
                            "which compiler the kernel wants")
    return KernelTree(path, arch, _release(path), cc_text, int(gcc_version) // 10000, config)
