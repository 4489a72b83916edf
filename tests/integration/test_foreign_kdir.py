"""`invoke build --kdir` on a headers tree it did not fetch itself: bookworm's cloud flavour,
extracted by hand."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cloudtree import cloud_debs_for, extract, fix_makefile
from elftools.elf.elffile import ELFFile

from pmubuild.common.errors import PipelineError
from pmubuild.kbuild import compat
from pmubuild.trees import kdir
from pmubuild.trees.apt import PrivateApt

pytestmark = pytest.mark.kernels
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cloud_debs():
    apt = PrivateApt()
    apt.update()
    return cloud_debs_for(apt)


def invoke_build(tree: Path, *extra: str):
    return subprocess.run(["./devenv", "invoke", "build", "--kdir", str(tree), *extra], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=dict(os.environ))


def modinfo(ko: Path) -> dict[str, str]:
    with open(ko, "rb") as f:
        elf = ELFFile(f)
        data = elf.get_section_by_name(".modinfo").data()
        machine = elf["e_machine"]
    fields = dict(item.decode().split("=", 1) for item in data.split(b"\0") if b"=" in item)
    return {"e_machine": machine, **fields}


def test_cloud_tree_build(tmp_path, cloud_debs):
    release, _, debs = cloud_debs
    tree = extract(debs, tmp_path / "root", release)
    with pytest.raises(PipelineError) as e:
        kdir.inspect(tree)
    msg = str(e.value)
    common = f"linux-headers-{release.removesuffix('-cloud-amd64')}-common"
    assert f"/usr/src/{common}/Makefile" in msg and "does not exist" in msg
    assert "beside" in msg  # the hint: the common tree is a sibling

    fix_makefile(tree)
    assert kdir.inspect(tree).release == release
    proc = invoke_build(tree, "--w1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "warning:" not in out.lower(), out
    ko = Path(proc.stdout.strip().splitlines()[-1])
    assert ko.name == "simple-pmu.ko" and ko.is_file()
    # compat.h was rendered for the cloud tree, in its own build directory.
    assert ko.parent == REPO / "build" / f"{release}-amd64"
    header = ko.parent / "compat.h"
    assert header.is_file()
    assert compat.render(*compat.probe_all(tree)) == header.read_text()
    # W=1 reached the compiler (kbuild records each object's command line).
    objs = object_files(ko.parent)
    assert objs
    for o in objs:
        assert "-Wextra" in (o.parent / f".{o.name}.cmd").read_text(), o
    info = modinfo(ko)
    assert info["e_machine"] == "EM_X86_64"
    assert info["vermagic"].startswith(release + " ")
    assert info["name"] == "simple_pmu"


def test_cloud_tree_without_kbuild(tmp_path, cloud_debs):
    release, kbuild_name, debs = cloud_debs
    tree = extract([d for d in debs if not d.name.startswith("linux-kbuild-")],
                   tmp_path / "root", release)
    fix_makefile(tree)
    build_dir = REPO / "build" / f"{release}-amd64"
    shutil.rmtree(build_dir, ignore_errors=True)  # our own output (cloud is off-matrix)
    proc = invoke_build(tree)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "scripts/basic/fixdep" in out
    assert "linux-kbuild" in out
    assert "Traceback" not in out
    assert not build_dir.exists()
    assert kbuild_name.startswith("linux-kbuild-")


def object_files(build_dir: Path) -> list[Path]:
    """The module's objects, as listed in simple-pmu.mod (absolute on 5.10, ./ relative later)."""
    text = (build_dir / "simple-pmu.mod").read_text()
    return [build_dir / t for t in text.split() if t.endswith(".o")]
