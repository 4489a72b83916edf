"""The raw-read API: Counters().read() -> Sample; Sample - Sample -> Delta with the same
path and exactness; samples that do not belong together give no counts and say why."""

from __future__ import annotations

import importlib
import pickle
import threading
import time

import pytest
from test_userlib_driver_abi import (  # noqa: F401
    CPUS,
    arm64_cpu,
    driver_measure,
    fake,
    fake_reads,
    mods,
)
from test_userlib_threads import stand_in  # noqa: F401


def test_samples_subtract_to_this_threads_delta(stand_in, simple_pmu):  # noqa: F811
    with simple_pmu.Counters() as counters:
        assert counters.backend == "perf-read"
        t0 = time.thread_time_ns()
        a = counters.read()
        simple_pmu.known_loop(5_000_000)
        b = counters.read()
        cpu_ns = time.thread_time_ns() - t0
    assert (a.backend, a.scope, a.exact) == ("perf-read", "thread", True)
    assert a.cycles is not None and b.cycles > a.cycles
    d = b - a
    assert isinstance(d, simple_pmu.Delta) and d.ok and d.reason is None
    assert (d.backend, d.scope, d.exact) == ("perf-read", "thread", True)
    assert cpu_ns // 2 <= d.cycles <= cpu_ns + 2_000_000, (d.cycles, cpu_ns)
    assert d.time_ns == b.time_ns - a.time_ns > 0 and d.running_ratio == 1.0
    assert pickle.loads(pickle.dumps(d)) == d


def test_misuse_is_a_usage_error(stand_in, simple_pmu):  # noqa: F811
    first, second = simple_pmu.Counters(), simple_pmu.Counters()
    try:
        with pytest.raises(simple_pmu.UsageError) as info:
            _ = second.read() - first.read()
        assert info.value.code == "samples_unrelated"
        errors = []

        def other_thread():
            try:
                first.read()
            except simple_pmu.UsageError as exc:
                errors.append(exc.code)
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert errors == ["counters_other_thread"]
    finally:
        first.close()
        second.close()
    with pytest.raises(simple_pmu.UsageError) as info:
        first.read()
    assert info.value.code == "counters_closed"


def test_no_backend_raises_with_the_reason(driver_measure, simple_pmu):  # noqa: F811
    with pytest.raises(simple_pmu.CounterUnavailable) as info:
        simple_pmu.Counters()
    assert info.value.code == "no_counter_backend"


def test_driver_samples(driver_measure, fake_reads, simple_pmu, monkeypatch):  # noqa: F811
    """scope cpu: advisory (no perf_user_access on this host), pinned to a CPU; a
    generation change between the samples discards the counts, including one while a
    sample's counters are being read (each read takes the generation before and after)."""
    # a: 10 before, 11 after (a move during its reads); b: 11, 11; c: 11, 12; d, e: 12.
    generation = iter([10, 11, 11, 11, 11, 12, 12, 12, 12, 12])
    monkeypatch.setattr(simple_pmu.native, "driver_generation", lambda: next(generation))
    with simple_pmu.Counters(scope="cpu") as counters:
        a, b, c, d, e = (counters.read() for _ in range(5))
    assert (a.backend, a.scope, a.exact) == ("driver", "cpu", False) and a.cpu in CPUS
    ok = e - d
    assert ok.ok and ok.exact is False and ok.cycles > 0 and ok.instructions > 0
    for moved, before, after in ((b - a, 10, 11), (c - b, 11, 12)):
        assert not moved.ok and moved.cycles is None and moved.instructions is None
        assert moved.reason.code == "samples_moved"
        was, now = str(moved.reason).split(" -> ", 1)
        assert was.endswith(f"generation {before}") and now.startswith("cpu ")
        assert f"generation {after}" in now


def test_a_multiplexed_delta_is_not_exact(stand_in, simple_pmu):  # noqa: F811
    """Samples whose group ran only part of the time between them (multiplexed): the
    counts are kept, unscaled, with the ratio, and the delta is not exact."""
    with simple_pmu.Counters() as counters:
        a = counters.read()
    base = dict(a.__dict__)
    later = simple_pmu.Sample(**{**base, "time_enabled_ns": a.time_enabled_ns + 3000,
                                 "time_running_ns": a.time_running_ns + 1000,
                                 "cycles": a.cycles + 30, "instructions": a.instructions + 30})
    d = later - a
    assert d.ok and (d.cycles, d.instructions) == (30, 30)
    assert d.running_ratio == 1 / 3 and d.exact is False
    whole = simple_pmu.Sample(**{**base, "time_enabled_ns": a.time_enabled_ns + 3000,
                                 "time_running_ns": a.time_running_ns + 3000})
    assert (whole - a).exact is True


def test_driver_deltas_beside_this_threads_perf_user_reads_are_not_exact(
        driver_measure, fake_reads, simple_pmu, mods, monkeypatch):  # noqa: F811
    """Where the driver's readings are exact (arm64 with perf_user_access, faked here), a
    delta over a time this thread had perf events with user reads open is not: perf
    granted the thread the counters itself (see _measure.PERF_USER_READS_ADVISORY)."""
    perf = importlib.import_module("simple_pmu.perf")
    monkeypatch.setattr(mods["measure"], "driver_exactness", lambda arch: (True, ""))
    monkeypatch.setattr(simple_pmu.native, "driver_generation", lambda: 10)
    with simple_pmu.Counters(scope="cpu") as counters:
        a = counters.read()
        group = perf.PerfGroup.open(("cycles",), user_access=True, specs={"cycles": (1, 1)})
        b = counters.read()
        group.close()
        c, d = counters.read(), counters.read()
    assert (b - a).ok and (b - a).exact is False
    assert (c - b).ok and (c - b).exact is False
    assert (d - c).ok and (d - c).exact is True


def test_a_move_during_the_later_samples_read_is_seen(  # noqa: F811
        driver_measure, fake_reads, simple_pmu, monkeypatch):  # noqa: F811
    """The driver's counters move while the later sample's counters are being read (its
    generation changes inside the read): the delta has no counts. Only a generation read
    after the counters can see that."""
    state = {"gen": 10, "move": False}
    cycles = simple_pmu.native.driver_cycles

    def read_cycles() -> int:
        if state["move"]:
            state["gen"] += 1  # perf moved the counter during this read
        return cycles()

    monkeypatch.setattr(simple_pmu.native, "driver_generation", lambda: state["gen"])
    monkeypatch.setattr(simple_pmu.native, "driver_cycles", read_cycles)
    with simple_pmu.Counters(scope="cpu") as counters:
        a = counters.read()
        state["move"] = True
        b = counters.read()
    moved = b - a
    assert not moved.ok and moved.reason.code == "samples_moved", moved


def test_driver_deltas_across_a_context_switch_are_not_exact(
        driver_measure, fake_reads, simple_pmu, mods, monkeypatch):  # noqa: F811
    """Where the driver's readings are exact, a delta over a time the thread was
    switched out is not: the CPU's counters then hold the other tasks' work. Each sample
    takes the thread's switch count before and after its reads; a delta compares the
    earlier one's before with the later one's after."""
    counters_mod = importlib.import_module("simple_pmu.counters")
    monkeypatch.setattr(mods["measure"], "driver_exactness", lambda arch: (True, ""))
    monkeypatch.setattr(simple_pmu.native, "driver_generation", lambda: 10)
    # a, b: none; c: one during its reads; d, e: none.
    switches = iter([5, 5, 5, 5, 5, 6, 6, 6, 6, 6])
    monkeypatch.setattr(counters_mod, "thread_switches", lambda: next(switches))
    with simple_pmu.Counters(scope="cpu") as counters:
        a, b, c, d, e = (counters.read() for _ in range(5))
    assert (a.switches, c.switches) == ((5, 5), (5, 6))
    assert (b - a).ok and (b - a).exact is True
    assert (c - b).ok and (c - b).exact is False
    assert (d - c).ok and (d - c).exact is False
    assert (e - d).ok and (e - d).exact is True


def test_thread_switches_counts_this_threads_switches(simple_pmu):
    """The count the driver's samples compare is the calling thread's: a sleep is a
    voluntary switch of this thread, and another thread's sleeps are not counted."""
    sysinfo = importlib.import_module("simple_pmu.sysinfo")
    before = sysinfo.thread_switches()
    time.sleep(0.01)
    after = sysinfo.thread_switches()
    assert after > before
    seen = []

    def other() -> None:
        for _ in range(200):
            time.sleep(0.0001)  # each a voluntary switch of that thread
        seen.append(sysinfo.thread_switches())

    t = threading.Thread(target=other)
    t.start()
    t.join()  # this thread blocks once (or a few times), not 200
    assert seen[0] >= 200
    assert sysinfo.thread_switches() - after < 100


def test_thread_switches_counts_preemption(simple_pmu):
    """Preemption (involuntary: how perfchurn took the CPU in 46) is counted too: this
    thread spins, without a system call, on one CPU beside a spinning process."""
    import os
    import subprocess
    import sys
    sysinfo = importlib.import_module("simple_pmu.sysinfo")
    saved = os.sched_getaffinity(0)
    cpu = min(saved)
    hog = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, "
                            f"{{{cpu}}}); print(flush=True)\nwhile True: pass"],
                           stdout=subprocess.PIPE)
    try:
        hog.stdout.readline()  # pinned and spinning
        os.sched_setaffinity(0, {cpu})
        before = sysinfo.thread_switches()
        end = time.monotonic() + 0.5
        while time.monotonic() < end:  # vDSO clock: no system call, no voluntary switch
            pass
        after = sysinfo.thread_switches()
    finally:
        os.sched_setaffinity(0, saved)
        hog.kill()
        hog.wait()
    assert after - before >= 1

