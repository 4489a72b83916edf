"""Letting a process in (x86-64): where the module's sysfs access is "members", cycles.h
opens the device node, maps one page of it (PROT_READ, MAP_SHARED, offset 0; never
touched) and closes it, once for the whole process, when a thread's path first becomes
the module's; cycles_leave() unmaps it; a forked child (which has no mapping: the kernel's
VM_DONTCOPY) maps its own at its first use. A refused mapping (EPERM: perf allows no user
RDPMC) gives a reason naming the cpu PMU's rdpmc attribute and the fix; a node this user
cannot open gives the group reason, as on arm64. access "everyone", or no access at all
(an older module, which needs rdpmc 2), maps nothing. simple_pmu's probe says the same.

cycles.h runs here natively (c/join_check.c, as the arm64 tests of test_cycles_join.py
run it under qemu-aarch64), against a FakeX86Driver and a file standing in for the node
(CYCLES_DEV_NODE); its mmap()s and munmap()s are caught by the program
(-Wl,--wrap=mmap,--wrap=munmap), counted, checked and made on the stand-in, or refused
with the errno a test asks for. The driver side of this ABI: docs/ABI of the x86 module.
"""

from __future__ import annotations

import errno
import itertools
import mmap
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from userlib_helpers import INCLUDE, FakeX86Driver, Join, refuse_open, unopenable

CSRC = Path(__file__).resolve().parent / "c"
CPUS = sorted(os.sched_getaffinity(0))
PATH_NONE, PATH_MODULE = 0, 3  # enum cycles_path_id
PMU_VERSION = 5  # FakeX86Driver's pmu_version: perfmon_available() on the module path


def need_x86() -> None:
    if os.uname().machine != "x86_64":
        pytest.skip("cycles.h's x86 let-in runs natively on x86-64 only")


def members_driver(tmp_path: Path) -> tuple[FakeX86Driver, Path]:
    """A FakeX86Driver whose access is "members" (rdpmc 1, the kernel's default: the module
    needs no 2 then), and an empty file standing in for its node."""
    need_x86()
    fake = FakeX86Driver(tmp_path / "sys", max(CPUS) + 1)
    fake.attr("access", "members")
    fake.attr("members", 0)
    fake.rdpmc("cpu", 1)
    node = tmp_path / "simple-pmu"
    node.write_text("")
    return fake, node


@pytest.fixture
def x86_join(tmp_path):
    """(start, fake, node): start() runs join_check, built natively, against a
    FakeX86Driver whose access is "members" (rdpmc 1, the kernel's default: the module
    needs no 2 then) and a node file (openable until a test says otherwise)."""
    fake, node = members_driver(tmp_path)
    node.chmod(0o666)
    exe = tmp_path / "join_check"
    cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-I", str(INCLUDE),
           f'-DCYCLES_SYSFS_DIR="{fake.dir}"', f'-DCYCLES_DEV_NODE="{node}"',
           f'-DCYCLES_EVENT_SOURCE_DIR="{fake.event_source}"',
           "-Wl,--wrap=ioctl,--wrap=mmap,--wrap=munmap,--wrap=pthread_mutex_unlock,"
           "--wrap=opendir", str(CSRC / "join_check.c"),
           "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stderr}"
    started: list[Join] = []

    def start() -> Join:
        started.append(Join([str(exe)]))
        return started[-1]
    yield start, fake, node
    for run in started:
        run.close()


def let_in(got: dict[str, int], joins: int = 1) -> None:
    """got (a `state`) is on the module path with the process let in by joins mappings,
    and nothing was asked by ioctl."""
    assert (got["avail"], got["path"], got["joined"], got["mapped"]) == (
        PMU_VERSION, PATH_MODULE, 1, 1), got
    assert (got["joins"], got["ioctls"], got["in_guard"]) == (joins, 0, 0), got


def test_threads_let_the_process_in_once(x86_join):
    """Eight threads whose first use of the header is at the same moment: all on the
    module path, one mapping for the process, made as the ABI says (no address, one page,
    PROT_READ, MAP_SHARED, offset 0, a descriptor on the node, closed at once). Threads
    after it, and the main thread, find it: no mapping again."""
    start, _, _ = x86_join
    run = start()
    assert run.pairs("threads 8") == {"ok": 8, "joins": 1}
    args = run.pairs("mapargs")
    assert args == {"addr": 0, "len": args["pagesize"], "pagesize": mmap.PAGESIZE,
                    "prot": mmap.PROT_READ, "flags": mmap.MAP_SHARED, "off": 0, "nodefd": 1,
                    "unmapped_len": 0}, args
    assert run.pairs("nodefds") == {"fds": 0}  # the mapping holds the module, no fd
    assert run.pairs("threads 4") == {"ok": 4, "joins": 1}
    got = run.pairs("state")
    let_in(got)
    assert got["tries"] == 1
    # A read (here it faults: no user RDPMC on this host) asks for nothing more.
    run.pairs("read")
    assert run.pairs("state")["joins"] == 1


def test_racing_threads_all_find_the_module(x86_join):
    """Sixteen threads at once, many times: each one's first perfmon_available() finds the
    module's counters (another thread's refill of the placement cache, which empties it
    meanwhile, is not seen as "no cycle counter on this CPU"); one mapping in all.
    By chance first, then with the race made to happen (racehook): a thread just out of
    cycles_module_lock sleeps 200 us, and a refill sleeps 1 ms while the cache is empty,
    so a look at the cache outside the lock, right after a refill, finds another thread's
    refill under way nearly every time (a look inside it, as it must be, never does)."""
    start, _, _ = x86_join
    run = start()
    for _ in range(10):
        assert run.pairs("threads 16") == {"ok": 16, "joins": 1}
    assert run.ask("racehook 200 1000") == "ok"
    for _ in range(10):
        assert run.pairs("threads 16") == {"ok": 16, "joins": 1}


def test_leave_unmaps_the_process(x86_join):
    """cycles_leave() unmaps the process's mapping (the one made, one page); the next
    perfmon_available() lets it in again; cycles_join() maps only where no mapping is."""
    start, _, _ = x86_join
    run = start()
    let_in(run.pairs("state"))
    assert run.pairs("leave") == {"rc": 0, "joined": 0, "leaves": 1}
    assert run.pairs("mapargs")["unmapped_len"] == mmap.PAGESIZE
    assert run.pairs("leave") == {"rc": 0, "joined": 0, "leaves": 1}  # nothing left
    let_in(run.pairs("state"), joins=2)
    assert run.pairs("join") == {"rc": 0, "errno": 0, "joins": 2}  # mapped already
    assert run.pairs("leave")["leaves"] == 2
    assert run.pairs("join") == {"rc": 0, "errno": 0, "joins": 3}
    assert run.pairs("nodefds") == {"fds": 0}


def test_a_leave_by_one_thread_is_every_threads(x86_join):
    """cycles_leave() on one thread unmaps the process's mapping, which was every thread's:
    another thread that was let in (joined, as it last saw it) maps again at its next
    perfmon_available(), since x86 asks whether the process is mapped, not whether the
    thread once was; and the other way round."""
    start, _, _ = x86_join
    run = start()
    let_in(run.pairs("state"))
    let_in(run.pairs("other state"))  # the other thread finds the mapping: none made
    assert run.pairs("leave") == {"rc": 0, "joined": 0, "leaves": 1}
    let_in(run.pairs("other state"), joins=2)
    assert run.pairs("other leave") == {"rc": 0, "joined": 0, "leaves": 2}
    let_in(run.pairs("state"), joins=3)
    assert run.pairs("nodefds") == {"fds": 0}


def test_a_refusal_after_a_leave_is_not_joined(x86_join):
    """A thread let in by cycles_join(), whose process another thread then took out, is
    refused at its next perfmon_available() (mmap EPERM): not on the module path, and no
    longer joined; once the kernel allows it, it is let in again."""
    start, _, _ = x86_join
    run = start()
    assert run.pairs("join") == {"rc": 0, "errno": 0, "joins": 1}
    let_in(run.pairs("state"))
    assert run.pairs("other leave") == {"rc": 0, "joined": 0, "leaves": 1}
    assert run.ask("mmaperr 1") == "ok"
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["joined"], got["mapped"]) == (0, PATH_NONE, 0, 0)
    assert got["joins"] == 1 and got["tries"] >= 2, got
    assert run.ask("why").startswith("not let in: ")
    assert run.ask("mmaperr 0") == "ok"
    let_in(run.pairs("state"), joins=2)


def test_a_forked_child_maps_at_its_first_use(x86_join):
    """The child of a let-in process starts without a mapping (the kernel copies none)
    and maps its own at its first use; the parent's stays, counted once."""
    start, _, _ = x86_join
    run = start()
    let_in(run.pairs("state"))
    child = run.pairs("fork")
    assert (child["joined_at_fork"], child["mapped_at_fork"]) == (0, 0), child
    let_in(child, joins=2)
    let_in(run.pairs("state"))


@pytest.mark.parametrize("pmus,named,value", [
    ({"cpu": 0}, "cpu", 0),
    ({"cpu": 1}, "cpu", 1),
    ({"cpu": None, "cpu_core": 1, "cpu_atom": 0}, "cpu_atom", 0),
    ({"cpu": None, "cpu_core": 1, "cpu_atom": 1}, "cpu_core", 1),
])
def test_a_refused_mapping_names_rdpmc(x86_join, pmus, named, value):
    """The mapping refused with EPERM: not on the module path, and the reason says perf
    allows no user RDPMC, naming the rdpmc attribute that is 0 and the fix (1), else the
    rule of kernels that keep CPU-wide counters from user RDPMC below 2 and its fix (2,
    everyone). cycles_join() says EPERM. Once the kernel allows it, the process is in."""
    start, fake, node = x86_join
    for pmu, mode in pmus.items():
        fake.rdpmc(pmu, mode)
    attr = fake.event_source / named / "rdpmc"
    run = start()
    assert run.ask("mmaperr 1") == "ok"
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["joined"], got["mapped"]) == (0, PATH_NONE, 0, 0)
    assert (got["joins"], got["ioctls"]) == (0, 0) and got["tries"] >= 1
    head = f"not let in: {node} refused to let this process in (EPERM): "
    if value == 0:
        assert run.ask("why") == (
            f"{head}perf allows no user RDPMC ({attr} is 0); an admin writes 1 to it "
            f"(echo 1 > {attr}; cpu_core and cpu_atom on hybrid parts)")
    else:
        assert run.ask("why") == (
            f"{head}this kernel lets user RDPMC read CPU-wide counters only at rdpmc 2 "
            "(Linux 7.x on Panther Cove and later); an admin writes 2 to "
            f"{attr} (cpu_core and cpu_atom on hybrid parts), which lets every task read "
            "them (access everyone)")
    assert run.pairs("join") == {"rc": -1, "errno": errno.EPERM, "joins": 0}
    assert run.ask("mmaperr 0") == "ok"
    let_in(run.pairs("state"))


def test_another_refusal_is_named(x86_join):
    """A mapping refused otherwise (EINVAL: a module that does not match) says so."""
    start, _, node = x86_join
    run = start()
    assert run.ask("mmaperr 22") == "ok"
    assert run.pairs("state")["path"] == PATH_NONE
    assert run.ask("why") == (f"not let in: {node} refused to let this process in "
                              "(Invalid argument)")
    assert run.pairs("join") == {"rc": -1, "errno": errno.EINVAL, "joins": 0}


def test_a_non_member_is_told_the_group(x86_join):
    """A node this user cannot open: nothing is mapped, and the reason is arm64's (the
    node, its group and mode, the fix); cycles_join() says EACCES."""
    start, _, node = x86_join
    group, mode = unopenable(node)
    run = start()
    assert run.ask("nodac") == "ok"
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["tries"], got["joins"]) == (0, PATH_NONE, 0, 0)
    why = run.ask("why")
    assert why.startswith(f"not let in: {node} (group {group}, mode {mode}) cannot be "
                          "opened by this user; an admin "), why
    assert run.pairs("join") == {"rc": -1, "errno": errno.EACCES, "joins": 0}


def test_no_node(x86_join):
    start, _, node = x86_join
    node.unlink()
    run = start()
    assert run.pairs("state")["path"] == PATH_NONE
    assert run.ask("why") == (f"not let in: the module has no {node} (udev not running? a "
                              "container needs the node passed in)")


@pytest.mark.parametrize("access", ["everyone", None])
def test_nobody_needs_letting_in(x86_join, access):
    """access "everyone" (the cpu PMU's rdpmc is 2), or no access attribute (an older
    module, read where rdpmc is 2): the module path with nothing mapped; cycles_join()
    and cycles_leave() succeed without a system call on the node. The older module
    where rdpmc is 1: refused for rdpmc, still nothing mapped."""
    start, fake, _ = x86_join
    fake.rdpmc("cpu", 2)
    if access is None:
        (fake.dir / "access").unlink()
    else:
        fake.attr("access", access)
    run = start()
    got = run.pairs("state")
    assert (got["avail"], got["path"], got["tries"], got["joins"]) == (
        PMU_VERSION, PATH_MODULE, 0, 0), got
    assert run.pairs("join") == {"rc": 0, "errno": 0, "joins": 0}
    assert run.pairs("leave") == {"rc": 0, "joined": 0, "leaves": 0}
    assert run.pairs("threads 4") == {"ok": 4, "joins": 0}
    if access is None:
        fake.rdpmc("cpu", 1)
        assert run.ask("why") == "the cpu PMU's rdpmc is not 2"
        assert run.pairs("state")["tries"] == 0


# --- simple_pmu: the probe of an x86 module that lets processes in ---------------------

@pytest.fixture
def x86_driver(tmp_path, monkeypatch, simple_pmu):
    """(probe, cpu, node, fake, tried, maps): the Python probe against a FakeX86Driver with
    access members (rdpmc 1) and a node file; the counter reads faked (tried records them:
    they must not be reached when the process is not let in), and so is the mapping that
    lets the process in (maps records the node descriptors it was asked for; maps.errno,
    if set, is its answer)."""
    import importlib

    fake, node = members_driver(tmp_path)
    sysinfo = importlib.import_module("simple_pmu.sysinfo")
    probe = importlib.import_module("simple_pmu._probe")
    monkeypatch.setattr(sysinfo, "SYSFS_DIR", fake.dir)
    monkeypatch.setattr(sysinfo, "DEV_NODE", node)
    monkeypatch.setattr(sysinfo, "EVENT_SOURCE", fake.event_source)
    monkeypatch.setattr(probe, "EVENT_SOURCE", fake.event_source)

    class Maps(list):
        errno: int | None = None
    maps = Maps()

    def mapping(fd):
        maps.append(os.readlink(f"/proc/self/fd/{fd}"))
        return maps.errno
    monkeypatch.setattr(sysinfo, "let_in_mapping", mapping)
    tried: list[str] = []
    ticks = itertools.count(1)
    monkeypatch.setattr(simple_pmu.native, "driver_available",
                        lambda: tried.append("a") or PMU_VERSION)
    monkeypatch.setattr(simple_pmu.native, "driver_cycles", lambda: next(ticks) * 1000)
    monkeypatch.setattr(simple_pmu.native, "driver_instructions", lambda: next(ticks) * 700)
    perfmon = sysinfo.Perfmon(version=5, num_gp=8, num_fixed=3, fixed_width=48,
                              fixed_mask=0x7, events_unavailable=0, gp_width=48)
    cpu = sysinfo.CpuInfo("x86_64", "GenuineIntel", "fake", frozenset({"tsc"}), None, perfmon)
    return probe, cpu, node, fake, tried, maps


def test_python_member_needs_no_rdpmc_2(x86_driver):
    """access members, rdpmc 1: usable, after one trial mapping of the node (no
    rdpmc_not_always); the trial reads ran."""
    probe, cpu, node, _, tried, maps = x86_driver
    backend = probe.probe_driver(cpu)
    assert backend.usable, backend.reasons
    assert maps == [str(node)] and tried


@pytest.mark.parametrize("pmus,code,named", [
    ({"cpu": 0}, "not_let_in_rdpmc_off", "cpu"),
    ({"cpu": 1}, "not_let_in_rdpmc_not_always", "cpu"),
    ({"cpu": None, "cpu_core": 1, "cpu_atom": 0}, "not_let_in_rdpmc_off", "cpu_atom"),
])
def test_python_refused_mapping(x86_driver, pmus, code, named):
    """The mapping refused with EPERM: unusable, nothing read, the reason names the rdpmc
    attribute and its fix (1 where it is 0, else 2, an admin's choice)."""
    probe, cpu, node, fake, tried, maps = x86_driver
    for pmu, mode in pmus.items():
        fake.rdpmc(pmu, mode)
    maps.errno = errno.EPERM
    backend = probe.probe_driver(cpu)
    assert not backend.usable and not tried and maps == [str(node)]
    (why,) = backend.reasons
    attr = fake.event_source / named / "rdpmc"
    head = f"not let in: {node} refused to let this process in (EPERM): "
    assert why.code == code
    if code == "not_let_in_rdpmc_off":
        assert str(why) == f"{head}perf allows no user RDPMC ({attr} is 0)"
        assert why.remedy == (f"as root: echo 1 > {attr} (the kernel's default; on hybrid "
                              "parts cpu_core's and cpu_atom's)")
    else:
        assert str(why) == (f"{head}this kernel lets user RDPMC read CPU-wide counters only "
                            f"at rdpmc 2 ({attr} is 1; Linux 7.x on Panther Cove and later)")
        assert why.remedy.startswith("an admin's choice, as it lets every task RDPMC")
        assert f"echo 2 > {attr}; the module's access is then everyone" in why.remedy


def test_python_other_refusal_and_non_member(x86_driver, monkeypatch):
    """EINVAL: let_in_refused. A node this user cannot open: not_let_in (arm64's reason),
    without a mapping tried. No node: no_dev_node."""
    probe, cpu, node, _, tried, maps = x86_driver
    maps.errno = errno.EINVAL
    (why,) = probe.probe_driver(cpu).reasons
    assert (why.code, str(why)) == ("let_in_refused", (
        f"not let in: {node} refused to let this process in: EINVAL (Invalid argument)"))
    maps.clear()
    node.chmod(0o600)
    refuse_open(monkeypatch, node)
    (why,) = probe.probe_driver(cpu).reasons
    assert why.code == "not_let_in" and "mode 0600" in why and not maps and not tried
    node.unlink()
    (why,) = probe.probe_driver(cpu).reasons
    assert why.code == "no_dev_node" and not maps


@pytest.mark.parametrize("access", ["everyone", None])
def test_python_nobody_needs_letting_in(x86_driver, access):
    """access everyone, or an older module without access where rdpmc is 2: usable, no
    mapping tried. The older module at rdpmc 1: rdpmc_not_always, still none."""
    probe, cpu, _, fake, tried, maps = x86_driver
    fake.rdpmc("cpu", 2)
    if access is None:
        (fake.dir / "access").unlink()
    else:
        fake.attr("access", access)
    assert probe.probe_driver(cpu).usable and tried and not maps
    if access is None:
        fake.rdpmc("cpu", 1)
        assert [r.code for r in probe.probe_driver(cpu).reasons] == ["rdpmc_not_always"]
        assert not maps


def test_python_the_mapping_is_the_abis(tmp_path, monkeypatch, simple_pmu):
    """sysinfo.let_in_mapping() maps as cycles.h does (one page of the node's descriptor,
    PROT_READ, MAP_SHARED, offset 0), never touches it, unmaps it at once, and gives the
    kernel's errno; dev_node() closes the node again."""
    import importlib

    sysinfo = importlib.import_module("simple_pmu.sysinfo")
    node = tmp_path / "simple-pmu"
    node.write_text("")
    calls: list[tuple[str, int, int, int, int]] = []
    closed: list[bool] = []
    refuse: list[int] = []

    class Page:
        def close(self):
            closed.append(True)

        def __getitem__(self, _):  # a touch of the page: SIGBUS on the real node
            raise AssertionError("the let-in page was touched")

    def fake_mmap(fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE | mmap.PROT_READ,
                  access=mmap.ACCESS_DEFAULT, offset=0):
        calls.append((os.readlink(f"/proc/self/fd/{fd}"), length, flags, prot, offset))
        if refuse:
            raise OSError(refuse[0], os.strerror(refuse[0]))
        return Page()
    monkeypatch.setattr(sysinfo.mmap, "mmap", fake_mmap)
    dev = sysinfo.dev_node(node, let_in=True)
    assert (dev.error, dev.map_error) == (None, None)
    assert calls == [(str(node), mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ, 0)]
    assert closed == [True]
    refuse.append(errno.EPERM)
    assert sysinfo.dev_node(node, let_in=True).map_error == errno.EPERM
    assert sysinfo.dev_node(node).map_error is None and len(calls) == 2  # arm64: no mapping
    fds = [f for f in os.listdir("/proc/self/fd")
           if os.path.realpath(f"/proc/self/fd/{f}") == str(node)]
    assert fds == []


def test_python_the_real_mapping_of_a_file(tmp_path, simple_pmu):
    """The real mmap of a page of a file (a stand-in: the node is a character device, which
    Python maps without a size check) works and is gone at once; an empty regular file
    is no node (EINVAL)."""
    import importlib

    sysinfo = importlib.import_module("simple_pmu.sysinfo")
    node = tmp_path / "simple-pmu"
    node.write_bytes(b"\0" * mmap.PAGESIZE)
    assert sysinfo.dev_node(node, let_in=True).map_error is None
    assert str(node) not in Path("/proc/self/maps").read_text()
    node.write_text("")
    assert sysinfo.dev_node(node, let_in=True).map_error == errno.EINVAL


def test_join_check_builds_for_both():
    """join_check.c's x86 wrappers stay out of the arm64 build (test_cycles_join.py's)."""
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.fail("aarch64-linux-gnu-gcc is not installed; ./devenv installs it")
    res = subprocess.run(["aarch64-linux-gnu-gcc", "-fsyntax-only", "-Wall", "-Wextra",
                          "-Werror", "-I", str(INCLUDE), str(CSRC / "join_check.c")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
