"""simple-pmu builds warning-free with W=1 for all 10 kernels of the matrix, each with the
compat.h rendered for its own tree."""

from pathlib import Path

import pytest

from pmubuild import build, compat, kernels, matrix
from pmubuild.apt import PrivateApt

pytestmark = pytest.mark.kernels

COMBOS = [(s, a) for s in matrix.SUITES for a in matrix.ARCHES]


@pytest.fixture(scope="module")
def apt():
    return PrivateApt()


@pytest.mark.parametrize(("suite", "arch"), COMBOS, ids=[f"{s}-{a}" for s, a in COMBOS])
def test_w1_build(apt, suite, arch):
    fk = kernels.fetch(apt, matrix.SUITES[suite], arch)
    result = build.build(fk.kdir, w1=True)
    assert result.warnings == (), "\n".join(result.warnings)
    assert result.ko == result.build_dir / "simple-pmu.ko" and result.ko.is_file()
    header = result.build_dir / "compat.h"
    assert header.is_file()
    # The header in the build dir is the one rendered for this very tree.
    tree, results = compat.probe_all(fk.kdir)
    assert header.read_text() == compat.render(tree, results)
    assert result.tree.release == fk.release and result.tree.arch == arch
    # W=1 reached the compiler: kbuild records each object's command line, and -Wextra is
    # what W=1 adds on every kernel here.
    objs = object_files(result.build_dir)
    assert objs
    for o in objs:
        assert "-Wextra" in (o.parent / f".{o.name}.cmd").read_text(), o


def object_files(build_dir: Path) -> list[Path]:
    """The module's objects, as listed in simple-pmu.mod (absolute on 5.10, ./ relative later)."""
    text = (build_dir / "simple-pmu.mod").read_text()
    return [build_dir / t for t in text.split() if t.endswith(".o")]
