"""Read what a kernel build tree says about itself: .config, release, Module.symvers,
the vermagic its own headers give a module.

Standard library only (plus a C preprocessor for vermagic): compat.py and modverify.py
import it, and DKMS runs both as plain scripts from the package's directory on a user's
machine.
"""

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ARCH_BY_CONFIG = (("CONFIG_ARM64", "arm64"), ("CONFIG_X86_64", "amd64"))
SRCARCH = {"amd64": "x86", "arm64": "arm64"}
# -undef drops the host compiler's own predefines (a host x86_64 gcc expanding an arm64
# tree's headers); kbuild's compiler for that arch would define these.
ARCH_PREDEFINES = {"amd64": ("__x86_64__",), "arm64": ("__aarch64__",)}
PREPROCESSORS = (("gcc", "-E"), ("cc", "-E"), ("cpp",), ("clang", "-E"))
# What kbuild's *.mod.c does before it expands VERMAGIC_STRING into MODULE_INFO(vermagic).
VERMAGIC_PROBE = "#include <linux/vermagic.h>\nVERMAGIC_STRING\n"
_C_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_CONFIG_LINE = re.compile(r"^(CONFIG_[A-Z0-9_]+)=(.*)$")


# kbuild host tools an external module build runs (Debian: the linux-kbuild-X package).
KBUILD_TOOLS = ("scripts/basic/fixdep", "scripts/mod/modpost")


class TreeError(Exception):
    """The tree lacks what the question needs; the message names the file."""


def kbuild_tools_problem(kdir: Path) -> str | None:
    """Why make would fail for lack of the tree's kbuild tools, or None."""
    absent = [t for t in KBUILD_TOOLS if not (kdir / t).exists()]
    if not absent:
        return None
    return (f"{kdir}: kbuild tools missing: {', '.join(absent)}; on Debian install the "
            "linux-kbuild-X package for this machine's architecture (headers need it), "
            "in a full tree run 'make modules_prepare'")


@dataclass(frozen=True)
class Export:
    """One Module.symvers line: CRC, symbol, where it lives, EXPORT_SYMBOL[_GPL], namespace."""
    crc: int
    symbol: str
    module: str  # "vmlinux" or the exporting module's path without .ko
    kind: str
    namespace: str

    @property
    def gpl_only(self) -> bool:
        return self.kind.endswith("_GPL")

    @property
    def only_for(self) -> tuple[str, ...] | None:
        """Modules an EXPORT_SYMBOL_FOR_MODULES (6.19+) export is restricted to, else None."""
        if not self.namespace.startswith("module:"):
            return None
        return tuple(self.namespace.removeprefix("module:").split(","))


def read_config(path: Path) -> dict[str, str]:
    config = {}
    for line in path.read_text(errors="replace").splitlines():
        m = _CONFIG_LINE.match(line)
        if m:
            config[m.group(1)] = m.group(2).strip('"')
    return config


def tree_arch(config: dict[str, str]) -> str | None:
    return next((a for sym, a in ARCH_BY_CONFIG if config.get(sym) == "y"), None)


def tree_release(path: Path) -> str:
    """The release modules must carry in vermagic: UTS_RELEASE first (Debian's
    include/config/kernel.release holds the upstream version, not the ABI name)."""
    utsrelease = path / "include" / "generated" / "utsrelease.h"
    if utsrelease.exists():
        m = re.search(r'UTS_RELEASE "([^"]+)"', utsrelease.read_text())
        if m:
            return m.group(1)
    kv = path / ".kernelvariables"
    if kv.exists():
        m = re.search(r"KERNELRELEASE\s*=\s*(\S+)", kv.read_text())
        if m:
            return m.group(1)
    rel = path / "include" / "config" / "kernel.release"
    if rel.exists():
        return rel.read_text().strip()
    raise TreeError(f"{path}: cannot tell the kernel release (no include/generated/"
                    "utsrelease.h, .kernelvariables or include/config/kernel.release): "
                    "is this a prepared kernel tree (make modules_prepare)?")


def read_symvers(path: Path) -> dict[str, Export]:
    """Module.symvers of 5.10+: CRC, symbol, module, export type and namespace, tab-separated."""
    if not path.exists():
        raise TreeError(f"{path} not found (a tree for external modules must have it)")
    exports = {}
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 4:
            raise TreeError(f"{path}:{n}: not a Module.symvers line: {line[:80]!r}")
        try:
            crc = int(cols[0], 16)
        except ValueError:
            raise TreeError(f"{path}:{n}: bad CRC {cols[0]!r}") from None
        ns = cols[4] if len(cols) > 4 else ""
        exports[cols[1]] = Export(crc, cols[1], cols[2], cols[3], ns)
    return exports


def source_roots(kdir: Path) -> list[Path]:
    """Where headers live: the build tree itself, then the source tree its Makefile includes
    (Debian's linux-headers-X-common, or the source of an O= build)."""
    roots = [kdir]
    mk = kdir / "Makefile"
    if mk.exists():
        for m in re.finditer(r"^include\s+(\S+)/Makefile$", mk.read_text(errors="replace"), re.M):
            src = Path(m.group(1))
            src = src if src.is_absolute() else kdir / src
            if "$" not in m.group(1) and src.is_dir():
                roots.append(src.resolve())
    return roots


def tree_vermagic(kdir: Path, config: dict[str, str], arch: str) -> str:
    """The vermagic a module built against kdir carries: VERMAGIC_STRING of the tree's own
    include/linux/vermagic.h, expanded by the C preprocessor with the tree's generated
    headers (autoconf.h, utsrelease.h) and arch headers, as kbuild's *.mod.c expands it."""
    roots = source_roots(kdir)
    found = [r for r in roots if (r / "include" / "linux" / "vermagic.h").is_file()]
    if not found:
        raise TreeError(f"{kdir}: no include/linux/vermagic.h in {', '.join(map(str, roots))}"
                        ": cannot tell which vermagic this kernel expects")
    autoconf = kdir / "include" / "generated" / "autoconf.h"
    if not autoconf.is_file():
        raise TreeError(f"{autoconf} not found: is this a prepared kernel tree "
                        "(make modules_prepare)?")
    # The kernel's own compiler first (what kbuild runs: Debian's headers name gcc-N, and
    # a DKMS machine may have no plain gcc), then the usual names.
    own = config.get("CONFIG_CC_VERSION_TEXT", "").strip('"').split(" ", 1)[0]
    candidates = ([(own, "-E")] if own else []) + list(PREPROCESSORS)
    cpp = next(([shutil.which(c[0]) or c[0], *c[1:]] for c in candidates
                if shutil.which(c[0])), None)
    if cpp is None:
        names = ", ".join(c[0] for c in candidates)
        raise TreeError(f"no C preprocessor ({names}) on PATH: needed to expand "
                        f"{found[0]}/include/linux/vermagic.h")
    cmd = [*cpp, "-P", "-undef", "-nostdinc", "-x", "c", "-D__KERNEL__", "-DINCLUDE_VERMAGIC",
           *(f"-D{d}" for d in ARCH_PREDEFINES[arch]), *_randstruct_flags(config),
           *(f"-I{d}" for d in _include_dirs(roots, SRCARCH[arch])),
           *_forced_includes(roots, autoconf), "-"]
    try:
        proc = subprocess.run(cmd, input=VERMAGIC_PROBE, capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TreeError(f"{cpp[0]}: {e}") from None
    if proc.returncode != 0:
        errors = [ln.strip() for ln in proc.stderr.splitlines() if "error:" in ln]
        raise TreeError(f"{kdir}: {' '.join(cpp)} could not expand VERMAGIC_STRING of "
                        f"{found[0]}/include/linux/vermagic.h: "
                        f"{errors[0] if errors else f'exit {proc.returncode}'}")
    return _c_string(proc.stdout, kdir)


def _include_dirs(roots: list[Path], srcarch: str) -> list[Path]:
    """kbuild's LINUXINCLUDE order: arch headers first, then include/, each over every
    root (the flavour's build tree holds generated headers, -common the sources)."""
    arch_dirs = ("include", "include/generated", "include/uapi", "include/generated/uapi")
    dirs = [r / "arch" / srcarch / d for d in arch_dirs for r in roots]
    dirs += [r / d for d in ("include", "include/uapi", "include/generated/uapi") for r in roots]
    return [d for d in dirs if d.is_dir()]


def _forced_includes(roots: list[Path], autoconf: Path) -> list[str]:
    """kbuild's LINUXINCLUDE ends with -include compiler-version.h (5.13+; from 7.x the one
    that brings in the randstruct seed's hash) and -include kconfig.h; before kconfig.h
    existed, autoconf.h was included directly."""
    flags = []
    for name in ("compiler-version.h", "kconfig.h"):
        header = next((r / "include" / "linux" / name for r in roots
                       if (r / "include" / "linux" / name).is_file()), None)
        if header is not None:
            flags += ["-include", str(header)]
    return flags or ["-include", str(autoconf)]


def _randstruct_flags(config: dict[str, str]) -> list[str]:
    """RANDSTRUCT (6.x+) and RANDSTRUCT_PLUGIN (5.x) come from the compiler command line,
    not from autoconf.h; the seed's hash header the tree's own headers include under them."""
    if "y" not in (config.get("CONFIG_RANDSTRUCT"), config.get("CONFIG_GCC_PLUGIN_RANDSTRUCT")):
        return []
    return ["-DRANDSTRUCT", "-DRANDSTRUCT_PLUGIN"]


def _c_string(text: str, kdir: Path) -> str:
    """Adjacent C string literals joined; anything else left means a macro the tree's
    headers did not define."""
    rest = _C_STRING.sub(" ", text).split()
    if rest:
        raise TreeError(f"{kdir}: VERMAGIC_STRING did not expand to a string: "
                        f"{' '.join(rest)[:120]!r} is left undefined by the tree's headers")
    parts = _C_STRING.findall(text)
    if not parts:
        raise TreeError(f"{kdir}: VERMAGIC_STRING expanded to nothing")
    return "".join(p.encode().decode("unicode_escape") for p in parts)
