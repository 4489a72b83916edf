"""measure(scope=...): "thread" by default (perf, exact), "cpu" only when asked (the
module's counters, advisory where a counter perf moves is seen only at the driver's next
check); every result says its path (backend), scope and exactness."""

from __future__ import annotations

import pytest
from test_userlib_driver_abi import (  # noqa: F401
    CPUS,
    FakeSpan,
    arm64_cpu,
    driver_measure,
    fake,
    mods,
)
from test_userlib_threads import stand_in  # noqa: F401


def _driver_span(values=(100, 350, 10, 40)):
    FakeSpan.values_ = values
    FakeSpan.info_ = {"cpu": CPUS[0], "cycle_index": 31, "insn_index": 5,
                      "generation_before": 10, "generation_after": 10,
                      "valid": 1, "exact": 1}


def test_thread_by_default_and_cpu_when_asked(driver_measure, simple_pmu, mods):  # noqa: F811
    """The driver usable, perf not: measure() counts nothing and says scope cpu would;
    measure(scope="cpu") uses the driver and says it counts the CPU."""
    _driver_span()
    with simple_pmu.measure() as m:
        pass
    assert m.backend is None and m.cycles is None and m.scope == "thread"
    assert m.reason.code == "no_counter_backend"
    assert m.reason.startswith("no counter backend usable for scope thread: perf-rdpmc: fake")
    assert m.reason.endswith('scope cpu (measure(scope="cpu")) would count every task on '
                             "the CPU with driver")
    with simple_pmu.measure(scope="cpu") as m:
        pass
    assert (m.backend, m.scope, m.cycles, m.instructions) == ("driver", "cpu", 250, 30)
    assert mods["measure"]._local.readers.keys() == {"thread", "cpu"}


def test_driver_readings_are_advisory_before_5_17(driver_measure, simple_pmu, mods,  # noqa: F811
                                                  monkeypatch, tmp_path):
    """arm64 without perf_user_access (before 5.17): advisory, with a note saying why;
    with it (perf withdraws access at every move): exact."""
    sysinfo = mods["sysinfo"]
    monkeypatch.setattr(sysinfo, "PERF_USER_ACCESS", str(tmp_path / "absent"))
    _driver_span()
    with simple_pmu.measure(scope="cpu") as m:
        pass
    assert m.exact is False and m.cycles == 250
    assert [n.code for n in m.notes] == ["driver_advisory"]
    assert "before 5.17" in m.notes[0]
    (tmp_path / "perf_user_access").write_text("0\n")
    monkeypatch.setattr(sysinfo, "PERF_USER_ACCESS", str(tmp_path / "perf_user_access"))
    with simple_pmu.measure("driver") as m:
        pass
    assert m.exact is True and m.notes == () and m.scope == "cpu"
    monkeypatch.setattr(simple_pmu.native, "ARCH", "x86_64")
    assert mods["measure"].driver_exactness("x86_64")[0] is False


def test_perf_is_exact_per_thread(stand_in, simple_pmu):  # noqa: F811
    with simple_pmu.measure() as m:
        simple_pmu.known_loop(1000)
    assert (m.backend, m.scope, m.exact) == ("perf-read", "thread", True)
    with simple_pmu.measure(scope="cpu") as m:
        pass
    assert m.backend is None and m.cycles is None and m.scope == "cpu"
    assert m.reason.startswith("no counter backend usable for scope cpu: driver: fake")


@pytest.mark.parametrize(("kwargs", "code", "text"), [
    ({"scope": "process"}, "unknown_scope", "unknown scope 'process'; choose from thread, cpu"),
    ({"backend": "driver", "scope": "thread"}, "backend_not_in_scope",
     "backend 'driver' counts scope 'cpu', not 'thread'"),
    ({"backend": "perf-read", "scope": "cpu"}, "backend_not_in_scope",
     "backend 'perf-read' counts scope 'thread', not 'cpu'"),
])
def test_scope_usage_errors(simple_pmu, kwargs, code, text):
    with pytest.raises(simple_pmu.UsageError) as info:
        simple_pmu.measure(**kwargs)
    assert (info.value.code, str(info.value)) == (code, text)
