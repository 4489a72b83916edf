import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.trees import matrix


def test_expand_all_is_every_suite_times_every_arch():
    pairs = matrix.expand("all", "all")
    assert len(pairs) == len(matrix.SUITES) * len(matrix.ARCHES) == 10
    assert {(s.name, a) for s, a in pairs} == {
        (s, a) for s in matrix.SUITES for a in matrix.ARCHES}


def test_expand_one_suite_one_arch():
    [(suite, arch)] = matrix.expand("trixie", "arm64")
    assert suite is matrix.SUITES["trixie"]
    assert suite.apt_suites == ("trixie", "trixie-security")
    assert arch == "arm64"


def test_expand_one_suite_all_arches():
    pairs = matrix.expand("sid", "all")
    assert [(s.name, a) for s, a in pairs] == [("sid", "amd64"), ("sid", "arm64")]


def test_unknown_suite_lists_valid_ones():
    with pytest.raises(PipelineError) as e:
        matrix.expand("jessie", "arm64")
    msg = str(e.value)
    assert "'jessie'" in msg
    for name in ("bullseye", "bookworm", "bookworm-backports", "trixie", "sid"):
        assert name in msg


def test_unknown_arch_lists_valid_ones():
    with pytest.raises(PipelineError) as e:
        matrix.expand("all", "riscv64")
    msg = str(e.value)
    assert "'riscv64'" in msg and "amd64" in msg and "arm64" in msg


def test_check_suite_and_arch_accept_valid_names():
    assert matrix.check_suite("bookworm-backports").userland == "bookworm"
    assert matrix.check_arch("amd64") == "amd64"
    with pytest.raises(PipelineError):
        matrix.check_arch("x86_64")  # the kernel's name, not Debian's
