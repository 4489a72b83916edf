"""Run arm64 Debian chroots on this amd64 host: qemu-user through the kernel's binfmt_misc.

The handler is registered with flag F (the kernel opens the interpreter at registration),
so it works inside a chroot that has no QEMU of its own. Registration is global to the
running kernel and idempotent: an existing enabled aarch64 handler with F is kept.
"""

import os
from pathlib import Path

from pmubuild.common.errors import PipelineError

BINFMT = Path("/proc/sys/fs/binfmt_misc")
NAME = "qemu-aarch64"
INTERPRETER = Path("/usr/bin/qemu-aarch64-static")
# ELF64, little-endian, ET_EXEC or ET_DYN, EM_AARCH64 (as QEMU's qemu-binfmt-conf.sh).
MAGIC = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
MASK = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"


def _registered(entry: Path) -> bool:
    if not entry.exists():
        return False
    text = entry.read_text()
    return text.startswith("enabled") and any(
        line.startswith("flags:") and "F" in line for line in text.splitlines())


def ensure_aarch64() -> None:
    """arm64 binaries run on this host, in chroots too; or a PipelineError saying why not."""
    entry = BINFMT / NAME
    if _registered(entry):
        return
    if not INTERPRETER.exists():
        raise PipelineError(f"{INTERPRETER} is missing: apt-get install qemu-user-static "
                            "(./devenv installs it); arm64 chroots need it")
    if not (BINFMT / "register").exists():
        rc = os.system(f"mount -t binfmt_misc binfmt_misc {BINFMT} 2>/dev/null")
        if rc != 0 or not (BINFMT / "register").exists():
            raise PipelineError(f"binfmt_misc is not available at {BINFMT} (mount -t "
                                "binfmt_misc failed): arm64 chroots cannot run here")
    if entry.exists():  # registered without F, or disabled: replace it with ours
        entry.write_text("-1")
    try:
        (BINFMT / "register").write_text(f":{NAME}:M::{MAGIC}:{MASK}:{INTERPRETER}:F")
    except OSError as e:
        raise PipelineError(f"cannot register {NAME} in {BINFMT}: {e}") from e
    if not _registered(entry):
        raise PipelineError(f"{NAME} registered in {BINFMT} but not enabled with flag F")
