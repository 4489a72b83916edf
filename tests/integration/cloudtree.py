"""bookworm's cloud-amd64 headers tree, fetched and extracted by hand (outside the matrix)."""

import re
import subprocess
from pathlib import Path

from pmubuild import kernels, matrix
from pmubuild.apt import PrivateApt


def cloud_debs_for(apt: PrivateApt) -> tuple[str, str, list[Path]]:
    """(release, kbuild package name, .debs) of bookworm's cloud-amd64 headers matching
    the generic amd64 kernel of the matrix."""
    generic = kernels.resolve(apt, matrix.SUITES["bookworm"], "amd64")
    abi = generic.release.removesuffix("-amd64")
    found = [p for p in apt.find(rf"linux-headers-{re.escape(abi)}-cloud-amd64",
                                 matrix.SUITES["bookworm"].apt_suites, "amd64")
             if p.version == generic.version]
    assert found, f"no cloud headers for {abi} {generic.version}"
    headers = found[-1]
    common = apt.exact(f"linux-headers-{abi}-common", headers.version, "all")
    kbuild_name = next(d for d in headers.dependency_names() if d.startswith("linux-kbuild-"))
    kbuild = apt.exact(kbuild_name, headers.version, "amd64")
    debs = apt.download([headers, common, kbuild])
    return f"{abi}-cloud-amd64", kbuild_name, debs


def extract(debs, root: Path, release: str) -> Path:
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root / "usr" / "src" / f"linux-headers-{release}"


def fix_makefile(tree: Path) -> None:
    mk = tree / "Makefile"
    mk.write_text(re.sub(r"^include /usr/src/(linux-headers-[^/\s]+)/Makefile$",
                         r"include ../\1/Makefile", mk.read_text(), flags=re.M))


