"""simple_pmu.Window: cycles.h's window API from Python.

The logic of the Python side against a stand-in for _native.Window (what end() makes of
cycles.h's flags, when delta() refuses), then the real extension: on this PMU-less host
a thread window cannot begin (and says why), and on a fake x86 driver (the extension
built with its sysfs directory) a CPU window begins, its reads fault under cycles.h's
guard, the process lives and the window comes out invalid; a read from another thread
or a forked child is refused. Exact counts of a known loop: tests/guest/py/spmu_check.py
(window) in the arm64 guests.
"""

from __future__ import annotations

import importlib

import pytest
from test_userlib_driver_abi import mods, x86_native  # noqa: F401


class FakeNativeWindow:
    """Stands in for _native.Window: begin() and end() return what the test sets."""

    def __init__(self, begins: bool = True, flags: int = 3, reason: str = "",
                 width: int = 64, path: int = 1) -> None:
        self.begins, self.flags, self.reason, self.width = begins, flags, reason, width
        self.path = path  # cycles.h's path id: 1 perf user reads, 3 the module
        self.ended = 0

    def begin(self) -> bool:
        return self.begins

    def cycles(self) -> int:
        return 7

    def instructions(self) -> int:
        return 9

    def end(self) -> int:
        self.ended += 1
        return self.flags

    def delta(self, counter: str, first: int, second: int, /) -> int:
        return (second - first) % (1 << self.width)

    def info(self) -> dict[str, int | str]:
        return {"path_name": "fake path", "reason": self.reason, "path": self.path}


@pytest.fixture
def window(simple_pmu):
    return importlib.import_module("simple_pmu.window")


def test_a_valid_window_gives_deltas_modulo_the_width(window):
    w = window.Window(_native=FakeNativeWindow(flags=window.VALID | window.EXACT, width=32))
    with w:
        assert (w.cycles(), w.instructions()) == (7, 9)  # the native methods themselves
    assert w.valid and w.result == window.WindowResult(True, True, "thread", "fake path")
    assert w.delta(2**32 - 10, 5) == 15
    assert w.delta(1, 4, "instructions") == 3


def test_valid_but_not_exact(window):
    w = window.Window("cpu", _native=FakeNativeWindow(flags=window.VALID))
    w.begin()
    result = w.end()
    assert result.valid and not result.exact and result.scope == "cpu"


def test_an_invalid_window_never_gives_a_delta(window, simple_pmu):
    """cycles.h's end() said 0: no difference, the reason says why."""
    native = FakeNativeWindow(flags=0, reason="perf moved the events")
    w = window.Window(_native=native)
    with w:
        a, b = w.cycles(), w.cycles()
    assert not w.valid and w.result is not None
    assert w.result.reason.code == "window_invalid"
    assert "perf moved the events" in w.result.reason
    with pytest.raises(simple_pmu.CounterUnavailable) as info:
        w.delta(a, b)
    assert info.value.code == "window_invalid"


def test_a_failed_begin_leaves_the_window_invalid(window, simple_pmu):
    native = FakeNativeWindow(begins=False, reason="index 0")
    w = window.Window(_native=native)
    with pytest.raises(simple_pmu.CounterUnavailable) as info:
        w.begin()
    assert info.value.code == "window_not_begun" and "index 0" in str(info.value)
    assert not w.valid and w.end() is w.result and native.ended == 0
    with pytest.raises(simple_pmu.CounterUnavailable):
        w.delta(1, 2)


def test_no_delta_before_the_end_and_one_begin_at_a_time(window, simple_pmu):
    w = window.Window(_native=FakeNativeWindow())
    with pytest.raises(simple_pmu.UsageError, match="begin\\(\\) first"):
        w.end()
    w.begin()
    with pytest.raises(simple_pmu.UsageError) as info:
        w.delta(1, 2)
    assert info.value.code == "window_open"
    with pytest.raises(simple_pmu.UsageError, match="open"):
        w.begin()
    w.end()
    assert w.end() is w.result  # a second end() changes nothing


def test_an_exception_in_the_block_still_ends_the_window(window):
    native = FakeNativeWindow()
    w = window.Window(_native=native)
    with pytest.raises(KeyError), w:
        raise KeyError("the block's own")
    assert native.ended == 1 and w.valid


def test_bad_arguments(window, simple_pmu):
    with pytest.raises(simple_pmu.UsageError, match="scope 'process'"):
        window.Window("process")
    w = window.Window(_native=FakeNativeWindow())
    with w:
        pass
    with pytest.raises(simple_pmu.UsageError, match="counter 'ref'"):
        w.delta(1, 2, "ref")


def test_exported(simple_pmu, window):
    assert simple_pmu.Window is window.Window and "Window" in simple_pmu.__all__
    assert simple_pmu.WindowResult is window.WindowResult


def test_no_thread_window_on_this_host(simple_pmu):
    """The real extension where perf has no hardware events: begin() says why (cycles.h's
    reason: perf's failure and the module's), and the window stays invalid."""
    w = simple_pmu.Window()
    try:
        w.begin()
    except simple_pmu.CounterUnavailable as exc:
        assert exc.code == "window_not_begun"
        assert "perf" in str(exc) and "module" in str(exc), exc
    else:
        w.end()
        pytest.skip("this host can begin a thread window")
    assert not w.valid
    with pytest.raises(RuntimeError, match="not open"):
        simple_pmu.native.Window().cycles()


def test_c_delta_is_modulo_the_width(simple_pmu):
    """cycles_window_delta() through the extension: 64 bits where the window has no width."""
    assert simple_pmu.native.Window().delta("cycles", 2**64 - 5, 10) == 15
    with pytest.raises(ValueError, match="not cycles or instructions"):
        simple_pmu.native.Window().delta("ref", 1, 2)


WINDOW_CHECK = """
import json, os, threading
import simple_pmu
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
out = {}
try:
    simple_pmu.native.driver_cycles()
    out["rdpmc"] = "works"
except simple_pmu.CounterFault:
    out["rdpmc"] = "faults"
w = simple_pmu.Window(scope="cpu")
w.begin()
info = w.info()
out["path"], out["width"] = info["path_name"], info["cycles_width"]
a, b = w.cycles(), w.instructions()
errors = []
def other():
    try:
        w.cycles()
    except RuntimeError as exc:
        errors.append(str(exc))
t = threading.Thread(target=other)
t.start()
t.join()
out["other_thread"] = errors
pid = os.fork()
if pid == 0:
    try:
        w.cycles()
        os._exit(1)
    except RuntimeError:
        r = w.end()
        os._exit(0 if not r.valid and "forked" in r.reason else 2)
out["child"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
r = w.end()
out["valid"] = r.valid
out["reason"] = [r.reason.code, str(r.reason)] if r.reason else None
out["reads"] = [a, b]
try:
    w.delta(a, b)
    out["delta"] = "given"
except simple_pmu.CounterUnavailable as exc:
    out["delta"] = exc.code
print(json.dumps(out))
"""


def test_a_faulting_cpu_window_is_invalid_and_the_process_lives(x86_native):  # noqa: F811
    """The module path on a fake x86 driver: begin() works (a generation and a published
    counter), every RDPMC faults on this PMU-less host and cycles.h's guard skips it; the
    window ends invalid and gives no delta. Reads from another thread or a forked child
    are refused; the child's end() says invalid."""
    run, _fake = x86_native
    got = run(WINDOW_CHECK)
    # The width: CPUID leaf 0xA's, else 48.
    assert got["path"] == "simple-pmu module (CPU-wide)" and 1 <= got["width"] <= 48
    if got["rdpmc"] == "works":
        pytest.skip("RDPMC works here: the fault path cannot be seen")
    assert not got["valid"]
    assert got["reads"] == [0, 0]  # the skipped instruction yields 0
    assert got["reason"][0] == "window_invalid" and "a read faulted" in got["reason"][1]
    assert got["delta"] == "window_invalid"
    assert got["other_thread"] == ["Window: read in another thread or process than the one "
                                   "that began it"]
    assert got["child"] == 0


def test_a_module_window_beside_this_threads_perf_user_reads_is_not_exact(window):
    """cycles.h said exact, but this thread had perf events with user reads open during
    the window (simple_pmu's own group, which cycles.h cannot see): perf granted the
    thread the counters itself, so the window is valid, not exact. A perf-path window
    (path 1) is unaffected, and a module window without such a group stays exact."""
    perf = importlib.import_module("simple_pmu.perf")
    exact = window.VALID | window.EXACT
    module = window.Window("cpu", _native=FakeNativeWindow(flags=exact, path=3))
    with module:
        group = perf.PerfGroup.open(("cycles",), user_access=True, specs={"cycles": (1, 1)})
        group.close()
    assert module.result.valid and module.result.exact is False
    thread = window.Window(_native=FakeNativeWindow(flags=exact, path=1))
    with thread:
        perf.PerfGroup.open(("cycles",), user_access=True, specs={"cycles": (1, 1)}).close()
    assert thread.result.exact is True
    with module:
        pass
    assert module.result.exact is True
