"""debversion.compare against the real oracle: dpkg --compare-versions."""

import shutil
import subprocess
from functools import cmp_to_key

import pytest

from pmubuild.trees.debversion import compare, version_key

PAIRS = [
    ("6.12.95-1~bpo12+1", "6.12.95-1"),
    ("6.12.117-1", "6.12.118-1"),
    ("6.12.9-1", "6.12.10-1"),
    ("6.1.192-3", "6.1.192-10"),
    ("1:0.1", "2.0"),
    ("0:1.0", "1.0"),
    ("1.0", "1.0-0"),
    ("1.0~rc1", "1.0"),
    ("1.0~~", "1.0~"),
    ("1.0~", "1.0"),
    ("1.0a", "1.0+"),
    ("1.0a", "1.0"),
    ("1.0+", "1.0."),
    ("1.0-1", "1.0-1+b1"),
    ("1.2-3-4", "1.2-3-10"),
    ("1.2-3-4", "1.2-4"),
    ("2.30-1", "2.4-1"),
    ("4:14.2.0-1", "4:12.2.0-3"),
    ("1.35.0-4+deb12u1+b1", "1.35.0-4+deb12u1"),
    ("6.1.0-0.deb11.52", "6.1.0-0.deb11.6"),
    ("7.2.13-1", "6.12.118-1"),
    ("1.0-1", "1.0-1"),
    ("1.0.0", "1.0"),
    ("a", "~"),
    ("1.001", "1.1"),
    ("10:1", "9:2"),
    ("1.0-a", "1.0-A"),
]


def dpkg_cmp(a: str, b: str) -> int:
    for op, result in (("lt", -1), ("eq", 0), ("gt", 1)):
        if subprocess.run(["dpkg", "--compare-versions", a, op, b]).returncode == 0:
            return result
    raise AssertionError(f"dpkg could not order {a} and {b}")


needs_dpkg = pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg not installed")


@needs_dpkg
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_compare_agrees_with_dpkg(a, b):
    want = dpkg_cmp(a, b)
    assert compare(a, b) == want
    assert compare(b, a) == -want


@needs_dpkg
def test_sorting_agrees_with_dpkg():
    versions = sorted({v for pair in PAIRS for v in pair})
    ours = sorted(versions, key=version_key)
    theirs = sorted(versions, key=cmp_to_key(dpkg_cmp))
    # Equal versions may sit in either order; compare as dpkg-equivalence classes.
    assert [dpkg_cmp(x, y) for x, y in zip(ours, theirs, strict=True)] == [0] * len(ours)


def test_backport_sorts_before_its_base_version():
    assert compare("6.12.95-1~bpo12+1", "6.12.95-1") == -1
    assert compare("6.12.95-1", "6.12.95-1~bpo12+1") == 1


def test_not_a_version_raises():
    with pytest.raises(ValueError):
        compare("", "1.0")
