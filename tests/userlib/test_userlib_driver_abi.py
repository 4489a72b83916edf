"""simple_pmu against the arm64 driver's per-CPU sysfs ABI, on fake driver directories.

The machine running the tests has no arm64 driver: sysfs is a FakeDriver tree, the CPU
is described as arm64, and the extension's counter reads are replaced by Python fakes
(the real reads are exercised in the arm64 guests, tests/guest/py/spmu_check.py).
"""

from __future__ import annotations

import importlib
import itertools
import os

import pytest
from userlib_helpers import FakeDriver

CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture
def mods(simple_pmu):
    names = ("probe", "sysinfo", "measure", "reasons", "mhz")
    return {n: importlib.import_module(f"simple_pmu.{n}") for n in names}


@pytest.fixture
def fake(tmp_path, monkeypatch, mods):
    """A FakeDriver that the library reads as /sys/devices/system/simple-pmu/simple-pmu0."""
    driver = FakeDriver(tmp_path / "sys", max(CPUS) + 1)
    monkeypatch.setattr(mods["sysinfo"], "SYSFS_DIR", driver.dir)
    return driver


def arm64_cpu(mods):
    return mods["sysinfo"].CpuInfo("aarch64", "Arm (0x41)", "CPU part 0xd0c", frozenset(),
                                   None, None)


@pytest.fixture
def fake_reads(simple_pmu, monkeypatch):
    """Counter reads that work and advance, in this process and in forked children."""
    native = simple_pmu.native
    ticks = itertools.count(1)
    monkeypatch.setattr(native, "driver_available", lambda: 4)
    monkeypatch.setattr(native, "driver_cycles", lambda: next(ticks) * 1000)
    monkeypatch.setattr(native, "driver_instructions", lambda: next(ticks) * 700)
    return native


# --- parsing ----------------------------------------------------------------------

def test_parsers(mods):
    si = mods["sysinfo"]
    assert si.parse_events("0x8\n") == [8]
    assert si.parse_events("0x8,0x11") == [8, 0x11]
    assert si.parse_events("none") == [] and si.parse_events("") == []
    for bad in ("0x8,", "x8", "0x8;0x11", "-8"):
        with pytest.raises(ValueError):
            si.parse_events(bad)
    assert si.parse_index_list("31 5") == [31, 5]
    assert si.parse_index_list("-1 2\n") == [-1, 2]
    assert si.parse_index_list("") == []
    for bad in ("32", "-2", "5:0x0008", "a"):
        with pytest.raises(ValueError):
            si.parse_index_list(bad)
    assert si.parse_cpulist("0-3,6\n") == [0, 1, 2, 3, 6]
    assert si.parse_cpulist("") == []
    with pytest.raises(ValueError):
        si.parse_cpulist("3-1")
    assert si.counter_width(31, 32) == 64
    assert si.counter_width(0, 32) == 32 and si.counter_width(30, 64) == 64


def test_driver_placement_reads_every_cpu(fake, mods):
    fake.place(CPUS[-1], 2, [3])
    fake.cpu_attr(CPUS[0], "interventions", 7)
    placement = mods["sysinfo"].driver_placement()
    assert sorted(placement) == list(range(max(CPUS) + 1))
    first, last = placement[CPUS[0]], placement[CPUS[-1]]
    assert (first.cycle_index, first.event_index, first.interventions) == (31, (5,), 7)
    assert (last.cycle_index, last.event_index) == (2, (3,))
    assert last.generation == fake.generation(CPUS[-1])
    fake.cpu_attr(CPUS[0], "cycle_index", "junk")
    assert mods["sysinfo"].driver_placement()[CPUS[0]].cycle_index is None
    # driver_attrs() lists the top-level attributes only, never a cpuN/ directory.
    attrs = mods["sysinfo"].driver_attrs()
    assert attrs["events"] == "0x8" and not any(k.startswith("cpu") and k != "cpus"
                                                for k in attrs)


# --- why the driver backend is (not) usable ------------------------------------------

def placement(mods, fake):
    facts: dict[str, object] = {}
    attrs = mods["sysinfo"].driver_attrs()
    return mods["probe"].arm64_placement(fake.dir, attrs, CPUS, facts), facts


def test_placement_uniform(fake, mods):
    result, facts = placement(mods, fake)
    assert (result.found, result.cpu_problems, result.cpus) == ([], [], CPUS)
    assert result.counters == ("cycles", "instructions")
    assert facts["placement"] == "every CPU: cycles 31, 0x8 5"


def test_placement_cpu_without_cycle_counter(fake, mods):
    """A CPU whose cpuN/cycle_index is -1: named, with the file, and left out."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    bad = CPUS[-1]
    fake.place(bad, -1, [-1])
    result, facts = placement(mods, fake)
    assert result.cpus == CPUS[:-1] and result.found == []
    (problem,) = result.cpu_problems
    assert problem.startswith(f"CPU {bad}: the driver's cycle counter is not on a counter")
    assert f"({fake.dir}/cpu{bad}/cycle_index is -1:" in problem
    assert f"cpu{bad}: cycles -1, 0x8 -1" in str(facts["placement"])


def test_placement_event_not_placed(fake, mods):
    fake.attr("events", "0x11,0x8")
    for cpu in CPUS:
        fake.place(cpu, 31, [4, 3])
    fake.place(CPUS[0], 31, [4, -1])
    result, _ = placement(mods, fake)
    assert CPUS[0] not in result.cpus
    assert result.cpu_problems == [
        f"CPU {CPUS[0]}: the driver's event 0x8 is not on a counter user space can read "
        f"({fake.dir}/cpu{CPUS[0]}/event_index is '4 -1'); user access stays closed on "
        "that CPU"]


def test_placement_settings(fake, mods):
    fake.attr("user_access", 0)
    fake.attr("events", "0x11")
    for cpu in CPUS:
        fake.place(cpu, 31, [4])
    result, _ = placement(mods, fake)
    assert result.found == ["the driver's user access is off (user_access is 0)"]
    assert result.counters == ("cycles",)
    assert result.notes == ["no instructions: the driver counts no INST_RETIRED (event 0x08)"
                            " event (events is '0x11')"]
    fake.attr("event_width", 48)
    fake.attr("user_access", 1)
    result, _ = placement(mods, fake)
    assert result.found == [f"{fake.dir}/event_width holds '48', which this library cannot"
                            " parse"]


def test_placement_old_driver(tmp_path, mods):
    """A driver from before the per-CPU ABI (event_counters, cycle_counter) is named so."""
    old = tmp_path / "simple-pmu0"
    old.mkdir()
    for name, value in (("user_access", "1"), ("cycle_counter", "1"),
                        ("event_counters", "5:0x0008"), ("pmu_version", "4")):
        (old / name).write_text(value + "\n")
    attrs = mods["sysinfo"].driver_attrs(old)
    result = mods["probe"].arm64_placement(old, attrs, CPUS, {})
    assert result.found == [
        "the loaded simple-pmu module does not publish events, event_width, cpuN/ "
        "directories: it is older than this library, which reads the per-CPU counter "
        "placement (cpuN/cycle_index, cpuN/event_index, cpuN/generation, event_width)"]


def test_probe_driver_usable_where_placed(fake, mods, fake_reads):
    """The whole driver probe on arm64: trials only where the counters are placed."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    bad = CPUS[-1]
    fake.place(bad, -1, [-1])
    backend = mods["probe"].probe_driver(arm64_cpu(mods))
    assert backend.usable, backend.reasons
    assert backend.cpus == tuple(CPUS[:-1])
    assert backend.counters == ("cycles", "instructions")
    assert any(n.startswith(f"not usable on every CPU: CPU {bad}: the driver's cycle counter")
               for n in backend.notes), backend.notes
    for cpu in CPUS[:-1]:
        fake.place(cpu, -1, [-1])
    backend = mods["probe"].probe_driver(arm64_cpu(mods))
    assert not backend.usable
    assert len(backend.reasons) == len(CPUS)
    assert all(f"cpu{c}/cycle_index is -1" in r for c, r in zip(CPUS, backend.reasons,
                                                                  strict=True))


def test_probe_driver_refused_in_the_child(fake, mods, fake_reads, monkeypatch):
    """perfmon_available() 0 on a CPU (its own checks) is that CPU's reason."""
    monkeypatch.setattr(fake_reads, "driver_available", lambda: 0)
    backend = mods["probe"].probe_driver(arm64_cpu(mods))
    assert not backend.usable
    assert backend.reasons == tuple(
        f"cycles.h perfmon_available() returns 0 on CPU {c} with the module loaded"
        for c in CPUS)


# --- measure(): generation and widths ----------------------------------------------

class FakeSpan:
    """Stands in for _native.DriverSpan: what start()/stop() 'read' is set per test."""

    values_: tuple[int, int, int, int] = (0, 0, 0, 0)
    info_: dict[str, int] = {}
    created = 0

    def __init__(self, instructions: bool = True) -> None:
        FakeSpan.created += 1

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def values(self) -> tuple[int, int, int, int]:
        return self.values_

    def info(self) -> dict[str, int]:
        return self.info_


@pytest.fixture
def driver_measure(fake, mods, simple_pmu, monkeypatch):
    """measure('driver') on the fake arm64 driver, with FakeSpan for the C reads."""
    native = simple_pmu.native
    monkeypatch.setattr(native, "ARCH", "aarch64")
    monkeypatch.setattr(native, "DriverSpan", FakeSpan)
    monkeypatch.setattr(native, "guard", lambda: None)
    monkeypatch.setattr(native, "driver_indices", lambda: (CPUS[0], 31, 5))
    probe = mods["probe"]
    driver = probe.Backend("driver", "fake", True, (), (), ("cycles", "instructions"),
                           {"recheck_ms": 100}, tuple(CPUS))
    others = tuple(probe.Backend(n, n, False, ("fake",)) for n in
                   ("perf-rdpmc", "perf-read", "timer"))
    report = probe.Report(arm64_cpu(mods), (driver, *others))
    monkeypatch.setattr(mods["measure"], "_cache", {"report": report})

    def run(values, cycle_index=31, insn_index=5, before=10, after=10):
        FakeSpan.values_ = values
        FakeSpan.info_ = {"cpu": CPUS[0], "cycle_index": cycle_index,
                          "insn_index": insn_index, "generation_before": before,
                          "generation_after": after}
        with simple_pmu.measure("driver") as m:
            pass
        return m
    return run


def test_measure_wraps_by_counter_width(driver_measure, fake):
    # PMCCNTR_EL0 (64 bits) across 2^64; a 32-bit event counter across 2^32.
    m = driver_measure((2**64 - 1000, 500, 2**32 - 10, 5))
    assert (m.cycles, m.instructions, m.generation, m.reason) == (1500, 15, 10, "")
    # Cycles on an event counter: event_width (32) applies to them too.
    m = driver_measure((2**32 - 1, 1, 7, 9), cycle_index=2)
    assert (m.cycles, m.instructions) == (2, 2)
    # event_width comes from sysfs: 64-bit event counters do not wrap at 2^32.
    fake.attr("event_width", 64)
    m = driver_measure((5, 2**40 + 5, 1, 2**33 + 1), cycle_index=2)
    assert (m.cycles, m.instructions) == (2**40, 2**33)


def test_measure_reports_a_generation_change(driver_measure):
    m = driver_measure((100, 200, 300, 400), before=41, after=42)
    assert m.cycles is None and m.instructions is None and m.generation is None
    assert m.reason == (
        f"the driver's counters on CPU {CPUS[0]} changed during the measurement "
        f"(cpu{CPUS[0]}/generation 41 -> 42: perf moved or reloaded a counter, the CPU went "
        "offline and back, or the settings changed); counts discarded, measure again")
    m = driver_measure((100, 200, 300, 400), before=42, after=42)
    assert (m.cycles, m.instructions, m.generation) == (100, 100, 42)


def test_measure_refuses_a_bad_event_width(driver_measure, fake, simple_pmu):
    fake.attr("event_width", "wide")
    with pytest.raises(simple_pmu.CounterUnavailable, match="event_width holds 'None'"):
        driver_measure((0, 0, 0, 0))


# --- mhz: a changed generation drops that run's cycles --------------------------------

def test_mhz_cycles_respect_generation_and_width(mods, simple_pmu):
    mhz = mods["mhz"]
    reads = iter([2**32 - 100, 50] * mhz.REPEATS)
    gens = iter([7, 7] * mhz.REPEATS)
    sample = mhz._fastest(1, 50, lambda: 0, lambda: next(reads),
                          lambda a, b: (b - a) % 2**32, lambda: next(gens))
    assert sample.cycles == 150
    reads = iter([1, 2] * mhz.REPEATS)
    gens = iter([7, 8] * mhz.REPEATS)  # every run saw a new generation
    sample = mhz._fastest(1, 50, lambda: 0, lambda: next(reads), None, lambda: next(gens))
    assert sample.cycles is None


def test_reader_of_this_cpu(driver_measure, mods, simple_pmu, monkeypatch):
    """A pinned Python-level reader (mhz, read) takes the widths of this CPU's counters."""
    reader = mods["measure"].open_reader(mods["measure"]._cache["report"], "driver")
    assert reader.event_width == 32 and reader.generation is simple_pmu.native.driver_generation
    monkeypatch.setattr(simple_pmu.native, "driver_indices", lambda: (CPUS[0], 3, 4))
    with mods["measure"].PinnedCpu(reader):
        assert reader.widths == {"cycles": 32, "instructions": 32}
        assert reader.delta("cycles", 2**32 - 1, 0) == 1


def test_measure_after_unload_probes_again(driver_measure, fake, mods, simple_pmu,
                                           monkeypatch):
    """A cached report that picks the driver, then rmmod: measure() probes again."""
    import shutil

    probe = mods["probe"]
    gone = probe.Report(arm64_cpu(mods), tuple(
        probe.Backend(n, n, False, ("module gone",))
        for n in ("driver", "perf-rdpmc", "perf-read", "timer")))
    probed: list[int] = []
    monkeypatch.setattr(mods["measure"], "probe", lambda: probed.append(1) or gone)
    shutil.rmtree(fake.dir)
    with simple_pmu.measure() as m:
        pass
    assert probed == [1]
    assert m.backend is None and m.cycles is None and "driver: module gone" in m.reason
    with pytest.raises(simple_pmu.CounterUnavailable, match="driver: module gone"), \
            simple_pmu.measure("driver"):
        pass


@pytest.mark.parametrize("event_width", [32, 64])
def test_arm64_reader_widths(driver_measure, fake, mods, simple_pmu, monkeypatch, event_width):
    """The arm64 driver's Reader: cycles on PMCCNTR_EL0 wrap at 2^64 (the issue's
    Reader.delta('cycles', 2**64-1000, 500)), on an event counter at event_width, and
    instructions at event_width (sysfs, PMUv3p5 long counters: 64)."""
    fake.attr("event_width", event_width)
    reader = mods["measure"].open_reader(mods["measure"]._cache["report"], "driver")
    assert reader.delta("cycles", 2**64 - 1000, 500) == 1500  # before pinning: 64
    for cycle_index, want in ((31, 64), (2, event_width)):
        monkeypatch.setattr(simple_pmu.native, "driver_indices", lambda c=cycle_index: (
            CPUS[0], c, 4))
        with mods["measure"].PinnedCpu(reader):
            assert reader.widths == {"cycles": want, "instructions": event_width}
            assert reader.delta("cycles", 2**want - 1000, 500) == 1500
            assert reader.delta("instructions", 2**event_width - 1, 1) == 2
