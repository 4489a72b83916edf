"""The test run's one W=1 build of the module per matrix kernel, shared by the tests that
need a built module (test_modverify_real) and the one that judges its warnings
(test_w1_builds): from a clean build directory, so its warnings are authoritative, and
into build/<release>-<arch>, where test-qemu's own make then finds nothing to do."""

import functools

from pmubuild.modbuild import build
from pmubuild.trees import kernels, matrix
from pmubuild.trees.apt import PrivateApt


@functools.cache
def apt() -> PrivateApt:
    """The run's one private apt, its index refreshed once."""
    a = PrivateApt()
    a.update()
    return a


@functools.cache
def w1_build(suite: str, arch: str) -> build.BuildResult:
    fk = kernels.fetch(apt(), matrix.SUITES[suite], arch)
    return build.authoritative_w1(fk.kdir, apt_factory=apt)
