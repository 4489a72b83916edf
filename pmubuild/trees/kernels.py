"""Resolve the newest Debian kernel of a suite from the package index and assemble its tree.

A tree in the cache holds the headers of the target arch, the common headers, the kbuild
tools built for this host, and the kernel image (for QEMU). It is one directory, written
whole (cache.atomic_dir) and described by tree.json.
"""

import gzip
import json
import re
import subprocess
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say, step
from pmubuild.trees import cache
from pmubuild.trees.apt import Package, PrivateApt
from pmubuild.trees.matrix import Suite

HOST_ARCH = "amd64"  # the machine that runs kbuild tools; checked in toolchain.host_arch()


@dataclass(frozen=True)
class KernelPackages:
    suite: str
    arch: str
    release: str  # e.g. 6.1.0-57-arm64
    version: str  # Debian version of the linux source package, e.g. 6.1.192-3
    headers: Package
    common: Package
    kbuild: Package
    image: Package

    @property
    def all(self) -> list[Package]:
        return [self.headers, self.common, self.kbuild, self.image]


@dataclass(frozen=True)
class FetchedKernel:
    """A cached kernel: its build tree (KDIR) and the image QEMU boots."""

    suite: str
    arch: str
    release: str
    version: str
    kdir: Path
    image: Path

    def to_json(self) -> str:
        return json.dumps({k: str(v) for k, v in asdict(self).items()}, indent=2)


def _headers_re(arch: str) -> str:
    # The generic flavour only: linux-headers-6.1.0-57-arm64, linux-headers-6.12.95+deb12-amd64;
    # not cloud/rt/16k flavours, nor bullseye-security's 6.1.0-0.deb11.N backport.
    return rf"linux-headers-(\d+\.\d+[.\d]*(?:\+deb\d+)?(?:-\d+)?)-{arch}"


def resolve(apt: PrivateApt, suite: Suite, arch: str, host_arch: str = HOST_ARCH) -> KernelPackages:
    """The newest kernel of `suite` for `arch`, from the index (never a hard-coded version)."""
    candidates = [p for p in apt.find(_headers_re(arch), suite.apt_suites, arch)
                  if p.source == "linux"]
    if not candidates:
        raise PipelineError(f"no linux-headers-*-{arch} package in {', '.join(suite.apt_suites)}"
                            " in the Debian index")
    skipped: list[str] = []
    for headers in reversed(candidates):
        try:
            kp = _packages_for(apt, suite, arch, headers, host_arch)
        except PipelineError:
            kp = None  # an older ABI whose companion packages left the index
        if kp and all(apt.available(p) for p in kp.all):
            if skipped:
                say(f"note: {suite.name}/{arch}: newer kernel(s) {', '.join(skipped)} are in "
                    f"the index but not served by the registry; using {kp.release} {kp.version}")
            return kp
        skipped.append(f"{headers.name} {headers.version}")
        if len(skipped) >= 8:
            break
    raise PipelineError(f"{suite.name}/{arch}: the registry serves none of the newest kernels "
                        f"in its index (whole, with headers, kbuild and image): "
                        f"{', '.join(skipped)}")


def _packages_for(apt: PrivateApt, suite: Suite, arch: str, headers: Package,
                  host_arch: str) -> KernelPackages:
    m = re.fullmatch(_headers_re(arch), headers.name)
    assert m
    abi = m.group(1)
    deps = headers.dependency_names()
    common_name = next((d for d in deps if d.startswith("linux-headers-") and
                        d.endswith("-common")), None)
    kbuild_name = next((d for d in deps if d.startswith("linux-kbuild-")), None)
    if not common_name or not kbuild_name:
        raise PipelineError(f"{headers.name} {headers.version}: cannot find its common headers "
                            f"and kbuild packages in Depends: {headers.depends}")
    common = apt.exact(common_name, headers.version, "all")
    kbuild = apt.exact(kbuild_name, headers.version, host_arch)
    image = None
    # The package that ships /boot/vmlinuz: from 7.x Debian splits linux-image-X into a
    # metapackage over linux-binary-X (the kernel) and linux-modules-X.
    for name in (f"linux-image-{abi}-{arch}-unsigned", f"linux-binary-{abi}-{arch}",
                 f"linux-image-{abi}-{arch}"):
        try:
            image = apt.exact(name, headers.version, arch)
            break
        except PipelineError:
            continue
    if image is None:
        raise PipelineError(f"no linux-image-{abi}-{arch} at version {headers.version}")
    return KernelPackages(suite.name, arch, f"{abi}-{arch}", headers.version,
                          headers, common, kbuild, image)


def kernels_dir() -> Path:
    return cache.subdir("kernels")


def entry_dir(kp: KernelPackages) -> Path:
    return kernels_dir() / f"{kp.release}_{kp.version}_kbuild-{kp.kbuild.arch}"


def load_entry(path: Path) -> FetchedKernel | None:
    meta = path / "tree.json"
    if not meta.exists():
        return None
    d = json.loads(meta.read_text())
    return FetchedKernel(d["suite"], d["arch"], d["release"], d["version"],
                         Path(d["kdir"]), Path(d["image"]))


def fetch(apt: PrivateApt, suite: Suite, arch: str, refresh: bool = False) -> FetchedKernel:
    """Return the cached tree of the suite's newest kernel, assembling it on first use."""
    apt.update(force=refresh)
    kp = resolve(apt, suite, arch)
    final = entry_dir(kp)
    done = load_entry(final)
    if done:
        return done
    with cache.locked("kernels"):
        return load_entry(final) or _assemble(apt, kp, final)


def _assemble(apt: PrivateApt, kp: KernelPackages, final: Path) -> FetchedKernel:
    suite, arch = kp.suite, kp.arch
    cache.remove_stale_partials(kernels_dir())
    debs = apt.download(kp.all)
    cache.ensure_free_space(kernels_dir(), 600, f"the {kp.release} kernel tree")
    with step(f"assembling kernel tree {kp.release} ({suite}, {kp.version})"), \
            cache.atomic_dir(final) as tmp:
        root = tmp / "root"
        for deb in debs[:3]:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        vmlinuz = root / "boot" / f"vmlinuz-{kp.release}"
        _extract_kernel_image(debs[3], kp.release, vmlinuz)
        kdir = root / "usr" / "src" / f"linux-headers-{kp.release}"
        relink_headers_makefile(kdir, final / kdir.relative_to(tmp))
        image = qemu_image(vmlinuz, arch)
        fk = FetchedKernel(suite, arch, kp.release, kp.version,
                           final / kdir.relative_to(tmp), final / image.relative_to(tmp))
        (tmp / "tree.json").write_text(fk.to_json())
    return fk


def _extract_kernel_image(deb: Path, release: str, out: Path) -> None:
    """Only the kernel image: QEMU needs vmlinuz, not hundreds of MB of modules. It is
    /boot/vmlinuz-RELEASE up to 6.x and /usr/lib/modules/RELEASE/vmlinuz from 7.x."""
    wanted = {f"./boot/vmlinuz-{release}", f"./usr/lib/modules/{release}/vmlinuz"}
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout
    found = False
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            if member.name in wanted and member.isfile():
                src = tar.extractfile(member)
                assert src
                out.write_bytes(src.read())
                found = True
    if proc.wait() != 0 or not found:
        raise PipelineError(f"{deb.name} holds no kernel image ({' or '.join(sorted(wanted))})")


def relink_headers_makefile(kdir: Path, final: Path) -> None:
    """Debian's arch headers Makefile names /usr/src/linux-headers-X-common (its include)
    and, from 7.x, /usr/src/linux-headers-X-ARCH (KBUILD_OUTPUT) by absolute path; point
    them at the directories we extracted, which sit side by side like in /usr/src.
    `final` is where kdir will live once the cache entry is complete."""
    mk = kdir / "Makefile"
    text = re.sub(r"/usr/src/(linux-headers-[^/\s]+)",
                  lambda m: str(final.parent / m.group(1)), mk.read_text())
    mk.write_text(text)


def qemu_image(vmlinuz: Path, arch: str) -> Path:
    """A kernel image QEMU's -kernel loads: arm64 EFI zboot images are unpacked to Image."""
    if not vmlinuz.exists():
        raise PipelineError(f"kernel image {vmlinuz} missing from the image package")
    if arch != "arm64":
        return vmlinuz
    head = vmlinuz.read_bytes()[:64]
    if head[4:8] == b"zimg":
        # EFI zboot header: payload offset and size at 8 and 12, compression name at 24.
        data = vmlinuz.read_bytes()
        off = int.from_bytes(data[8:12], "little")
        size = int.from_bytes(data[12:16], "little")
        comp = data[24:32].rstrip(b"\0").decode()
        payload = data[off:off + size]
        out = vmlinuz.with_name(vmlinuz.name.replace("vmlinuz", "Image"))
        if comp == "gzip":
            out.write_bytes(gzip.decompress(payload))
        elif comp == "zstd":
            subprocess.run(["zstd", "-d", "-q", "-f", "-o", str(out)], input=payload, check=True)
        else:
            raise PipelineError(f"{vmlinuz}: zboot compression {comp!r} not supported")
        return out
    return vmlinuz
