"""The QEMU harness reports a hung guest and a panicked kernel, with the console."""

import pytest

from pmubuild.guests import cpio, guest, qemu
from pmubuild.trees import kernels, matrix
from pmubuild.trees.apt import PrivateApt

pytestmark = [pytest.mark.kernels, pytest.mark.qemu]


@pytest.fixture(scope="module")
def arm64():
    apt = PrivateApt()
    fk = kernels.fetch(apt, matrix.SUITES["bookworm"], "arm64")
    return fk, guest.busybox(apt, "arm64")


def test_hung_guest_times_out(tmp_path, arm64):
    fk, busybox = arm64
    init = (b"#!/bin/busybox sh\n/bin/busybox echo 'hang-test: init is running'\n"
            b"while :; do /bin/busybox sleep 1000; done\n")
    entries = [cpio.directory("bin"),
               cpio.file("bin/busybox", busybox.read_bytes(), executable=True),
               cpio.symlink("bin/sh", "busybox"),
               cpio.file("init", init, executable=True)]
    initrd = cpio.write_gz(entries, tmp_path / "hang.gz")
    run = qemu.boot("arm64", fk.image, initrd, timeout=15)
    assert run.timed_out
    assert run.qemu_rc is None
    assert run.seconds >= 15  # not before its timeout (an upper bound would be a wall-clock
    # figure that a busy machine moves: timed_out and no exit status say it was killed)
    assert not run.ok and not run.done
    problem = run.problem()
    assert "timed out after 15s" in problem
    assert "hang-test: init is running" in problem  # console read up to the kill


def test_panicked_guest(tmp_path, arm64):
    fk, _ = arm64
    initrd = cpio.write_gz([cpio.directory("etc")], tmp_path / "noinit.gz")
    # A generous timeout: the panic comes within seconds, later on a busy machine.
    run = qemu.boot("arm64", fk.image, initrd, timeout=300)
    assert not run.timed_out, run.console[-2000:]
    assert "Kernel panic" in run.console
    assert not run.booted and not run.ok
    problem = run.problem()
    assert "panicked" in problem
    assert "Kernel panic" in problem
