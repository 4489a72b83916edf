import subprocess
from pathlib import Path

import pytest

from pmubuild import idledt, qemu
from tests.unit.test_idledt import boot_argv, read_fdt
from tests.unit.test_idledt import cache_dir as cache_dir  # the fixture, used by name


def test_boot_passes_idle_states_to_the_command(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(qemu.idledt, "ensure", lambda b, m: tmp_path / "idle.dtb")
    monkeypatch.setattr(qemu, "read_console",
                        lambda argv, t, on_line=None: (seen.append(argv), ([], [], "", 0))[1])
    qemu.boot("arm64", tmp_path / "Image", tmp_path / "initrd", idle_states=True)
    qemu.boot("arm64", tmp_path / "Image", tmp_path / "initrd")
    assert [a[a.index("-dtb") + 1] if "-dtb" in a else None for a in seen] == [
        str(tmp_path / "idle.dtb"), None]


def test_one_cache_two_smp_counts_two_trees(cache_dir, tmp_path):  # noqa: F811
    two, three = boot_argv(tmp_path, smp=2), boot_argv(tmp_path, smp=3)
    d2, d3 = (Path(a[a.index("-dtb") + 1]) for a in (two, three))
    assert d2 != d3
    assert sorted(p for p in read_fdt(d3.read_bytes()) if p.startswith("/cpus/cpu@")) == [
        f"/cpus/cpu@{n}" for n in range(3)]


@pytest.mark.parametrize("edit, problem", [
    (["-t", "u", "/cpus/idle-states/cpu-sleep-0", "arm,psci-suspend-param", "2"],
     "arm,psci-suspend-param is [2], not [1]"),
    (["-t", "s", "/cpus/idle-states", "entry-method", "spin"], "entry-method is 'spin'"),
    (["-t", "s", "/cpus/idle-states/cpu-sleep-0", "compatible", "x"], "compatible 'x'"),
    (["-t", "u", "/cpus/cpu@0", "cpu-idle-states", "9999"],
     "/cpus/cpu@0 cpu-idle-states is [9999]"),
])
def test_problems_names_each_wrong_property(cache_dir, tmp_path, edit, problem):  # noqa: F811
    argv = boot_argv(tmp_path)
    broken = tmp_path / "broken.dtb"
    broken.write_bytes(Path(argv[argv.index("-dtb") + 1]).read_bytes())
    subprocess.run(["fdtput", *edit[:2], str(broken), *edit[2:]], check=True)
    (got,) = idledt.problems(broken)
    assert problem in got
