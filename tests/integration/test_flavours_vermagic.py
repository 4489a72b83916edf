"""The flavours' cross cases the other way round (a module built by a flavour's tree is
refused by another flavour's), and randstruct through each matrix release's real headers:
5.10's vermagic.h includes the seed's hash itself, 7.x leaves it to kbuild's forced
-include of compiler-version.h. Debian enables randstruct nowhere, so the seed is added to a
copy of each tree's generated headers."""

import re
import shutil
from pathlib import Path

import pytest
from test_flavours import apt, built

from pmubuild.kbuild import modverify
from pmubuild.kbuild.kbuildfiles import SRCARCH, TreeError, source_roots, tree_vermagic
from pmubuild.trees import kdir, kernels, matrix

pytestmark = pytest.mark.kernels
SEED = "5eed" * 16


def generic_tree(arch: str) -> kdir.KernelTree:
    return kdir.inspect(kernels.fetch(apt(), matrix.SUITES["bookworm"], arch).kdir)


@pytest.mark.parametrize(("flavour", "arch", "other"), [
    ("rt-amd64", "amd64", None), ("rt-arm64", "arm64", None), ("cloud-arm64", "arm64", "rt-arm64"),
])
def test_flavour_module_refused_by_another_flavour(flavour, arch, other):
    # In-process (test_flavours runs `invoke verify` itself): a second each saved.
    _, ko = built(flavour, arch)
    target = modverify.load_target(built(other, arch)[0] if other else generic_tree(arch).path)
    module = modverify.read_module(ko)
    vermagic = module.info("vermagic")
    assert vermagic != modverify.expected_vermagic(target)
    report = modverify.check(module, target)
    assert not report.ok
    assert (f"simple-pmu.ko: vermagic release '{vermagic.split()[0]}', the target kernel is "
            f"'{target.release}'") in report.problems


def randstruct_copy(tree: Path, arch: str, dest: Path, seed: str | None) -> Path:
    """The build tree's own generated headers and a Makefile naming its source tree, plus
    the seed's hash under both names kbuild has used (5.x, 5.19+)."""
    dest.mkdir()
    src = source_roots(tree)[1]
    (dest / "Makefile").write_text(f"include {src}/Makefile\n")
    shutil.copytree(tree / "include" / "generated", dest / "include" / "generated")
    arch_gen = Path("arch") / SRCARCH[arch] / "include" / "generated"
    if (tree / arch_gen).is_dir():
        shutil.copytree(tree / arch_gen, dest / arch_gen)
    if seed is not None:
        for name in ("randstruct_hash.h", "randomize_layout_hash.h"):
            (dest / "include" / "generated" / name).write_text(
                f'#define RANDSTRUCT_HASHED_SEED "{seed}"\n')
    return dest


@pytest.mark.parametrize("suite", list(matrix.SUITES))
def test_randstruct_through_real_headers(suite, tmp_path):
    t = kdir.inspect(kernels.fetch(apt(), matrix.SUITES[suite], "amd64").kdir)
    base = tree_vermagic(t.path, t.config, "amd64")
    assert "RANDSTRUCT" not in base
    config = {**t.config, "CONFIG_RANDSTRUCT": "y", "CONFIG_GCC_PLUGIN_RANDSTRUCT": "y"}
    got = tree_vermagic(randstruct_copy(t.path, "amd64", tmp_path / "with", SEED), config,
                        "amd64")
    assert re.fullmatch(re.escape(base) + f"RANDSTRUCT_(PLUGIN_)?{SEED}", got), got
    with pytest.raises(TreeError, match=r"could not expand .*(randstruct|randomize_layout)_hash"):
        tree_vermagic(randstruct_copy(t.path, "amd64", tmp_path / "without", None), config,
                      "amd64")
