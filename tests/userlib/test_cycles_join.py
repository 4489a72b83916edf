"""Letting a thread in (arm64): where the module's sysfs access is "members", cycles.h
opens the device node, asks SPMU_IOC_JOIN and closes it when a thread's path becomes the
module's; a thread that cannot open the node is not on the module path and the reason
names the node, its group and mode and the fix; simple_pmu's probe says the same.

cycles.h runs here built for arm64 under qemu-aarch64 (c/join_check.c), against a fake
driver directory and a file standing in for the node (CYCLES_DEV_NODE); its ioctls are
caught by the program (-Wl,--wrap=ioctl) and counted.
"""

from __future__ import annotations

import errno
import grp
import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from userlib_helpers import INCLUDE, FakeDriver, Join, refuse_open, unopenable

CSRC = Path(__file__).resolve().parent / "c"
CROSS_CC = "aarch64-linux-gnu-gcc"
ARM64_SYSROOT = Path("/usr/aarch64-linux-gnu")
CPUS = sorted(os.sched_getaffinity(0))
PATH_NONE, PATH_MODULE = 0, 3  # enum cycles_path_id
CYCLES_FAULTED = 8


@pytest.fixture
def join(tmp_path):
    """(start, fake, node): start() runs join_check, built for arm64, against a fake driver
    whose access is "members" and a node file (openable until a test says otherwise)."""
    if shutil.which(CROSS_CC) is None:
        pytest.fail(f"{CROSS_CC} is not installed; ./devenv installs it")
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        pytest.fail("qemu-aarch64 (Debian qemu-user) is not installed; ./devenv installs it")
    fake = FakeDriver(tmp_path / "sys", max(CPUS) + 1)
    fake.attr("access", "members")
    node = tmp_path / "simple-pmu"
    node.write_text("")
    node.chmod(0o666)
    (tmp_path / "perf_user_access").write_text("0\n")
    exe = tmp_path / "join_check"
    cmd = [CROSS_CC, "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(INCLUDE),
           f'-DCYCLES_SYSFS_DIR="{fake.dir}"', f'-DCYCLES_DEV_NODE="{node}"',
           f'-DCYCLES_PERF_USER_ACCESS="{tmp_path / "perf_user_access"}"',
           "-Wl,--wrap=ioctl", str(CSRC / "join_check.c"), "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stderr}"
    started: list[Join] = []

    def start() -> Join:
        started.append(Join([qemu, "-L", str(ARM64_SYSROOT), str(exe)]))
        return started[-1]
    yield start, fake, node
    for run in started:
        run.close()


def test_a_non_member_is_not_let_in_and_told_why(join):
    """A thread that cannot open the node is not on the module path (perfmon_available 0,
    no JOIN asked), and the reason names the node, its group and mode, and the fix."""
    start, _, node = join
    group, mode = unopenable(node)
    run = start()
    assert run.ask("nodac") == "ok"
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["joined"], got["joins"]) == (0, PATH_NONE, 0, 0)
    why = run.ask("why")
    assert why.startswith(f"not let in: {node} (group {group}, mode {mode}) cannot be "
                          "opened by this user; an admin "), why
    if mode == "0660":
        assert why.endswith(f"adds the user to group {group} (adduser USER {group}), who "
                            "then logs in again"), why
    # The module may read for everyone: then nobody needs letting in.
    _, fake, _ = join
    fake.attr("access", "everyone")
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["joins"]) == (4, PATH_MODULE, 0), got


def test_a_root_only_node_asks_for_a_group(join):
    """Mode 0600, group root (the module's own, without the package's udev rule): the fix
    is to give the node a group, not to add the user to root's."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give the node to another owner")
    start, _, node = join
    os.chown(node, 65534, 0)
    node.chmod(0o600)
    run = start()
    assert run.ask("nodac") == "ok"
    assert run.ask("why") == (
        f"not let in: {node} (group root, mode 0600) cannot be opened by this user; an "
        "admin gives it a group (the package's udev rule: group simple-pmu, mode 0660) and "
        "adds the user to it, who then logs in again")


def test_no_node(join):
    start, _, node = join
    node.unlink()
    run = start()
    assert run.pairs("state")["path"] == PATH_NONE
    assert run.ask("why") == (f"not let in: the module has no {node} (udev not running? a "
                              "container needs the node passed in)")


def test_a_member_is_let_in_once_and_again_after_a_fault(join):
    """A thread that can open the node is let in (one JOIN) when its path becomes the
    module's, and not again while it is; after a faulting module-path read or window it
    asks again, once each, outside the fault handler; the reading or window stays
    invalid. A forked child is not let in by its parent's grant and asks for itself."""
    start, _, _ = join
    run = start()
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["joined"], got["joins"]) == (4, PATH_MODULE, 1, 1)
    assert run.pairs("state")["joins"] == 1  # re-chosen, still let in: not asked again
    # The node is closed at once: an open descriptor would pin the module.
    assert run.pairs("nodefds") == {"fds": 0}
    read = run.pairs("read")
    if not read["flags"] & CYCLES_FAULTED:
        pytest.skip(f"the counter read works here ({read}): no fault to recover from")
    assert (read["rc"], read["flags"], read["joins"]) == (-1, CYCLES_FAULTED, 2)
    assert run.pairs("window") == {"begin": 0, "end": 0, "joins": 3}
    assert run.pairs("state")["in_guard"] == 0
    child = run.pairs("fork")
    assert (child["joined_at_fork"], child["path"], child["joined"], child["joins"]) == (
        0, PATH_MODULE, 1, 4), child


def test_each_thread_is_let_in_on_its_own(join):
    """arm64 lets threads in, not processes (x86's contrast: test_cycles_let_in_x86.py):
    four threads whose first use is at the same moment ask once each."""
    start, _, _ = join
    run = start()
    assert run.pairs("threads 4") == {"ok": 4, "joins": 4}
    got = run.pairs("state")
    assert (got["joins"], got["mapped"], got["tries"]) == (5, 0, 0), got


def test_the_headers_ioctls_are_the_drivers():
    """join_check answers whatever CYCLES_IOC_JOIN is: tie it to drivers/arm64/pmu.h."""
    import re

    repo = INCLUDE.parent
    pmu_h = (repo / "drivers" / "arm64" / "pmu.h").read_text()
    cycles_h = (INCLUDE / "cycles.h").read_text()
    magic = re.search(r"#define SPMU_IOC_MAGIC\s+(0x[0-9A-Fa-f]+)", pmu_h).group(1)
    for name in ("JOIN", "LEAVE"):
        nr = re.search(rf"#define SPMU_IOC_{name}\s+_IO\(SPMU_IOC_MAGIC, (0x[0-9a-f]+)\)",
                       pmu_h).group(1)
        ours = re.search(rf"#define CYCLES_IOC_{name}\s+_IO\((0x[0-9A-Fa-f]+), (0x[0-9a-f]+)\)",
                         cycles_h).groups()
        assert (int(ours[0], 16), int(ours[1], 16)) == (int(magic, 16), int(nr, 16)), name


@pytest.mark.parametrize("access", ["everyone", None])
def test_nobody_needs_letting_in(join, access):
    """access "everyone", or no access attribute (an older module): the module path
    with no JOIN asked, and cycles_join() succeeds without asking."""
    start, fake, _ = join
    if access is None:
        (fake.dir / "access").unlink()
    else:
        fake.attr("access", access)
    run = start()
    got = run.pairs("state")
    assert (got["path"], got["joins"]) == (PATH_MODULE, 0)
    assert run.pairs("join") == {"rc": 0, "errno": 0, "joins": 0}


def test_join_and_leave_by_hand(join):
    """cycles_join(): 0 after one JOIN where access is members, -1 EACCES for a node this
    user cannot open; cycles_leave() asks LEAVE and clears the thread's state."""
    start, fake, node = join
    run = start()
    assert run.pairs("join") == {"rc": 0, "errno": 0, "joins": 1}
    assert run.pairs("leave") == {"rc": 0, "joined": 0, "leaves": 1}
    assert run.pairs("nodefds") == {"fds": 0}
    unopenable(node)
    assert run.ask("nodac") == "ok"
    assert run.pairs("join") == {"rc": -1, "errno": errno.EACCES, "joins": 1}
    shutil.rmtree(fake.dir)
    assert run.pairs("join") == {"rc": -1, "errno": errno.ENOENT, "joins": 1}


# --- simple_pmu: the driver backend of a process that is not let in -------------------

@pytest.fixture
def arm64_driver(tmp_path, monkeypatch, simple_pmu):
    """(probe, node): the Python probe against a fake arm64 driver (access members) and a
    node file; the counter reads faked (they must not be reached when not let in)."""
    import importlib

    sysinfo = importlib.import_module("simple_pmu.sysinfo")
    probe = importlib.import_module("simple_pmu._probe")
    fake = FakeDriver(tmp_path / "sys", max(CPUS) + 1)
    fake.attr("access", "members")
    node = tmp_path / "simple-pmu"
    node.write_text("")
    monkeypatch.setattr(sysinfo, "SYSFS_DIR", fake.dir)
    monkeypatch.setattr(sysinfo, "DEV_NODE", node)
    tried: list[str] = []
    ticks = itertools.count(1)
    monkeypatch.setattr(simple_pmu.native, "driver_available", lambda: tried.append("a") or 4)
    monkeypatch.setattr(simple_pmu.native, "driver_cycles", lambda: next(ticks) * 1000)
    monkeypatch.setattr(simple_pmu.native, "driver_instructions", lambda: next(ticks) * 700)
    cpu = sysinfo.CpuInfo("aarch64", "Arm (0x41)", "CPU part 0xd0c", frozenset(), None, None)
    return probe, cpu, node, fake, tried


def test_python_reason_for_a_non_member(arm64_driver, monkeypatch, jsonout):
    """The driver backend of a process that cannot open the node is unusable with reason
    not_let_in naming the node, its group and mode, and the fix (adduser, log in again);
    nothing is read. The same reason, coded, in the JSON status."""
    import pwd

    from userlib_helpers import validate

    probe, cpu, node, _, tried = arm64_driver
    if os.geteuid() == 0:  # a group of its own, not root's
        os.chown(node, 0, next(g.gr_gid for g in grp.getgrall() if g.gr_gid != 0))
    node.chmod(0o660)
    st = node.stat()
    group = grp.getgrgid(st.st_gid).gr_name
    user = pwd.getpwuid(os.geteuid()).pw_name
    assert probe.probe_driver(cpu).usable and tried  # it opens: let in, and read
    tried.clear()
    refuse_open(monkeypatch, node)
    backend = probe.probe_driver(cpu)
    assert not backend.usable and not tried  # not let in: nothing is read
    (why,) = backend.reasons
    assert why.code == "not_let_in"
    assert str(why) == (f"not let in: {node} (group {group}, mode 0660) cannot be opened by "
                        f"user {user} (EACCES); the module (access members) lets in only the "
                        "threads of users who can open it")
    assert why.remedy == (f"an admin adds the user to group {group} (as root: adduser {user} "
                          f"{group}); {user} then logs in again (a new login has the group)")
    report = probe.Report(cpu, (backend, *(probe.Backend(n, n, False, ("fake",))
                                           for n in ("perf-rdpmc", "perf-read", "timer"))))
    doc = jsonout.status_doc(report)
    validate(doc)
    assert doc["backends"][0]["reason"] == why.to_dict()
    assert doc["backends"][0]["reasons"] == [why.to_dict()]
    # simple-pmu status and read --scope cpu say it with the fix; the error is coded so.
    import importlib

    cli = importlib.import_module("simple_pmu.cli")
    assert why.with_remedy() in " ".join(cli.format_status(report, 2000).split())
    error = cli.no_backend_error(report, "cpu", None)
    assert error.code == "no_counter_backend" and why.with_remedy() in str(error)
    assert report.no_backend("cpu").remedy == why.remedy


def test_python_reason_root_only_node_and_no_node(arm64_driver, monkeypatch):
    """A node with no group that may read it: the fix is the package's udev rule. No node:
    no_dev_node. access everyone: nobody needs the node."""
    probe, cpu, node, fake, _ = arm64_driver
    node.chmod(0o600)
    refuse_open(monkeypatch, node)
    (why,) = probe.probe_driver(cpu).reasons
    assert why.code == "not_let_in" and "mode 0600" in why
    assert why.remedy.startswith("as root: install the package's udev rule (simple-pmu-dkms; "
                                 f"it gives {node} group simple-pmu, mode 0660)")
    if os.geteuid() == 0:  # group-readable, but by root's group: still no group to join
        os.chown(node, 0, 0)
        node.chmod(0o660)
        (why,) = probe.probe_driver(cpu).reasons
        assert why.code == "not_let_in" and "group root, mode 0660" in why
        assert why.remedy.startswith("as root: install the package's udev rule"), why.remedy
    node.unlink()
    (why,) = probe.probe_driver(cpu).reasons
    assert (why.code, str(why)) == ("no_dev_node", (
        f"not let in: the module has no {node} (access members: a thread is let in through "
        "it); udev not running?"))
    fake.attr("access", "everyone")
    assert probe.probe_driver(cpu).usable


@pytest.fixture
def jsonout(simple_pmu):
    import importlib

    return importlib.import_module("simple_pmu.jsonout")
