"""Read what a kernel build tree says about itself: .config, release, Module.symvers.

Standard library only: compat.py and modverify.py import it, and DKMS runs both as plain
scripts from the package's directory on a user's machine.
"""

import re
from dataclasses import dataclass
from pathlib import Path

ARCH_BY_CONFIG = (("CONFIG_ARM64", "arm64"), ("CONFIG_X86_64", "amd64"))
_CONFIG_LINE = re.compile(r"^(CONFIG_[A-Z0-9_]+)=(.*)$")


class TreeError(Exception):
    """The tree lacks what the question needs; the message names the file."""


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
