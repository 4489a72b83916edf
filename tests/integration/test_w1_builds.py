"""simple-pmu builds warning-free with W=1 for all 10 kernels of the matrix, each with the
compat.h rendered for its own tree; and the check sees a warning whatever was built
before it."""

from pathlib import Path

import pytest
from matrixbuild import w1_build

from pmubuild.kbuild import compat
from pmubuild.modbuild import build
from pmubuild.trees import kernels, matrix
from pmubuild.trees.apt import PrivateApt

pytestmark = pytest.mark.kernels

COMBOS = [(s, a) for s in matrix.SUITES for a in matrix.ARCHES]


@pytest.mark.parametrize(("suite", "arch"), COMBOS, ids=[f"{s}-{a}" for s, a in COMBOS])
def test_w1_build(suite, arch):
    result = w1_build(suite, arch)
    # Authoritative: this make compiled every object of the module.
    assert result.complete, (result.objects, result.compiled)
    assert result.warnings == (), "\n".join(result.warnings)
    assert result.ko == result.build_dir / "simple-pmu.ko" and result.ko.is_file()
    header = result.build_dir / "compat.h"
    assert header.is_file()
    # The header in the build dir is the one rendered for this very tree.
    tree, results = compat.probe_all(result.tree.path)
    assert header.read_text() == compat.render(tree, results)
    assert result.tree.arch == arch
    # W=1 reached the compiler: kbuild records each object's command line, and -Wextra is
    # what W=1 adds on every kernel here.
    assert result.objects
    for o in result.objects:
        assert "-Wextra" in (o.parent / f".{o.name}.cmd").read_text(), o


def broken_sources(dest: Path) -> Path:
    """A copy of the module's sources with an unused variable in one driver file."""
    build.stage_sources(dest)
    c = dest / "drivers" / "common" / "parse.c"
    text = c.read_text()
    first_brace = text.index("\n{\n") + 3
    c.write_text(text[:first_brace] + "\tint spmu_injected_unused;\n" + text[first_brace:])
    return dest


def test_w1_sees_a_warning_after_an_earlier_build(tmp_path):
    """The trap this check fell into: an incremental make prints no warning for what it
    does not recompile. Build the broken copy once (any flags), then run the check."""
    fk = kernels.fetch(PrivateApt(), matrix.SUITES["bookworm"], "amd64")
    src = broken_sources(tmp_path / "src")
    root = tmp_path / "build"
    first = build.build(fk.kdir, w1=True, build_root=root, src=src)
    assert any("spmu_injected_unused" in w for w in first.warnings), first.log
    again = build.build(fk.kdir, w1=True, build_root=root, src=src)
    assert again.warnings == () and not again.complete  # what an incremental make says
    checked = build.authoritative_w1(fk.kdir, build_root=root, src=src)
    assert checked.complete
    assert [w for w in checked.warnings if "spmu_injected_unused" in w], checked.log
