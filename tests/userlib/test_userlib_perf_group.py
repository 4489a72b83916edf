"""The perf backends' group: one read(2) of the leader gives every count and the group's
time_enabled / time_running, and measure() reports the running ratio (multiplexing).

This host has no hardware PMU, so the group machinery runs on software events (the same
perf_event_open, group_fd and read_format; task-clock leads, as cycles does); the
hardware group runs in the guests.
"""

from __future__ import annotations

import importlib
import struct

import pytest

TASK_CLOCK = (1, 1)  # (PERF_TYPE_SOFTWARE, config); a second task-clock is the member:
# software events of two different software PMUs (cpu-clock) do not count together
SOFTWARE = {"cycles": TASK_CLOCK, "instructions": TASK_CLOCK}


@pytest.fixture
def perf(simple_pmu):
    return importlib.import_module("simple_pmu.perf")


@pytest.fixture
def software_group(perf):
    try:
        group = perf.PerfGroup.open(specs=SOFTWARE)
    except perf.PerfError as exc:
        pytest.fail(f"software perf events unavailable: {exc}")
    yield group
    if group.fds:
        group.close()


def test_group_read(software_group, simple_pmu):
    group = software_group
    assert group.names == ("cycles", "instructions") and group.problems == {}
    first = group.read()
    simple_pmu.known_loop(2_000_000)
    second = group.read()
    assert second.counts["cycles"] > first.counts["cycles"] + 100_000  # task-clock ns
    assert second.counts["instructions"] > first.counts["instructions"] + 100_000
    assert second.time_enabled > first.time_enabled > 0
    # Software events are never multiplexed: running the whole time enabled.
    assert second.time_running == second.time_enabled and second.ratio == 1.0
    assert group.count("cycles") > second.counts["cycles"]


def test_member_that_cannot_join_is_a_problem(perf):
    """A member perf refuses (a hardware event in a software group here, or anything the
    kernel rejects) leaves the leader counting and says why."""
    group = perf.PerfGroup.open(specs={"cycles": TASK_CLOCK, "instructions": (99, 0)})
    try:
        assert group.names == ("cycles",)
        assert group.problems["instructions"].startswith("perf_event_open(instructions) failed")
        assert set(group.read().counts) == {"cycles"}
    finally:
        group.close()


def _reading(perf, enabled, running, *values):
    data = struct.pack(f"=QQQ{len(values)}Q", len(values), enabled, running, *values)
    return perf.parse_group_read(data, ("cycles", "instructions")[:len(values)])


def test_parse_group_read(perf, simple_pmu):
    r = _reading(perf, 1000, 250, 7, 9)
    assert (r.counts, r.time_enabled, r.time_running, r.ratio) == (
        {"cycles": 7, "instructions": 9}, 1000, 250, 0.25)
    with pytest.raises(simple_pmu.CounterUnavailable, match="1 values in 32 bytes"):
        perf.parse_group_read(struct.pack("=4Q", 1, 0, 0, 5), ("cycles", "instructions"))
    assert perf.interval_ratio(_reading(perf, 100, 100, 1), _reading(perf, 300, 200, 2)) == 0.5


@pytest.fixture
def perf_read_report(simple_pmu, monkeypatch, perf):
    """A report where perf-read is usable, its group made of software events."""
    probe = importlib.import_module("simple_pmu._probe")
    measure = importlib.import_module("simple_pmu._measure")
    monkeypatch.setattr(perf, "EVENTS", dict(SOFTWARE))
    backend = probe.Backend("perf-read", "software stand-in", True,
                            counters=("cycles", "instructions"), scope="thread",
                            rings=("user",))
    others = tuple(probe.Backend(n, n, False, ("fake",)) for n in ("driver", "perf-rdpmc"))
    report = probe.Report(probe.cpu_info(), (others[0], others[1], backend))
    monkeypatch.setattr(measure, "_cache", {"report": report})
    return measure


def test_measure_reports_what_it_counts(perf_read_report, simple_pmu):
    with simple_pmu.measure("perf-read") as m:
        simple_pmu.known_loop(3_000_000)
    assert m.backend == "perf-read" and m.cycles and m.cycles > 0
    assert (m.scope, m.rings) == ("thread", ("user",))
    assert m.time_enabled_ns and m.time_enabled_ns == m.time_running_ns
    assert m.running_ratio == 1.0 and m.notes == () and m.reason is None and m.ok
    assert m.exact is True
    data = m.to_dict()
    assert data["rings"] == ["user"] and data["running_ratio"] == 1.0


def test_multiplexed_and_never_scheduled(perf_read_report, simple_pmu, monkeypatch, perf):
    """A group on the PMU a third of the time: counts kept, unscaled, with the ratio and a
    note; never on the PMU: counts None with the reason."""
    readings = iter([_reading(perf, 1000, 1000, 10, 20), _reading(perf, 4000, 2000, 40, 50)])
    monkeypatch.setattr(perf.PerfGroup, "read", lambda self: next(readings))
    with simple_pmu.measure("perf-read") as m:
        pass
    assert (m.cycles, m.instructions) == (30, 30)
    assert m.exact is False  # a third of the block's count: not exact
    assert (m.time_enabled_ns, m.time_running_ns, m.running_ratio) == (3000, 1000, 1 / 3)
    assert [n.code for n in m.notes] == ["perf_multiplexed"]
    assert m.notes[0].startswith("the perf events ran 33.3% of the time they were enabled")
    readings = iter([_reading(perf, 1000, 500, 10, 20), _reading(perf, 4000, 500, 10, 20)])
    with simple_pmu.measure("perf-read") as m:
        pass
    assert m.cycles is None and m.instructions is None and m.running_ratio == 0.0
    assert m.reason.code == "perf_not_scheduled"


def _faulting_reader(measure, simple_pmu):
    def fault() -> int:
        raise simple_pmu.CounterFault("user access is off there (fake)", "trial_fault")
    return measure.Reader("perf-rdpmc", cycles=fault, instructions=fault, retry_s=0.05,
                          scope="thread", exact=True)


def test_reads_that_never_come_back_give_a_reason_not_an_exception(simple_pmu, monkeypatch):
    """The first reads fault for longer than the retry time (perf keeps using the PMU on
    that CPU: seen in 46-adversarial): measure() gives a result without counts and the
    reason; only strict=True raises."""
    measure = importlib.import_module("simple_pmu._measure")
    monkeypatch.setattr(measure, "_default_reader",
                        lambda scope: _faulting_reader(measure, simple_pmu))
    ran = []
    with simple_pmu.measure() as m:
        ran.append(1)
    assert ran == [1] and not m.ok and m.cycles is None and m.instructions is None
    assert "user access is off there (fake)" in m.reason and m.time_ns is not None
    with pytest.raises(simple_pmu.CounterUnavailable, match="off there"), \
            simple_pmu.measure(strict=True):
        ran.append(2)
    assert ran == [1]


@pytest.fixture
def perf_rdpmc_report(simple_pmu, monkeypatch, perf):
    """probe() saying perf-rdpmc is usable, on the software stand-in events: their mmap
    pages are real and say what a hardware event's says when it is off its counter or
    user reads are off (index 0, cap_user_rdpmc 0)."""
    probe = importlib.import_module("simple_pmu._probe")
    measure = importlib.import_module("simple_pmu._measure")
    monkeypatch.setattr(perf, "EVENTS", dict(SOFTWARE))
    backend = probe.Backend("perf-rdpmc", "software stand-in", True,
                            counters=("cycles", "instructions"), scope="thread",
                            rings=("user",))
    others = tuple(probe.Backend(n, n, False, ("fake",)) for n in ("driver", "perf-read"))
    report = probe.Report(probe.cpu_info(), (others[0], backend, others[1]))
    monkeypatch.setattr(measure, "_cache", {"report": report})
    return measure


def test_a_page_that_says_no_user_read_gives_the_read2_count(perf_rdpmc_report, simple_pmu,
                                                              perf):
    """index 0 / cap_user_rdpmc 0 on the mmap page: the reads take the count from read(2)
    (the same count of the same event), never an exception out of measure()."""
    page_alone = perf.SelfMonitor.open("cycles")
    try:
        assert page_alone.info()["index"] == 0
        with pytest.raises(simple_pmu.CounterUnavailable, match="index 0"):
            page_alone.read()  # no fallback asked for: the page's own answer
    finally:
        page_alone.close()
    with simple_pmu.measure("perf-rdpmc") as m:
        simple_pmu.known_loop(2_000_000)
    assert m.ok and m.backend == "perf-rdpmc", m.reason
    assert m.cycles > 100_000 and m.instructions > 100_000  # task-clock ns: it ran
    with simple_pmu.Counters("perf-rdpmc") as counters:
        a = counters.read()
        simple_pmu.known_loop(2_000_000)
        b = counters.read()
    assert (b - a).ok and (b - a).cycles > 100_000 and (b - a).instructions > 100_000
