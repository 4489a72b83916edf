"""How many load/unload cycles each arm64 stress guest runs."""

import pytest

from pmubuild import commands
from pmubuild.common.errors import PipelineError
from pmubuild.guests import matrixrun
from pmubuild.trees import matrix


def _combos(*names: str) -> list[tuple[matrix.Suite, str]]:
    return [(matrix.SUITES[n], "arm64") for n in names]


def test_full_cycles_on_the_default_suite_only():
    combos = _combos(*matrix.SUITES)
    got = {s.name: matrixrun.stress_cycles_for(s, combos, None) for s, _ in combos}
    assert got == {"bullseye": 30, "bookworm": 200, "bookworm-backports": 30,
                   "trixie": 30, "sid": 30}
    older = _combos("bullseye", "trixie")
    assert [matrixrun.stress_cycles_for(s, older, None) for s, _ in older] == [30, 30]


def test_single_kernel_runs_full_cycles():
    combos = _combos("trixie")
    assert matrixrun.stress_cycles_for(combos[0][0], combos, None) == 200


def test_forced_cycles_everywhere():
    combos = _combos(*matrix.SUITES)
    assert {matrixrun.stress_cycles_for(s, combos, 7) for s, _ in combos} == {7}


@pytest.mark.parametrize("bad", ["0", "-5", "ten", "10001", "1.5"])
def test_bad_stress_cycles_refused_before_anything_runs(bad, monkeypatch):
    monkeypatch.setattr(matrixrun, "test_matrix",
                        lambda *a, **k: pytest.fail("the matrix ran"))
    with pytest.raises(PipelineError, match="--stress-cycles"):
        commands.test_qemu("sid", "arm64", 600, 2, bad)
