"""bookworm's other flavours (cloud, rt) of the matrix's generic kernel: headers trees
fetched and extracted by hand, as a user's /usr/src holds them (outside the matrix)."""

import functools
import re
import subprocess
from pathlib import Path

from pmubuild.trees import cache, kernels, matrix
from pmubuild.trees.apt import PrivateApt

# Flavours Debian ships for bookworm besides the generic one, per architecture.
FLAVOURS = {"amd64": ("cloud-amd64", "rt-amd64"), "arm64": ("cloud-arm64", "rt-arm64")}


def flavour_debs_for(apt: PrivateApt, flavour: str,
                     arch: str = "amd64") -> tuple[str, str, list[Path]]:
    """(release, kbuild package name, .debs) of bookworm's `flavour` headers (e.g.
    rt-arm64) matching the generic kernel of the matrix for `arch`."""
    generic = kernels.resolve(apt, matrix.SUITES["bookworm"], arch)
    abi = generic.release.removesuffix(f"-{arch}")
    found = [p for p in apt.find(rf"linux-headers-{re.escape(abi)}-{re.escape(flavour)}",
                                 matrix.SUITES["bookworm"].apt_suites, arch)
             if p.version == generic.version]
    assert found, f"no {flavour} headers for {abi} {generic.version}"
    headers = found[-1]
    deps = headers.dependency_names()
    # rt has its own common headers (linux-headers-X-common-rt): take the one it depends on.
    common_name = next(d for d in deps if d.startswith(f"linux-headers-{abi}-common"))
    common = apt.exact(common_name, headers.version, "all")
    kbuild_name = next(d for d in deps if d.startswith("linux-kbuild-"))
    kbuild = apt.exact(kbuild_name, headers.version, kernels.HOST_ARCH)
    debs = apt.download([headers, common, kbuild])
    return f"{abi}-{flavour}", kbuild_name, debs


def cloud_debs_for(apt: PrivateApt) -> tuple[str, str, list[Path]]:
    return flavour_debs_for(apt, "cloud-amd64")


def extract(debs, root: Path, release: str) -> Path:
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root / "usr" / "src" / f"linux-headers-{release}"


def fix_makefile(tree: Path) -> None:
    mk = tree / "Makefile"
    mk.write_text(re.sub(r"^include /usr/src/(linux-headers-[^/\s]+)/Makefile$",
                         r"include ../\1/Makefile", mk.read_text(), flags=re.M))


@functools.cache
def flavour_tree(apt: PrivateApt, flavour: str, arch: str) -> Path:
    """The flavour's tree, extracted once into the cache (a few seconds per test run
    otherwise, and the module build directory is keyed by release anyway)."""
    release, _, debs = flavour_debs_for(apt, flavour, arch)
    final = cache.subdir("flavours") / release
    tree = final / "root" / "usr" / "src" / f"linux-headers-{release}"
    with cache.locked("flavours"):
        if not tree.is_dir():
            with cache.atomic_dir(final) as tmp:
                fix_makefile(extract(debs, tmp / "root", release))
    return tree
