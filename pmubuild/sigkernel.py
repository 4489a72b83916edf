"""A small kernel that enforces module signatures and trusts one test certificate.

Debian's kernels enforce signatures only under Secure Boot, and trust Debian's key and the
machine's MOK list, neither of which a QEMU test can hold. So we build Debian's
linux-source (the version checkpatch comes from) with tinyconfig plus what a test guest and
our module need, CONFIG_MODULE_SIG_FORCE, and a test certificate in
CONFIG_SYSTEM_TRUSTED_KEYS. Cached by content: source version, arch, fragment, certificate.
"""

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import cache, checkpatch, signing
from .apt import PrivateApt
from .errors import PipelineError
from .kbuildfiles import read_config, tree_release
from .matrix import GNU_TRIPLET, KERNEL_ARCH
from .progress import say, step

# Options on top of tinyconfig, each =y unless it has a value. The build checks that every
# one survived olddefconfig (an unmet dependency drops an option silently).
FRAGMENT_ALL = (
    "64BIT", "SMP", "PRINTK", "TTY", "BLK_DEV_INITRD", "RD_GZIP", "PROC_FS", "SYSFS",
    "DEVTMPFS", "DEVTMPFS_MOUNT", "BINFMT_ELF", "BINFMT_SCRIPT", "MULTIUSER",
    "MODULES", "MODULE_UNLOAD", "MODULE_SIG", "MODULE_SIG_FORCE", "MODULE_SIG_ALL",
    "MODULE_SIG_SHA256", "SYSTEM_TRUSTED_KEYRING", "PERF_EVENTS", "HOTPLUG_CPU",
    "HIGH_RES_TIMERS",
)
FRAGMENT_ARCH = {
    # Without ACPI and PCI QEMU's pc machine shows one CPU and poweroff hangs.
    "amd64": ("ACPI", "PCI", "SERIAL_8250", "SERIAL_8250_CONSOLE"),
    # PL011 is the virt machine's console, PSCI brings up CPUs and powers off.
    "arm64": ("SERIAL_AMBA_PL011", "SERIAL_AMBA_PL011_CONSOLE", "ARM_PSCI_FW", "ARM_PMU",
              "HW_PERF_EVENTS"),
}
IMAGE = {"amd64": "arch/x86/boot/bzImage", "arm64": "arch/arm64/boot/Image"}
TARGET = {"amd64": "bzImage", "arm64": "Image"}


@dataclass(frozen=True)
class SigKernel:
    arch: str
    release: str
    kdir: Path  # O= build tree, ready for external modules
    image: Path
    keys: signing.KeyPair  # the pair whose certificate the kernel trusts


def test_keypair() -> signing.KeyPair:
    """The test key, made once in the cache: it exists to sign test modules only."""
    directory = cache.subdir("sigkernel") / "testkey"
    key, cert = directory / signing.KEY_NAME, directory / signing.CERT_NAME
    with cache.locked("sigkernel"):
        if not (key.is_file() and cert.is_file()):
            signing.create_keypair(directory, "simple-pmu TEST key (tests only)")
    return signing.KeyPair(key, cert, "test key")


def fragment(arch: str, cert_pem: Path) -> str:
    lines = [f"CONFIG_{o}=y" for o in (*FRAGMENT_ALL, *FRAGMENT_ARCH[arch])]
    lines.append(f'CONFIG_SYSTEM_TRUSTED_KEYS="{cert_pem}"')
    return "\n".join(lines) + "\n"


def source(apt: PrivateApt) -> tuple[str, Path]:
    """(version, extracted source tree) of linux-source-6.1, extracted once."""
    pkg = checkpatch.source_package(apt)
    final = cache.subdir("sigkernel") / f"src-{pkg.version}"
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


def ensure(apt: PrivateApt, arch: str) -> SigKernel:
    keys = test_keypair()
    version, src = source(apt)
    cert_pem = keys.cert.with_suffix(".pem")
    if not cert_pem.exists():
        subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(keys.cert),
                        "-out", str(cert_pem)], check=True, capture_output=True)
    frag = fragment(arch, cert_pem)
    digest = hashlib.sha256("\0".join([version, arch, frag, cert_pem.read_text()])
                            .encode()).hexdigest()[:10]
    final = cache.subdir("sigkernel") / f"{arch}-{version}-{digest}"
    with cache.locked(f"sigkernel-{arch}"):
        if not (final / "out" / IMAGE[arch]).exists():
            cache.remove_stale_partials(final.parent, final.name)
            cache.ensure_free_space(final.parent, 1500, f"a {arch} signature-enforcing kernel")
            with step(f"building a {arch} kernel that enforces module signatures "
                      f"(linux-source {version}, tinyconfig; about 3-4 minutes once)"), \
                    cache.atomic_dir(final) as tmp:
                _build(src, tmp, arch, frag)
    out = final / "out"
    return SigKernel(arch, tree_release(out), out, out / IMAGE[arch], keys)


def _build(src: Path, entry: Path, arch: str, frag: str) -> None:
    out = entry / "out"
    out.mkdir()
    log = entry / "build.log"
    _make(src, out, arch, "tinyconfig", log=log)
    (entry / "fragment.config").write_text(frag)
    with open(out / ".config", "a") as f:
        f.write(frag)
    _make(src, out, arch, "olddefconfig", log=log)
    config = read_config(out / ".config")
    lost = [ln for ln in frag.splitlines()
            if config.get(ln.split("=", 1)[0]) != ln.split("=", 1)[1].strip('"')]
    if lost:
        raise PipelineError(f"kernel config for {arch} lost {', '.join(lost)} (unmet "
                            "dependencies); fix pmubuild/sigkernel.py FRAGMENT_*")
    say(f"  compiling ({TARGET[arch]} modules_prepare), log in {log}")
    _make(src, out, arch, TARGET[arch], "modules_prepare", log=log)
    # External modules link against Module.symvers; a kernel-only build names it this.
    shutil.copy2(out / "vmlinux.symvers", out / "Module.symvers")
