"""The kernel's scripts/checkpatch.pl, from Debian's linux-source package (cached), run
--strict over our driver sources. Debian's headers and kbuild packages do not ship it."""

import subprocess
import tarfile
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import step
from pmubuild.trees import cache
from pmubuild.trees.apt import Package, PrivateApt

SUITES = ("bookworm", "bookworm-security")
# One checkpatch for everyone: a newer linux-source appearing must not change the verdict
# on unchanged code. 6.12's adds "struct bus_type should normally be const", which our
# 5.10-6.7 targets cannot honour (they write to it); see HAVE_BUS_TYPE_CONST.
PACKAGE = "linux-source-6.1"
WANTED = ("scripts/checkpatch.pl", "scripts/spelling.txt", "scripts/const_structs.checkpatch")
REPO = Path(__file__).resolve().parents[2]


def source_package(apt: PrivateApt) -> Package:
    """linux-source-6.1 (checkpatch and the signature-enforcing test kernel come from it)."""
    apt.update()
    found = apt.find(PACKAGE, SUITES, "amd64")
    if not found:
        raise PipelineError(f"no {PACKAGE} package in Debian bookworm (or -security)")
    return found[-1]


def script(apt: PrivateApt) -> Path:
    pkg = source_package(apt)
    target = cache.subdir("checkpatch") / pkg.version
    if (target / WANTED[0]).exists():
        return target / WANTED[0]
    (deb,) = apt.download([pkg])
    with step(f"extracting checkpatch.pl from {pkg.name} {pkg.version}"), \
            cache.atomic_dir(target) as tmp:
        # The .deb holds /usr/src/linux-source-X.tar.xz: stream it, keep three files.
        data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)],
                                stdout=subprocess.PIPE)
        assert data.stdout
        with tarfile.open(fileobj=data.stdout, mode="r|") as outer:
            for member in outer:
                if member.name.endswith(".tar.xz") and "linux-source" in member.name:
                    inner_file = outer.extractfile(member)
                    assert inner_file
                    with tarfile.open(fileobj=inner_file, mode="r|xz") as inner:
                        for m in inner:
                            rel = m.name.split("/", 1)[-1]
                            if rel in WANTED:
                                out = tmp / rel
                                out.parent.mkdir(parents=True, exist_ok=True)
                                src = inner.extractfile(m)
                                assert src
                                out.write_bytes(src.read())
                    break
        data.wait()
        missing = [w for w in WANTED if not (tmp / w).exists()]
        if missing:
            raise PipelineError(f"{deb.name} lacks {', '.join(missing)}")
    return target / WANTED[0]


def sources() -> list[Path]:
    return sorted(p for p in (REPO / "drivers").rglob("*") if p.suffix in (".c", ".h"))


def run(apt: PrivateApt | None = None) -> list[str]:
    """Problems checkpatch --strict reports, one line per file with any (empty: clean)."""
    pl = script(apt or PrivateApt())
    problems = []
    for src in sources():
        proc = subprocess.run(["perl", str(pl), "--strict", "--no-tree", "--terse", "-f",
                               str(src)], capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if proc.returncode != 0 or lines:
            problems += lines or [f"{src}: checkpatch exit {proc.returncode}"]
    return problems
