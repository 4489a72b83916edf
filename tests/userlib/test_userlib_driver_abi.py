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
    # probe and measure: the modules _probe and _measure (the package's names are the
    # function and the class they export).
    names = {"probe": "_probe", "sysinfo": "sysinfo", "measure": "_measure",
             "reasons": "reasons", "mhz": "mhz"}
    return {n: importlib.import_module(f"simple_pmu.{m}") for n, m in names.items()}


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
    monkeypatch.setattr(native, "driver_cycles", lambda: 0)  # measure()'s wait for reads
    monkeypatch.setattr(native, "guard", lambda: None)
    monkeypatch.setattr(native, "driver_indices", lambda: (CPUS[0], 31, 5))
    probe = mods["probe"]
    driver = probe.Backend("driver", "fake", True, (), (), ("cycles", "instructions"),
                           {"recheck_ms": 100}, tuple(CPUS))
    others = tuple(probe.Backend(n, n, False, ("fake",)) for n in
                   ("perf-rdpmc", "perf-read", "timer"))
    report = probe.Report(arm64_cpu(mods), (driver, *others))
    monkeypatch.setattr(mods["measure"], "_cache", {"report": report})
    monkeypatch.setattr(mods["measure"], "_local", mods["measure"]._ThreadState())

    def run(values, cycle_index=31, insn_index=5, before=10, after=10, valid=1,
            exact=None, switched=0):
        FakeSpan.values_ = values
        FakeSpan.info_ = {"cpu": CPUS[0], "cycle_index": cycle_index,
                          "insn_index": insn_index, "generation_before": before,
                          "generation_after": after, "valid": valid,
                          "exact": valid if exact is None else exact, "switched": switched}
        with simple_pmu.measure("driver") as m:
            pass
        return m
    return run


def test_measure_wraps_by_counter_width(driver_measure, fake):
    # PMCCNTR_EL0 (64 bits) across 2^64; a 32-bit event counter across 2^32.
    m = driver_measure((2**64 - 1000, 500, 2**32 - 10, 5))
    assert (m.cycles, m.instructions, m.generation, m.reason) == (1500, 15, 10, None)
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


def test_measure_discards_an_invalid_window(driver_measure):
    """cycles.h's window said invalid (a read faulted): no counts, whatever was read."""
    m = driver_measure((100, 200, 300, 400), valid=0)
    assert m.cycles is None and m.instructions is None and not m.ok
    assert m.reason.code == "measure_window_invalid"
    assert m.reason.startswith(f"the driver's counters on CPU {CPUS[0]} could not be read")


def test_measure_switched_out_is_not_exact(driver_measure, mods, monkeypatch, tmp_path):
    """arm64 5.17+ (perf_user_access exists): the driver's counts are exact, unless the
    thread was switched out inside the block (cycles.h's window said valid, not exact):
    then they hold other tasks' work and the result says so (46 on sid: a preempted
    block counted 4537 for a 4464 loop and said exact)."""
    pua = tmp_path / "perf_user_access"
    pua.write_text("0\n")
    monkeypatch.setattr(mods["sysinfo"], "PERF_USER_ACCESS", str(pua))
    m = driver_measure((100, 200, 300, 400))
    assert m.ok and m.exact is True and m.notes == ()
    m = driver_measure((100, 200, 300, 400), exact=0, switched=1)
    assert m.ok and (m.cycles, m.instructions) == (100, 100)
    assert m.exact is False
    assert [n.code for n in m.notes] == ["measure_switched_out"]
    assert m.notes[0].startswith(f"not exact: the thread was switched out during the "
                                 f"measurement on CPU {CPUS[0]}")
    # Not exact for a reason cycles.h knows and measure() does not: still not exact.
    m = driver_measure((100, 200, 300, 400), exact=0)
    assert m.ok and m.exact is False
    assert [n.code for n in m.notes] == ["measure_not_exact"]


def test_measure_starts_on_one_path_after_faulting_reads(driver_measure, simple_pmu,
                                                         monkeypatch):
    """The first reads fault (perf used the PMU on that CPU) and then work: the span is
    started once, after the wait, from measure() itself, not from inside the retry loop
    (whose return path would be counted in the block: 46 on trixie, 4538 against 4511
    for the same loop)."""
    import inspect
    off = [2]  # the first two reads fault, whichever reads them (DriverSpan.start too)

    def read() -> int:
        if off[0] > 0:
            off[0] -= 1
            raise simple_pmu.CounterFault("user access is off there (fake)", "trial_fault")
        return 0
    monkeypatch.setattr(simple_pmu.native, "driver_cycles", read)
    callers = []

    def start(self) -> None:
        read()
        callers.append([f.function for f in inspect.stack()[1:4]])
    monkeypatch.setattr(FakeSpan, "start", start)
    m = driver_measure((100, 200, 300, 400))
    assert m.ok and (m.cycles, m.instructions) == (100, 100)
    assert len(callers) == 1, callers
    assert callers[0][0] == "_start_when_readable" and "_retrying" not in callers[0], callers


def test_measure_start_faulting_after_the_wait_waits_again(driver_measure, simple_pmu,
                                                           monkeypatch):
    """Access withdrawn again between the wait and the start: measure() waits again and
    starts from the same place; faulting for good (past the retry bound), the block has
    no counts and says why (strict: CounterUnavailable); the fault never reaches the
    caller."""
    import inspect
    starts = []
    fail_first = [1]

    def start(self) -> None:
        starts.append([f.function for f in inspect.stack()[1:3]])
        if fail_first[0] > 0:
            fail_first[0] -= 1
            raise simple_pmu.CounterFault("user access is off there (fake)", "trial_fault")
    monkeypatch.setattr(FakeSpan, "start", start)
    m = driver_measure((100, 200, 300, 400))
    assert m.ok and len(starts) == 2
    assert {s[0] for s in starts} == {"_start_when_readable"}
    fail_first[0] = 10**9  # never comes back
    m = driver_measure((100, 200, 300, 400))
    assert not m.ok and m.cycles is None
    assert m.reason.startswith("driver: ") and "off there (fake)" in m.reason
    with pytest.raises(simple_pmu.CounterUnavailable, match="off there") as info, \
            simple_pmu.measure("driver", strict=True):
        pass
    assert info.value.code == "counter_fault"  # the fault's own code


@pytest.fixture
def refused_driver(driver_measure, mods, monkeypatch, tmp_path):
    """The cached report refusing the driver with the given reasons; probe_driver faked
    to answer from a list (the calls recorded); perf_user_access present (5.17+)."""
    probe, measure = mods["probe"], mods["measure"]
    pua = tmp_path / "perf_user_access"
    pua.write_text("1\n")
    monkeypatch.setattr(mods["sysinfo"], "PERF_USER_ACCESS", str(pua))
    report = measure._cache["report"]
    usable = report.get("driver")
    monkeypatch.setattr(measure, "_reprobe", measure._Reprobe())
    monkeypatch.setattr(measure, "REPROBE_INTERVAL_S", 0.0)
    FakeSpan.values_ = (100, 200, 300, 400)
    FakeSpan.info_ = {"cpu": CPUS[0], "cycle_index": 31, "insn_index": 5,
                      "generation_before": 10, "generation_after": 10, "valid": 1,
                      "exact": 1, "switched": 0}
    state = {"answers": [], "calls": 0, "usable": usable}

    def probe_driver(cpu):
        state["calls"] += 1
        return state["answers"].pop(0)
    monkeypatch.setattr(probe, "probe_driver", probe_driver)

    def refuse(*why):
        refused = probe.Backend("driver", "fake", False, why, scope="cpu")
        monkeypatch.setattr(measure, "_cache", {"report": probe.Report(
            report.cpu, tuple(refused if b.name == "driver" else b
                              for b in report.backends))})
        monkeypatch.setattr(measure, "_local", measure._ThreadState())
        return refused
    state["refuse"] = refuse
    return state


def _fault(reasons):
    return reasons.TRIAL_FAULT.format(what="the cycle counter", cpu=CPUS[0],
                                      signal="SIGILL")


def test_a_transient_driver_refusal_is_probed_again(refused_driver, mods, simple_pmu):
    """The cached report refused the driver only because its trial reads kept faulting
    (arm64 5.17+: perf was using the PMU all along, 46 beside perfchurn):
    measure(scope="cpu") probes the driver again instead of refusing for the rest of the
    process; once usable, it is kept."""
    refused = refused_driver["refuse"](_fault(mods["reasons"]))
    refused_driver["answers"] += [refused, refused_driver["usable"]]
    with simple_pmu.measure(scope="cpu") as m:  # probed again: still faulting
        pass
    assert refused_driver["calls"] == 1 and not m.ok
    assert m.reason.code == "no_counter_backend"
    with simple_pmu.measure(scope="cpu") as m:  # probed again: reads work now
        pass
    assert refused_driver["calls"] == 2 and m.ok and m.backend == "driver"
    with simple_pmu.measure(scope="cpu") as m:  # usable now: kept, no more probes
        pass
    assert refused_driver["calls"] == 2 and m.ok


def test_counters_probe_a_transient_refusal_again(refused_driver, mods, simple_pmu):
    refused_driver["refuse"](_fault(mods["reasons"]))
    refused_driver["answers"].append(refused_driver["usable"])
    with simple_pmu.Counters(scope="cpu") as counters:
        assert counters.backend == "driver"
    assert refused_driver["calls"] == 1


def test_the_re_probe_is_rate_limited(refused_driver, mods, simple_pmu, monkeypatch):
    """At most one re-probe per REPROBE_INTERVAL_S: a loop over a refused driver does not
    spin for the retry bound on every pass."""
    monkeypatch.setattr(mods["measure"], "REPROBE_INTERVAL_S", 3600.0)
    refused = refused_driver["refuse"](_fault(mods["reasons"]))
    refused_driver["answers"] += [refused] * 5
    mods["measure"]._reprobe.last = float("-inf")
    for _ in range(5):
        with simple_pmu.measure(scope="cpu") as m:
            pass
        assert not m.ok
    assert refused_driver["calls"] == 1


@pytest.mark.parametrize("case", ["not-loaded", "not-counting", "before-5.17", "x86"])
def test_lasting_refusals_are_not_probed_again(refused_driver, mods, simple_pmu,
                                                monkeypatch, case):
    """Not loaded, counters standing still (a release mismatch), arm64 before 5.17 (perf
    never withdraws access there) and x86 (a fault is RDPMC trapped): refused for good,
    measure() does not spin on them."""
    reasons = mods["reasons"]
    why = {"not-loaded": reasons.DRIVER_NOT_LOADED.format(path="/x"),
           "not-counting": reasons.NOT_COUNTING.format(what="the cycle counter",
                                                      cpu=CPUS[0], first=5, second=5)
           }.get(case, _fault(reasons))
    refused_driver["refuse"](why)
    if case == "before-5.17":
        monkeypatch.setattr(mods["sysinfo"], "PERF_USER_ACCESS", "/nonexistent/pua")
    if case == "x86":
        report = mods["measure"]._cache["report"]
        cpu = mods["sysinfo"].CpuInfo("x86_64", "GenuineIntel", "x", frozenset(), None, None)
        mods["measure"]._cache["report"] = mods["probe"].Report(cpu, report.backends)
    for _ in range(2):
        with simple_pmu.measure(scope="cpu") as m:
            pass
        assert not m.ok
    assert refused_driver["calls"] == 0


def test_other_threads_do_not_wait_for_a_re_probe(refused_driver, mods, simple_pmu):
    """The re-probe spins up to the retry bound outside the probe lock: another thread's
    report comes meanwhile (a default-scope measure() would be stuck behind it)."""
    import threading
    measure = mods["measure"]
    refused = refused_driver["refuse"](_fault(mods["reasons"]))
    inside, release = threading.Event(), threading.Event()

    calls = []

    def slow_probe(cpu):
        calls.append(cpu)
        if len(calls) == 1:
            inside.set()
            release.wait(10)
        return refused
    mods["probe"].probe_driver = slow_probe  # restored by the fixture's monkeypatch
    t = threading.Thread(target=lambda: measure._default_report("cpu"))
    t.start()
    try:
        assert inside.wait(10)
        got = []
        other = threading.Thread(target=lambda: got.append(measure._default_report()))
        other.start()
        other.join(5)
        assert got and got[0] is measure._cache["report"], "blocked behind the re-probe"
        # A second scope cpu caller meanwhile does not start a second re-probe either.
        assert measure._default_report("cpu") is measure._cache["report"]
        assert len(calls) == 1, "a second re-probe started beside the first"
    finally:
        release.set()
        t.join(10)


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
    """A cached report that picks the driver, then rmmod: measure(scope="cpu") probes
    again."""
    import shutil

    probe = mods["probe"]
    gone = probe.Report(arm64_cpu(mods), tuple(
        probe.Backend(n, n, False, ("module gone",))
        for n in ("driver", "perf-rdpmc", "perf-read", "timer")))
    probed: list[int] = []
    monkeypatch.setattr(mods["measure"], "probe", lambda: probed.append(1) or gone)
    shutil.rmtree(fake.dir)
    with simple_pmu.measure(scope="cpu") as m:
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


# --- x86 (issue 13): the RDPMC operands the driver publishes per CPU -----------------

FIXED = 1 << 30  # RDPMC ECX bit 30: fixed counter n is FIXED + n


def x86_cpu(mods):
    si = mods["sysinfo"]
    perfmon = si.Perfmon(version=5, num_gp=8, num_fixed=3, fixed_width=48, fixed_mask=0x7,
                         events_unavailable=0, gp_width=48)
    return si.CpuInfo("x86_64", "GenuineIntel", "fake", frozenset({"tsc"}), None, perfmon)


@pytest.fixture
def x86_fake(tmp_path, monkeypatch, mods):
    """A FakeX86Driver read as the driver's directory, its event_source as perf's."""
    from userlib_helpers import FakeX86Driver

    driver = FakeX86Driver(tmp_path / "sys", max(CPUS) + 1)
    monkeypatch.setattr(mods["sysinfo"], "SYSFS_DIR", driver.dir)
    monkeypatch.setattr(mods["sysinfo"], "EVENT_SOURCE", driver.event_source)
    return driver


def test_x86_index_parsing(mods):
    si = mods["sysinfo"]
    assert si.parse_index_list("1073741824 1073741826", "x86_64") == [FIXED, FIXED + 2]
    assert si.parse_index_list("5 -1 31", "x86_64") == [5, -1, 31]
    for bad in ("1073741840", "1073741823", "32", "-2", "3221225473"):
        with pytest.raises(ValueError):
            si.parse_index_list(bad, "x86_64")
    with pytest.raises(ValueError):  # an RDPMC operand is no arm64 counter
        si.parse_index_list("1073741825", "aarch64")
    assert si.index_valid(FIXED + 15, "x86_64") and not si.index_valid(FIXED + 16, "x86_64")


def test_x86_driver_placement(x86_fake, mods):
    si = mods["sysinfo"]
    x86_fake.place(CPUS[-1], 5, [FIXED, 2])
    placement = si.driver_placement(arch="x86_64")
    first, last = placement[CPUS[0]], placement[CPUS[-1]]
    assert (first.cycle_index, first.event_index, first.user_access) == (
        1073741825, (1073741824, 1073741826), 1)
    assert (last.cycle_index, last.event_index) == (5, (FIXED, 2))
    # Read as arm64 indices, the same files do not parse.
    assert si.driver_placement(arch="aarch64")[CPUS[0]].cycle_index is None


def x86_placement(mods, fake):
    facts: dict[str, object] = {}
    attrs = mods["sysinfo"].driver_attrs()
    return mods["probe"].x86_placement(fake.dir, attrs, CPUS, facts), facts


def test_x86_placement_uniform(x86_fake, mods):
    result, facts = x86_placement(mods, x86_fake)
    assert (result.found, result.cpu_problems, result.cpus) == ([], [], CPUS)
    assert result.counters == ("cycles", "instructions")
    assert facts["placement"] == ("every CPU: cycles 1073741825, 0xc0 1073741824, "
                                  "0x300 1073741826")


def test_x86_placement_without_instructions(x86_fake, mods):
    """No 0xc0 in events: cycles only, with the note naming x86's event."""
    x86_fake.attr("events", "0x300")
    for cpu in CPUS:
        x86_fake.place(cpu, FIXED + 1, [FIXED + 2])
    result, _ = x86_placement(mods, x86_fake)
    assert result.counters == ("cycles",) and result.cpus == CPUS
    assert result.notes == ["no instructions: the driver counts no INST_RETIRED (event 0xc0)"
                            " event (events is '0x300')"]
    assert result.notes[0].code == "driver_no_insn"


def test_x86_probe_driver_usable(x86_fake, mods, fake_reads):
    backend = mods["probe"].probe_driver(x86_cpu(mods))
    assert backend.usable, backend.reasons
    assert backend.cpus == tuple(CPUS)
    assert backend.counters == ("cycles", "instructions")
    assert backend.facts["rdpmc"] == 2


def x86_refusal(mods, fake, case):
    """Break one thing of a working x86 driver; the reasons probe_driver() gives."""
    es = fake.event_source
    if case == "no module":
        import shutil

        shutil.rmtree(fake.dir)
    elif case == "rdpmc_fixed 0":
        fake.attr("rdpmc_fixed", 0)
    elif case == "rdpmc 1":
        fake.rdpmc("cpu", 1)
    elif case == "hybrid atom rdpmc 1":
        fake.rdpmc("cpu", None)
        fake.rdpmc("cpu_core", 2)
        fake.rdpmc("cpu_atom", 1)
    elif case == "user_access 0":
        for cpu in CPUS:
            fake.cpu_attr(cpu, "user_access", 0)
    elif case == "cycle_index -1":
        for cpu in CPUS:
            fake.place(cpu, -1, [-1, -1])
    backend = mods["probe"].probe_driver(x86_cpu(mods))
    assert not backend.usable
    return backend.reasons, es


X86_REFUSALS = {
    "no module": lambda d, es, cpu: (
        "driver_not_loaded", f"simple-pmu module not loaded: {d} does not exist"),
    "rdpmc_fixed 0": lambda d, es, cpu: (
        "driver_fixed_off", "the driver has the fixed counters off (rdpmc_fixed is 0)"),
    "rdpmc 1": lambda d, es, cpu: (
        "rdpmc_not_always", f"{es}/cpu/rdpmc is 1: user RDPMC outside a task with a perf "
        "mmap faults; the driver's counters need 2"),
    "hybrid atom rdpmc 1": lambda d, es, cpu: (
        "rdpmc_not_always", f"{es}/cpu_atom/rdpmc is 1: user RDPMC outside a task with a "
        "perf mmap faults; the driver's counters need 2"),
    "user_access 0": lambda d, es, cpu: (
        "driver_user_access_off", "the driver's user access is off (user_access is 0 in "
        f"{d}/cpu{cpu}/user_access)"),
    "cycle_index -1": lambda d, es, cpu: (
        "driver_cpu_not_placed", f"CPU {cpu}: the driver's cycle counter is not on a "
        f"counter user space can read ({d}/cpu{cpu}/cycle_index is -1: perf has not "
        "scheduled the driver's pinned events there, or the CPU is offline); user access "
        "stays closed on that CPU"),
}


@pytest.mark.parametrize("case", list(X86_REFUSALS))
def test_x86_probe_driver_refusals(x86_fake, mods, fake_reads, case):
    """Each way the x86 driver's counters cannot be read gives its own reason, first
    (per CPU where the driver says so per CPU), and nothing is tried."""
    reasons, es = x86_refusal(mods, x86_fake, case)
    per_cpu = case in ("user_access 0", "cycle_index -1")
    want = [X86_REFUSALS[case](x86_fake.dir, es, cpu) for cpu in (CPUS if per_cpu
                                                                  else CPUS[:1])]
    assert [(r.code, str(r)) for r in reasons] == want


def test_x86_one_cpu_closed(x86_fake, mods, fake_reads):
    """cpuN/user_access 0 on one CPU: usable on the others, that CPU named in a note."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    bad = CPUS[-1]
    x86_fake.cpu_attr(bad, "user_access", 0)
    backend = mods["probe"].probe_driver(x86_cpu(mods))
    assert backend.usable and backend.cpus == tuple(CPUS[:-1])
    assert f"not usable on every CPU: the driver's user access is off (user_access is 0 in " \
           f"{x86_fake.dir}/cpu{bad}/user_access)" in backend.notes


X86_NATIVE_CHECK = """
import importlib, json, os, sys
from pathlib import Path
import simple_pmu
from simple_pmu import native, sysinfo
probe = importlib.import_module("simple_pmu._probe")
sysinfo.SYSFS_DIR = Path(native.SYSFS_DIR)
sysinfo.EVENT_SOURCE = Path(sys.argv[1])
probe._x86_driver_hardware = lambda cpu, facts: []  # this host's CPUID has no perfmon
out = {}
allowed = os.sched_getaffinity(0)
for cpu in sorted(allowed):
    os.sched_setaffinity(0, {cpu})
    out[cpu] = {"available": native.driver_available(), "indices": native.driver_indices()}
    try:
        native.driver_cycles()
        out[cpu]["read"] = "value"
    except simple_pmu.CounterFault as exc:
        out[cpu]["read"] = exc.signal
    except simple_pmu.CounterUnavailable as exc:  # nothing of the module's to read
        out[cpu]["read"] = "unavailable"
os.sched_setaffinity(0, allowed)
backend = probe.probe_driver(probe.cpu_info())
out["probe"] = [[r.code, str(r)] for r in backend.reasons]
print(json.dumps(out))
"""


@pytest.fixture
def x86_native(tmp_path, mods):
    """The extension built for a FakeX86Driver (CYCLES_SYSFS_DIR, CYCLES_EVENT_SOURCE_DIR),
    run in a fresh interpreter: (run, fake), run(script) -> what the script (default
    X86_NATIVE_CHECK) prints as JSON."""
    import json
    import shutil
    import subprocess
    import sys
    import sysconfig

    from userlib_helpers import PY_INCLUDE, USERLIB, FakeX86Driver, native_build_cmd

    if os.uname().machine != "x86_64":
        pytest.skip("x86-64 only")
    fake = FakeX86Driver(tmp_path / "sys", max(CPUS) + 1)
    pkg = tmp_path / "pkg" / "simple_pmu"
    shutil.copytree(USERLIB / "simple_pmu", pkg, ignore=shutil.ignore_patterns(
        "*.c", "*.so", "__pycache__"))
    out = pkg / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    cmd = native_build_cmd("gcc", out, [PY_INCLUDE])
    cmd[1:1] = [f'-DCYCLES_SYSFS_DIR="{fake.dir}"',
                f'-DCYCLES_EVENT_SOURCE_DIR="{fake.event_source}"']
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr

    def run(script: str = X86_NATIVE_CHECK) -> dict[str, object]:
        res = subprocess.run([sys.executable, "-c", script, str(fake.event_source)],
                             capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, PYTHONPATH=str(pkg.parent)))
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)
    return run, fake


def test_x86_native_reads_the_published_operand(x86_native):
    """The extension (cycles.h inside) on a fake x86 driver: perfmon_available() is
    pmu_version, the operands are the published ones, and the read is tried (it faults
    with SIGSEGV on this PMU-less host: RDPMC of 2^30 + 1 is refused)."""
    run, fake = x86_native
    fake.place(CPUS[-1], 5, [FIXED, 2])
    got = run()
    for cpu in CPUS:
        want = (5, FIXED) if cpu == CPUS[-1] else (FIXED + 1, FIXED)
        assert got[str(cpu)]["indices"] == [cpu, *want]
        assert got[str(cpu)]["available"] == 5
        if got[str(cpu)]["read"] == "value":
            pytest.skip("RDPMC works here: the fault path cannot be seen")
        assert got[str(cpu)]["read"] == "SIGSEGV"
    # probe() let cycles.h decide, and tried the read on every CPU.
    assert {code for code, _ in got["probe"]} == {"trial_fault"}
    assert len(got["probe"]) == len(CPUS)


def test_x86_native_refuses(x86_native):
    """cpuN/user_access 0 on one CPU: cycles.h's perfmon_available() is 0 there only,
    and the probe names that CPU (without trying it)."""
    run, fake = x86_native
    bad = CPUS[0]
    fake.cpu_attr(bad, "user_access", 0)
    got = run()
    assert got[str(bad)]["available"] == 0
    assert got[str(bad)]["read"] == "unavailable"  # not read: the module says no
    for cpu in CPUS[1:]:
        assert got[str(cpu)]["available"] == 5
    fake.attr("rdpmc_fixed", 0)
    got = run()
    assert all(got[str(cpu)]["available"] == 0 for cpu in CPUS)
    assert [code for code, _ in got["probe"]] == ["driver_fixed_off"]


def test_driver_beside_this_threads_perf_user_reads_is_not_exact(driver_measure, mods,
                                                                  monkeypatch):
    """arm64 >= 5.17: while this thread has perf events with user reads open, perf grants
    it the counters itself, so a counter perf moves stays readable without a fault: the
    driver's count is advisory then, and says why; exact again once they are closed."""
    monkeypatch.setattr(mods["measure"], "driver_exactness", lambda arch: (True, ""))
    perf = importlib.import_module("simple_pmu.perf")
    task_clock = (1, 1)  # a software event stands in: user_access is what is counted
    m = driver_measure((100, 200, 300, 400))
    assert m.ok and m.exact is True and m.notes == ()
    group = perf.PerfGroup.open(("cycles",), user_access=True, specs={"cycles": task_clock})
    try:
        m = driver_measure((100, 200, 300, 400))
        assert m.ok and m.exact is False
        assert [n.code for n in m.notes] == ["driver_advisory"]
        assert "perf events with user reads open" in m.notes[0]
        token = perf.user_reads_token()
        other = perf.PerfGroup.open(("cycles",), specs={"cycles": task_clock})
        other.close()  # without user reads: not counted
        assert perf.user_reads_token() == token
    finally:
        group.close()
    m = driver_measure((100, 200, 300, 400))
    assert m.ok and m.exact is True and m.notes == ()
    # A group opened and closed again between two readings counts too.
    token = perf.user_reads_token()
    perf.PerfGroup.open(("cycles",), user_access=True, specs={"cycles": task_clock}).close()
    assert perf.user_reads_between(token, perf.user_reads_token())
    assert not perf.user_reads_between(perf.user_reads_token(), perf.user_reads_token())
