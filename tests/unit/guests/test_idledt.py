"""pmubuild.guests.idledt with the real qemu-system-aarch64 (dumpdtb only: no guest boots) and
dtc: the tree QEMU builds for a boot's options, with the PSCI idle state and every CPU
referring to it, read back by a flattened-tree reader of this test's own."""

import contextlib
import fcntl
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from pmubuild.common.errors import PipelineError
from pmubuild.guests import idledt, qemu

QEMU = "qemu-system-aarch64"


def read_fdt(data: bytes) -> dict[str, dict[str, bytes]]:
    """Every node of a flattened device tree by path, with its properties' raw values."""
    magic, _total, off_struct, off_strings = struct.unpack_from(">4I", data)
    assert magic == 0xD00DFEED
    nodes: dict[str, dict[str, bytes]] = {}
    path: list[str] = []
    pos = off_struct
    while True:
        (token,) = struct.unpack_from(">I", data, pos)
        pos += 4
        if token == 1:  # FDT_BEGIN_NODE: a NUL-ended name, padded to 4 bytes
            end = data.index(b"\0", pos)
            path.append(data[pos:end].decode())
            pos = (end + 4) & ~3
            nodes["/" + "/".join(path[1:])] = {}
        elif token == 2:  # FDT_END_NODE
            path.pop()
        elif token == 3:  # FDT_PROP: length, name offset, value padded to 4 bytes
            length, name_off = struct.unpack_from(">2I", data, pos)
            pos += 8
            name = data[off_strings + name_off:data.index(b"\0", off_strings + name_off)]
            nodes["/" + "/".join(path[1:])][name.decode()] = data[pos:pos + length]
            pos = (pos + length + 3) & ~3
        elif token == 4:  # FDT_NOP
            continue
        else:
            assert token == 9, token  # FDT_END
            return nodes


def cells(value: bytes) -> list[int]:
    return list(struct.unpack(f">{len(value) // 4}I", value))


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SIMPLE_PMU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / idledt.CACHE


def boot_argv(tmp_path: Path, **kw) -> list[str]:
    return qemu.command("arm64", tmp_path / "Image", tmp_path / "initrd", "test",
                        idle_states=True, **kw)


@pytest.mark.parametrize("smp,el2", [(2, False), (3, True)])
def test_every_cpu_gets_the_psci_idle_state(cache_dir, tmp_path, smp, el2):
    argv = boot_argv(tmp_path, smp=smp, el2=el2)
    dtb = Path(argv[argv.index("-dtb") + 1])
    assert dtb.parent == cache_dir
    tree = read_fdt(dtb.read_bytes())
    idle = tree["/cpus/idle-states"]
    assert idle["entry-method"] == b"psci\0"
    state = tree["/cpus/idle-states/cpu-sleep-0"]
    assert state["compatible"] == b"arm,idle-state\0"
    # A standby state (StateType clear): QEMU runs its CPU_SUSPEND as a WFI.
    assert cells(state["arm,psci-suspend-param"]) == [1]
    for prop in ("entry-latency-us", "exit-latency-us", "min-residency-us"):
        assert 0 < cells(state[prop])[0] <= 10, prop
    (phandle,) = cells(state["phandle"])
    cpus = sorted(p for p in tree if p.startswith("/cpus/cpu@"))
    assert cpus == [f"/cpus/cpu@{n}" for n in range(smp)]
    for cpu in cpus:
        assert cells(tree[cpu]["cpu-idle-states"]) == [phandle], cpu
    # No other node has that phandle (dtc allocated a free one).
    assert [p for p, props in tree.items() if props.get("phandle") == state["phandle"]] == [
        "/cpus/idle-states/cpu-sleep-0"]
    # The machine's own tree, from the same options: EL2 boots call PSCI with SMC.
    assert tree["/psci"]["method"] == (b"smc\0" if el2 else b"hvc\0")
    assert idledt.problems(dtb) == []


def test_the_rest_of_qemus_tree_is_kept(cache_dir, tmp_path):
    """Decompiling and compiling again loses nothing: every node and property of QEMU's
    dump is in the result, equal (the random seeds of /chosen aside: each dump has new
    ones, and QEMU draws them again at each boot)."""
    argv = boot_argv(tmp_path)
    ours = read_fdt(Path(argv[argv.index("-dtb") + 1]).read_bytes())
    machine = argv[1:argv.index("-m") + 2]
    idledt.dump(QEMU, machine, tmp_path / "plain.dtb")
    plain = read_fdt((tmp_path / "plain.dtb").read_bytes())
    for path, props in plain.items():
        for name, value in props.items():
            if path == "/chosen" and name in ("rng-seed", "kaslr-seed"):
                assert len(ours[path][name]) == len(value)
            else:
                assert ours[path][name] == value, f"{path} {name}"
    added = {p: set(v) - set(plain.get(p, {})) for p, v in ours.items()}
    assert {p: a for p, a in added.items() if a} == {
        "/cpus/idle-states": {"entry-method"},
        "/cpus/idle-states/cpu-sleep-0": {"compatible", "arm,psci-suspend-param",
                                          "entry-latency-us", "exit-latency-us",
                                          "min-residency-us", "phandle"},
        "/cpus/cpu@0": {"cpu-idle-states"}, "/cpus/cpu@1": {"cpu-idle-states"}}


def test_the_tree_is_dumped_with_the_boots_own_machine_options(cache_dir, tmp_path,
                                                                monkeypatch):
    seen = []
    real = idledt.dump
    monkeypatch.setattr(idledt, "dump", lambda b, m, out: (seen.append(list(m)),
                                                           real(b, m, out)))
    argv = boot_argv(tmp_path, smp=3, el2=True, icount=True)
    # -M, -cpu, -smp and -m as the boot passes them (-icount shapes no tree).
    assert seen == [argv[1:argv.index("-m") + 2]]
    assert seen[0] == ["-M", "virt,virtualization=on", "-cpu", "max,pauth-impdef=on",
                       "-smp", "3", "-m", "1024"]
    assert "-icount" in argv and "-icount" not in seen[0]


def test_cached_per_qemu_version_and_options(cache_dir, tmp_path, monkeypatch):
    first = boot_argv(tmp_path)
    dtb = first[first.index("-dtb") + 1]

    def no_dump(*a):
        raise AssertionError("dumped again")

    monkeypatch.setattr(idledt, "dump", no_dump)
    again = boot_argv(tmp_path, icount=False)
    assert again[again.index("-dtb") + 1] == dtb
    assert [p.name for p in cache_dir.iterdir()] == [Path(dtb).name]
    version = idledt.qemu_version(QEMU)
    assert version.startswith("QEMU emulator version")
    base = ["-M", "virt", "-cpu", "max,pauth-impdef=on", "-smp", "2", "-m", "1024"]
    keys = {idledt.key(version, base),
            idledt.key(version, [*base[:5], "3", *base[6:]]),
            idledt.key(version, [*base[:7], "2048"]),
            idledt.key(version, ["-M", "virt,virtualization=on", *base[2:]]),
            idledt.key(version, [*base[:2], "-cpu", "max", *base[4:]]),
            idledt.key("QEMU emulator version 9.2.0", base)}
    assert len(keys) == 6
    assert idledt.key(version, base) == idledt.key(version, list(base))
    assert Path(dtb).name == f"virt-{idledt.key(version, base)}.dtb"


def test_options_without_idle_states_are_unchanged(monkeypatch, tmp_path):
    monkeypatch.setattr(qemu.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(idledt, "ensure", lambda *a: pytest.fail("a tree was made"))
    argv = qemu.command("arm64", tmp_path / "Image", tmp_path / "initrd", "test")
    assert "-dtb" not in argv
    assert argv[:12] == ["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on",
                         "-smp", "2", "-m", "1024", "-icount", "shift=0,sleep=off",
                         "-nographic"]
    with pytest.raises(PipelineError, match="arm64 guests only"):
        qemu.command("amd64", tmp_path / "bzImage", tmp_path / "initrd", "test",
                     idle_states=True)


def test_dumpdtb_joins_the_machine_option(tmp_path):
    assert idledt.with_dump(["-M", "virt", "-smp", "2"], Path("/c/x.dtb")) == [
        "-M", "virt,dumpdtb=/c/x.dtb", "-smp", "2"]
    # QEMU's option syntax: a comma in a value is written twice.
    assert idledt.with_dump(["-M", "virt"], Path("/a,b/x.dtb"))[1] == "virt,dumpdtb=/a,,b/x.dtb"
    for bad in (["-smp", "2"], ["-M", "virt", "-M", "virt"], ["-M"]):
        with pytest.raises(PipelineError, match="one -M option"):
            idledt.with_dump(bad, tmp_path / "x.dtb")


def test_a_tree_without_the_state_is_named_wrong(cache_dir, tmp_path):
    plain = tmp_path / "plain.dtb"
    idledt.dump(QEMU, ["-M", "virt", "-cpu", "max", "-smp", "2", "-m", "1024"], plain)
    (problem,) = idledt.problems(plain)
    assert problem.startswith("no usable /cpus/idle-states/cpu-sleep-0")


def test_a_cpu_without_the_reference_is_named(cache_dir, tmp_path):
    argv = boot_argv(tmp_path)
    broken = tmp_path / "broken.dtb"
    shutil.copy(argv[argv.index("-dtb") + 1], broken)
    subprocess.run(["fdtput", "-d", str(broken), "/cpus/cpu@1", "cpu-idle-states"],
                   check=True)
    assert idledt.problems(broken) == [
        "/cpus/cpu@1 cpu-idle-states is [], not [1] (cpu-sleep-0)"]


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


def test_a_cached_tree_needs_no_dtc(cache_dir, tmp_path, monkeypatch):
    argv = boot_argv(tmp_path)
    real = idledt.shutil.which
    monkeypatch.setattr(idledt.shutil, "which",
                        lambda n: None if n in ("dtc", "fdtget") else real(n))
    assert boot_argv(tmp_path) == argv
    with pytest.raises(PipelineError, match="dtc not found"):
        boot_argv(tmp_path, smp=3)


def test_a_killed_builds_leftovers_go_at_the_next_build(cache_dir, tmp_path):
    cache_dir.mkdir(parents=True)
    left = cache_dir / f"{idledt.cache.PARTIAL_PREFIX}abc"
    (left / "qemu.dtb").parent.mkdir()
    (left / "qemu.dtb").write_bytes(b"half")
    boot_argv(tmp_path)
    assert not left.exists()
    assert [p.suffix for p in cache_dir.iterdir()] == [".dtb"]


MACHINE = ["-M", "virt", "-cpu", "max,pauth-impdef=on", "-smp", "2", "-m", "1024"]


def recording_dump(monkeypatch) -> list[list[str]]:
    """idledt.dump, each call's machine options noted first."""
    seen: list[list[str]] = []
    real = idledt.dump
    monkeypatch.setattr(idledt, "dump", lambda b, m, out: (seen.append(list(m)),
                                                           real(b, m, out))[1])
    return seen


@pytest.mark.parametrize("missing", ["dtc", "fdtget"])
def test_a_missing_tool_fails_before_qemu_dumps(cache_dir, monkeypatch, missing):
    seen = recording_dump(monkeypatch)
    real = idledt.shutil.which
    monkeypatch.setattr(idledt.shutil, "which", lambda n: None if n == missing else real(n))
    with pytest.raises(PipelineError, match=f"^{missing} not found "):
        idledt.ensure(QEMU, MACHINE)
    assert seen == []
    assert list(cache_dir.iterdir()) == []


def test_a_tree_built_while_waiting_for_the_lock_is_taken(cache_dir, monkeypatch):
    """Another builder finished the same tree while this one waited for the lock: this one
    takes it as it is and dumps nothing."""
    seen = recording_dump(monkeypatch)
    final = cache_dir / f"virt-{idledt.key(idledt.qemu_version(QEMU), MACHINE)}.dtb"
    real = idledt.cache.locked
    names = []

    @contextlib.contextmanager
    def locked(name):
        with real(name):
            names.append(name)
            final.write_bytes(b"the other builder's tree")
            yield

    monkeypatch.setattr(idledt.cache, "locked", locked)
    assert idledt.ensure(QEMU, MACHINE) == final
    assert names == [idledt.CACHE] and seen == []
    assert final.read_bytes() == b"the other builder's tree"


def test_builders_take_turns_and_leave_the_others_scratch_alone(cache_dir, monkeypatch):
    """While another builder holds the cache's lock (the real one: idledt.lock under the
    cache root) this one neither dumps nor removes the other's scratch directory; once the
    lock is free it builds, and the other's leftovers (it is gone) go."""
    monkeypatch.setattr(idledt, "qemu_version", lambda b: "QEMU emulator version 0.0.0")
    dumping = threading.Event()
    real = idledt.dump
    monkeypatch.setattr(idledt, "dump", lambda b, m, out: (dumping.set(), real(b, m, out))[1])
    cache_dir.mkdir(parents=True)
    other = cache_dir / f"{idledt.cache.PARTIAL_PREFIX}other"
    other.mkdir()
    result: list = []
    with open(cache_dir.parent / f"{idledt.CACHE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        builder = threading.Thread(
            target=lambda: result.append(idledt.ensure(QEMU, MACHINE)), daemon=True)
        builder.start()
        try:
            assert not dumping.wait(1.5), "dumped while another builder held the lock"
            assert other.is_dir(), "removed a scratch directory under another's lock"
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        # A bound against a hang, not a timing: the build runs a dozen tools.
        builder.join(timeout=10 * idledt.TIMEOUT_S)
    assert not builder.is_alive() and dumping.is_set()
    assert [p.name for p in cache_dir.iterdir()] == [result[0].name]
    assert idledt.problems(result[0]) == []


def test_a_wrong_tree_is_not_cached(cache_dir, monkeypatch):
    """A tree that comes out without the state fails the build, names what is wrong and
    leaves nothing behind; a killed run's leftovers go all the same."""
    monkeypatch.setattr(idledt, "add_idle_state",
                        lambda dumped, out: shutil.copy(dumped, out))
    cache_dir.mkdir(parents=True)
    (cache_dir / f"{idledt.cache.PARTIAL_PREFIX}abc").mkdir()
    with pytest.raises(PipelineError) as e:
        idledt.ensure(QEMU, MACHINE)
    assert str(e.value).startswith(
        f"the idle-state tree for {' '.join(MACHINE)} came out wrong: no usable "
        "/cpus/idle-states/cpu-sleep-0: ")
    assert list(cache_dir.iterdir()) == []


def test_a_stuck_tool_is_stopped(monkeypatch):
    # Only the timeout path says "did not finish" (a finished sleep 30 raises nothing).
    monkeypatch.setattr(idledt, "TIMEOUT_S", 0.5)
    with pytest.raises(PipelineError, match=r"^a stuck dumpdtb did not finish in 0\.5 s: "
                                            r"sleep 30$"):
        idledt._run(["sleep", "30"], "a stuck dumpdtb")
