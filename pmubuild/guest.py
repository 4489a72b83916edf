"""The test guest's initramfs: static busybox, the module, the in-guest tests and programs."""

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import cache, cpio
from .apt import PrivateApt
from .errors import PipelineError
from .matrix import GNU_TRIPLET

REPO = Path(__file__).resolve().parents[1]
GUEST_TESTS = REPO / "tests" / "guest"
BUSYBOX_SUITE = "bookworm"


@dataclass
class GuestSpec:
    arch: str
    release: str
    module: Path | None  # installed as /lib/modules/RELEASE/extra/simple-pmu.ko, not loaded
    mode: str = "test"  # "test": run the in-guest suite; "cmd": run `command` in /work
    command: str = ""
    add: list[Path] = field(default_factory=list)  # copied into /work


def busybox(apt: PrivateApt, arch: str) -> Path:
    """A static busybox for `arch`, from Debian's busybox-static, cached by version."""
    found = apt.find("busybox-static", [BUSYBOX_SUITE, f"{BUSYBOX_SUITE}-security"], arch)
    if not found:
        apt.update()
        found = apt.find("busybox-static", [BUSYBOX_SUITE, f"{BUSYBOX_SUITE}-security"], arch)
    if not found:
        raise PipelineError(f"busybox-static:{arch} not found in Debian {BUSYBOX_SUITE}")
    pkg = found[-1]
    target = cache.subdir("guest") / f"busybox-{arch}-{pkg.version}"
    binary = target / "bin" / "busybox"
    if binary.exists():
        return binary
    (deb,) = apt.download([pkg])
    with cache.atomic_dir(target) as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    return binary


def compile_programs(arch: str, out_dir: Path) -> list[Path]:
    """Build tests/guest/src/*.c as static binaries for the guest's arch."""
    cc = "gcc" if arch == "amd64" else f"{GNU_TRIPLET[arch]}-gcc"
    if not shutil.which(cc):
        raise PipelineError(f"{cc} not found: needed to build the in-guest test programs "
                            "(./devenv installs it)")
    out_dir.mkdir(parents=True, exist_ok=True)
    built = []
    for src in sorted((GUEST_TESTS / "src").glob("*.c")):
        exe = out_dir / src.stem
        if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
            proc = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-static",
                                   "-I", str(REPO / "include"), "-o", str(exe), str(src)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise PipelineError(f"compiling {src.name} for {arch} failed:\n{proc.stderr}")
        built.append(exe)
    return built


def test_scripts(arch: str) -> list[Path]:
    scripts = [*(GUEST_TESTS / "common").glob("*.sh"), *(GUEST_TESTS / arch).glob("*.sh")]
    return sorted(scripts, key=lambda p: p.name)


def initramfs(spec: GuestSpec, apt: PrivateApt, out: Path) -> Path:
    bb = busybox(apt, spec.arch)
    entries = [cpio.directory(d) for d in ("bin", "sbin", "etc", "lib", "lib/modules",
                                           f"lib/modules/{spec.release}", "tests",
                                           "tests/bin", "work", "root")]
    entries.append(cpio.file("bin/busybox", bb.read_bytes(), executable=True))
    entries.append(cpio.symlink("bin/sh", "busybox"))
    entries.append(cpio.file("init", (GUEST_TESTS / "init").read_bytes(), executable=True))
    if spec.module:
        entries.append(cpio.directory(f"lib/modules/{spec.release}/extra"))
        entries.append(cpio.file(f"lib/modules/{spec.release}/extra/simple-pmu.ko",
                                 spec.module.read_bytes()))
        # What depmod would write for one module without dependencies.
        entries.append(cpio.file(f"lib/modules/{spec.release}/modules.dep",
                                 b"extra/simple-pmu.ko:\n"))
    for prog in compile_programs(spec.arch, REPO / "build" / f"guest-{spec.arch}"):
        entries.append(cpio.file(f"tests/bin/{prog.name}", prog.read_bytes(), executable=True))
    entries.append(cpio.file("tests/lib.sh", (GUEST_TESTS / "common" / "lib.sh").read_bytes()))
    if spec.mode == "test":
        for script in test_scripts(spec.arch):
            if script.name != "lib.sh":
                entries.append(cpio.file(f"tests/{script.name}", script.read_bytes()))
    else:
        entries.append(cpio.file("cmd.sh", spec.command.encode() + b"\n"))
    for path in spec.add:
        if not path.exists():
            raise PipelineError(f"--add {path}: no such file or directory")
        cpio.add_tree(entries, path, f"work/{path.name}")
    return cpio.write_gz(entries, out)
