"""Kernels built here from Debian's linux-source (the version checkpatch comes from).

Debian's kernel packages are what users run, but some tests need a kernel Debian does not
ship: one that enforces module signatures with a test certificate, one with the kernel's
debuggers. Each is tinyconfig plus a fragment of options; an option that olddefconfig drops
(an unmet dependency does so silently) fails the build. Cached by content: source version,
arch, fragment and whatever else the caller names.
"""

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say, step
from pmubuild.kbuild.kbuildfiles import read_config, tree_release
from pmubuild.modbuild import checkpatch
from pmubuild.trees import cache
from pmubuild.trees.apt import PrivateApt
from pmubuild.trees.matrix import GNU_TRIPLET, KERNEL_ARCH

# What any test guest needs on top of tinyconfig (busybox init, an initramfs, our module
# loaded and unloaded, perf, CPU hotplug), each =y.
GUEST_ALL = (
    "64BIT", "SMP", "PRINTK", "TTY", "BLK_DEV_INITRD", "RD_GZIP", "PROC_FS", "SYSFS",
    "DEVTMPFS", "DEVTMPFS_MOUNT", "BINFMT_ELF", "BINFMT_SCRIPT", "MULTIUSER",
    "MODULES", "MODULE_UNLOAD", "PERF_EVENTS", "HOTPLUG_CPU", "HIGH_RES_TIMERS",
)
GUEST_ARCH = {
    # Without ACPI and PCI QEMU's pc machine shows one CPU and poweroff hangs.
    "amd64": ("ACPI", "PCI", "SERIAL_8250", "SERIAL_8250_CONSOLE"),
    # PL011 is the virt machine's console, PSCI brings up CPUs and powers off.
    "arm64": ("SERIAL_AMBA_PL011", "SERIAL_AMBA_PL011_CONSOLE", "ARM_PSCI_FW", "ARM_PMU",
              "HW_PERF_EVENTS"),
}
IMAGE = {"amd64": "arch/x86/boot/bzImage", "arm64": "arch/arm64/boot/Image"}
TARGET = {"amd64": "bzImage", "arm64": "Image"}
# The extracted source tree's cache directory: where the first self-built kernel (the
# signature-enforcing one) put it, kept so that warm caches stay warm.
SOURCE_CACHE = "sigkernel"


@dataclass(frozen=True)
class SelfKernel:
    arch: str
    release: str
    kdir: Path  # O= build tree, ready for external modules
    image: Path


def config_lines(options: tuple[str, ...], values: dict[str, str] | None = None,
                 unset: tuple[str, ...] = ()) -> list[str]:
    """A fragment: each option =y, those of `values` =value, those of `unset` off."""
    lines = [f"CONFIG_{o}=y" for o in options]
    lines += [f"CONFIG_{o}={v}" for o, v in (values or {}).items()]
    lines += [f"# CONFIG_{o} is not set" for o in unset]
    return lines


def lost_options(frag: str, config: dict[str, str]) -> list[str]:
    """The fragment's lines the final .config does not honour (set, valued or unset)."""
    lost = []
    for ln in frag.splitlines():
        if ln.startswith("# CONFIG_") and ln.endswith(" is not set"):
            if config.get(ln[2:-len(" is not set")]) not in (None, "n"):
                lost.append(ln)
        elif ln.startswith("CONFIG_"):
            name, value = ln.split("=", 1)
            if config.get(name) != value.strip('"'):
                lost.append(ln)
    return lost


def source(apt: PrivateApt) -> tuple[str, Path]:
    """(version, extracted source tree) of Debian's linux-source-6.1, extracted once."""
    pkg = checkpatch.source_package(apt)
    final = cache.subdir(SOURCE_CACHE) / f"src-{pkg.version}"
    tree = final / "linux"
    if (tree / "Makefile").exists():
        return pkg.version, tree
    # Two runs at once (a CI run beside a developer's) extract it once, and neither
    # deletes the other's scratch directory as stale.
    with cache.locked("sigkernel-src"):
        if (tree / "Makefile").exists():
            return pkg.version, tree
        cache.remove_stale_partials(final.parent, final.name)
        cache.ensure_free_space(final.parent, 2500, f"the {pkg.name} source tree")
        (deb,) = apt.download([pkg])
        with step(f"extracting {pkg.name} {pkg.version} (1.5 GB)"), \
                cache.atomic_dir(final) as tmp:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp / "deb")], check=True)
            (tarball,) = (tmp / "deb" / "usr" / "src").glob("linux-source-*.tar.xz")
            (tmp / "linux").mkdir()
            subprocess.run(["tar", "-xJf", str(tarball), "-C", str(tmp / "linux"),
                            "--strip-components=1"], check=True)
            shutil.rmtree(tmp / "deb")
    return pkg.version, tree


def _make(src: Path, out: Path, arch: str, *targets: str, log: Path) -> None:
    argv = ["make", "-C", str(src), f"O={out}", f"ARCH={KERNEL_ARCH[arch]}", "-j2"]
    if arch != "amd64":
        argv.append(f"CROSS_COMPILE={GNU_TRIPLET[arch]}-")
    with open(log, "a") as f:
        proc = subprocess.run([*argv, *targets], stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-30:]
        raise PipelineError(f"kernel build ({' '.join(targets)}) failed; log {log}:\n  "
                            + "\n  ".join(tail))


@dataclass(frozen=True)
class Recipe:
    """One kind of self-built kernel: its cache directory, fragment and what it is."""

    name: str  # cache subdirectory, e.g. "sigkernel"
    what: str  # "a kernel that enforces module signatures", for progress and errors
    frag: str  # the fragment appended to tinyconfig
    need_mb: int  # free space its build tree takes
    minutes: str  # how long a cold build takes here, for progress ("3-4")
    digest_extra: str = ""  # more content the cache key depends on (a certificate)


def ensure(apt: PrivateApt, arch: str, recipe: Recipe) -> SelfKernel:
    """The recipe's kernel for `arch`, built once per content."""
    version, src = source(apt)
    parts = [version, arch, recipe.frag] + ([recipe.digest_extra] if recipe.digest_extra
                                            else [])
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:10]
    final = cache.subdir(recipe.name) / f"{arch}-{version}-{digest}"
    with cache.locked(f"{recipe.name}-{arch}"):
        if not (final / "out" / IMAGE[arch]).exists():
            cache.remove_stale_partials(final.parent, final.name)
            cache.ensure_free_space(final.parent, recipe.need_mb, f"{recipe.what} ({arch})")
            with step(f"building {recipe.what} for {arch} (linux-source {version}, "
                      f"tinyconfig; about {recipe.minutes} minutes once)"), \
                    cache.atomic_dir(final) as tmp:
                _build(src, tmp, arch, recipe)
    out = final / "out"
    return SelfKernel(arch, tree_release(out), out, out / IMAGE[arch])


def _build(src: Path, entry: Path, arch: str, recipe: Recipe) -> None:
    out = entry / "out"
    out.mkdir()
    log = entry / "build.log"
    _make(src, out, arch, "tinyconfig", log=log)
    (entry / "fragment.config").write_text(recipe.frag)
    with open(out / ".config", "a") as f:
        f.write(recipe.frag)
    _make(src, out, arch, "olddefconfig", log=log)
    lost = lost_options(recipe.frag, read_config(out / ".config"))
    if lost:
        raise PipelineError(f"{recipe.what}: the {arch} kernel config lost {', '.join(lost)} "
                            f"(unmet dependencies); fix its fragment ({recipe.name})")
    say(f"  compiling ({TARGET[arch]} modules_prepare), log in {log}")
    _make(src, out, arch, TARGET[arch], "modules_prepare", log=log)
    # External modules link against Module.symvers; a kernel-only build names it this.
    shutil.copy2(out / "vmlinux.symvers", out / "Module.symvers")
