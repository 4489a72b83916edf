"""measure() is per thread and per process: each thread counts itself with its own perf
group, opened on its first use in that thread; a forked child opens its own; a thread
started inside a block is not counted in it (perf's task-bound events, no inherit).

This host has no hardware PMU: perf's software task-clock stands in for cycles (the
same perf_event_open(pid 0, cpu -1) group, read(2) and times), so a count is the
thread's own CPU time in ns and can be checked against time.thread_time_ns(). The
guests count known loops exactly (tests/guest).
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time

import pytest
from test_userlib_perf_group import SOFTWARE

SMALL, LARGE = 1_000_000, 30_000_000  # known_loop iterations


@pytest.fixture
def stand_in(simple_pmu, monkeypatch):
    """The default measure() on perf-read with software events; fresh per-thread state."""
    probe = importlib.import_module("simple_pmu._probe")
    measure = importlib.import_module("simple_pmu._measure")
    perf = importlib.import_module("simple_pmu.perf")
    monkeypatch.setattr(perf, "EVENTS", dict(SOFTWARE))
    backend = probe.Backend("perf-read", "software stand-in", True,
                            counters=("cycles", "instructions"), scope="thread",
                            rings=("user",))
    others = tuple(probe.Backend(n, n, False, ("fake",)) for n in ("driver", "perf-rdpmc"))
    report = probe.Report(probe.cpu_info(), (*others, backend))
    monkeypatch.setattr(measure, "_cache", {"report": report})
    monkeypatch.setattr(measure, "_local", measure._ThreadState())
    return measure


def _own_work(simple_pmu, n):
    """(measurement, this thread's CPU time around the block in ns) of known_loop(n)."""
    t0 = time.thread_time_ns()
    with simple_pmu.measure() as m:
        simple_pmu.known_loop(n)
    return m, time.thread_time_ns() - t0


def _is_own(m, cpu_ns):
    """The count (task-clock ns) is this thread's: within its CPU time around the block
    (clock granularity allowed for), and most of it (the block is the loop)."""
    return m.cycles is not None and cpu_ns // 2 <= m.cycles <= cpu_ns + 2_000_000


def test_two_threads_each_count_their_own(stand_in, simple_pmu):
    with simple_pmu.measure():  # the main thread's reader exists first, as in the issue
        pass
    barrier = threading.Barrier(2)
    results = {}

    def work(name, n):
        with simple_pmu.measure():  # this thread's reader opens here, outside the count
            pass
        barrier.wait()
        results[name] = _own_work(simple_pmu, n)

    threads = [threading.Thread(target=work, args=(name, n))
               for name, n in (("small", SMALL), ("large", LARGE))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (small, small_ns), (large, large_ns) = results["small"], results["large"]
    for m, ns in ((small, small_ns), (large, large_ns)):
        assert m.backend == "perf-read" and not m.reason, m.reason
        assert _is_own(m, ns), (m.cycles, ns)
    assert large.cycles > 5 * small.cycles, (small.cycles, large.cycles)
    main, main_ns = _own_work(simple_pmu, SMALL)  # the main thread's reader still its own
    assert _is_own(main, main_ns), (main.cycles, main_ns)


def test_a_thread_started_inside_a_block_is_not_counted(stand_in, simple_pmu):
    worker_ns = []

    def work():
        t0 = time.thread_time_ns()
        simple_pmu.known_loop(LARGE)
        worker_ns.append(time.thread_time_ns() - t0)

    t0 = time.thread_time_ns()
    with simple_pmu.measure() as m:
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
    main_ns = time.thread_time_ns() - t0
    assert m.cycles is not None and not m.reason, m.reason
    assert m.cycles <= main_ns + 2_000_000, (m.cycles, main_ns)
    assert m.cycles < worker_ns[0] // 4, (m.cycles, worker_ns)


def _in_child(call):
    """call() in a forked child; what it returns (JSON), or the child's fate."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 0
        try:
            os.close(rfd)
            os.write(wfd, json.dumps(call()).encode())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(wfd, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    return {"status": status, "data": json.loads(data) if data else None}


def test_a_forked_child_counts_itself(stand_in, simple_pmu):
    parent, parent_ns = _own_work(simple_pmu, SMALL)  # the parent's reader is open
    assert _is_own(parent, parent_ns)

    def child():
        m, ns = _own_work(simple_pmu, LARGE)
        return {"cycles": m.cycles, "ns": ns, "reason": str(m.reason or ""),
                "backend": m.backend}

    got = _in_child(child)
    assert got["status"] == 0, got
    data = got["data"]
    assert data["backend"] == "perf-read" and data["reason"] == "", data
    assert data["cycles"] is not None and data["ns"] // 2 <= data["cycles"] <= (
        data["ns"] + 2_000_000), data
    again, again_ns = _own_work(simple_pmu, SMALL)  # the parent's reader is untouched
    assert _is_own(again, again_ns), (again.cycles, again_ns)


def test_a_perf_page_is_not_read_in_a_forked_child(simple_pmu):
    """perf's mmap is not inherited (VM_DONTCOPY): in a child the parent's PerfPage is
    refused (ValueError) and closed without munmap, never read from unmapped memory;
    the parent's page still works."""
    n = simple_pmu.native
    fd = n.perf_open(1, 1)  # PERF_TYPE_SOFTWARE, TASK_CLOCK
    page = n.PerfPage(fd)
    try:
        def child():
            try:
                page.info()
            except ValueError as exc:
                refused = str(exc)
            else:
                refused = ""
            page.close()
            return {"refused": refused}

        got = _in_child(child)
        assert got["status"] == 0, got
        assert "forked" in got["data"]["refused"], got
        assert page.info()["index"] == 0
    finally:
        page.close()
        os.close(fd)
