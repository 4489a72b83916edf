"""Every flavour Debian ships for bookworm (cloud and rt, amd64 and arm64, beside the
matrix's generic one): `invoke build --kdir` builds the module against the flavour's own
headers tree, its vermagic is what modverify derives from that tree's vermagic.h, and
`invoke verify` accepts it. A module built for the generic kernel is refused by the rt tree."""

import functools
import os
import subprocess
from pathlib import Path

import pytest
from cloudtree import FLAVOURS, flavour_tree
from matrixbuild import apt, w1_build

from pmubuild.kbuild import modverify
from pmubuild.kbuild.kbuildfiles import read_config
from pmubuild.trees import kdir, matrix

pytestmark = pytest.mark.kernels
REPO = Path(__file__).resolve().parents[2]
CASES = [(f, a) for a in matrix.ARCHES for f in FLAVOURS[a]]


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["./devenv", "invoke", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900, env=dict(os.environ))


@functools.cache
def built(flavour: str, arch: str) -> tuple[Path, Path]:
    """(tree, module built against it by `invoke build --kdir`)."""
    tree = flavour_tree(apt(), flavour, arch)
    proc = invoke("build", "--kdir", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ko = Path(proc.stdout.strip().splitlines()[-1])
    assert ko.name == "simple-pmu.ko" and ko.is_file(), proc.stdout
    return tree, ko


@pytest.mark.parametrize(("flavour", "arch"), CASES)
def test_flavour_module_verifies(flavour, arch):
    tree, ko = built(flavour, arch)
    config = read_config(tree / ".config")
    # Each case is the flavour it claims to be (an rt tree really is PREEMPT_RT).
    assert (config.get("CONFIG_PREEMPT_RT") == "y") == flavour.startswith("rt-")
    module = modverify.read_module(ko)
    target = modverify.load_target(tree)
    assert target.release == kdir.inspect(tree).release and target.release.endswith(flavour)
    assert module.info("vermagic") == modverify.expected_vermagic(target)
    proc = invoke("verify", "--kdir", str(tree), "--ko", str(ko))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generic_module_refused_by_rt_tree():
    # The run's one W=1 build of the generic tree (matrixbuild), shared with the others.
    result = w1_build("bookworm", "amd64")
    generic, ko = result.tree, result.ko
    rt = flavour_tree(apt(), "rt-amd64", "amd64")
    proc = invoke("verify", "--kdir", str(rt), "--ko", str(ko))
    rt_release = modverify.load_target(rt).release
    assert proc.returncode != 0
    assert (f"simple-pmu.ko: vermagic release '{generic.release}', the target kernel is "
            f"'{rt_release}'") in proc.stdout + proc.stderr
