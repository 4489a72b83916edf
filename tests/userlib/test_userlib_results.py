"""A measurement's result as a value: Reason survives copy and pickle, to_dict() works
with a reason and notes, reason is Reason | None, ok, and measure(strict=True)."""

from __future__ import annotations

import copy
import importlib
import json
import pickle
import typing

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


@pytest.fixture
def reasons(simple_pmu):
    return importlib.import_module("simple_pmu.reasons")


def _copies(obj):
    yield copy.copy(obj)
    yield copy.deepcopy(obj)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        yield pickle.loads(pickle.dumps(obj, protocol))


def test_reason_survives_copy_and_pickle(reasons):
    for template in reasons.all_templates().values():
        fields = {name: 1 for name in _field_names(template.text)}
        reason = template.format(**fields)
        for back in _copies(reason):
            assert type(back) is reasons.Reason, template
            assert (back.code, str(back)) == (reason.code, str(reason))
    extended = reasons.DRIVER_NOT_LOADED.format(path="/p").extended(" (more)")
    assert pickle.loads(pickle.dumps(extended)).code == "driver_not_loaded"


def _field_names(text):
    import string

    return {name.split(".")[0].split("[")[0] for _, name, _, _ in
            string.Formatter().parse(text) if name}


def _measurement(simple_pmu, reasons):
    measure = importlib.import_module("simple_pmu._measure")
    return measure.Measurement(
        "perf-read", None, None, 5, reasons.PERF_NOT_SCHEDULED.format(enabled=9),
        scope="thread", rings=("user",), exact=True,
        notes=(reasons.PERF_MULTIPLEXED.format(percent=50.0, running=1, enabled=2),))


def test_measurement_with_a_reason_and_notes(simple_pmu, reasons):
    m = _measurement(simple_pmu, reasons)
    data = m.to_dict()
    json.dumps(data)
    assert data["reason"] == {"code": "perf_not_scheduled", "text": str(m.reason),
                              "remedy": m.reason.remedy}
    assert [n["code"] for n in data["notes"]] == ["perf_multiplexed"]
    assert data["ok"] is False and data["rings"] == ["user"]
    for back in _copies(m):
        assert back == m and back.reason.code == "perf_not_scheduled"
        assert back.notes[0].code == "perf_multiplexed"
    hints = typing.get_type_hints(type(m))
    assert hints["reason"] == reasons.Reason | None
    assert hints["notes"] == tuple[reasons.Reason, ...]


def test_ok(stand_in, simple_pmu):  # noqa: F811
    with simple_pmu.measure() as m:
        assert not m.ok  # not before the block has ended
        simple_pmu.known_loop(1000)
    assert m.ok and m.reason is None and m.to_dict()["ok"] is True


def _span(before=10, after=10):
    FakeSpan.values_ = (100, 350, 10, 40)
    FakeSpan.info_ = {"cpu": CPUS[0], "cycle_index": 31, "insn_index": 5,
                      "generation_before": before, "generation_after": after,
                      "valid": 1, "exact": 1}


def test_strict_raises_where_a_result_would_lack_counts(driver_measure, simple_pmu):  # noqa: F811
    _span(before=10, after=11)
    with simple_pmu.measure("driver") as m:
        pass
    assert not m.ok and m.reason.code == "measure_generation_changed"
    with pytest.raises(simple_pmu.CounterUnavailable) as info, \
            simple_pmu.measure("driver", strict=True):
        pass
    assert info.value.code == "measure_generation_changed"
    assert str(info.value).startswith("the driver's counters on CPU")
    # No counter backend for the thread here: strict raises before the block runs.
    ran = []
    with pytest.raises(simple_pmu.CounterUnavailable) as info, \
            simple_pmu.measure(strict=True):
        ran.append(1)
    assert info.value.code == "no_counter_backend" and ran == []
    # An exception leaving the block is not replaced by strict's.
    with pytest.raises(KeyError), simple_pmu.measure("driver", strict=True):
        raise KeyError("the block's own")
    _span()
    with simple_pmu.measure("driver", strict=True) as m:
        pass
    assert m.ok and (m.cycles, m.instructions) == (250, 30)


def test_backend_reason_has_the_one_shape(simple_pmu, reasons):
    """Backend.reason is a Reason like Measurement.reason (None when usable), not a bare
    string: the joined texts with the first reason's code and remedy."""
    probe = importlib.import_module("simple_pmu._probe")
    why = (reasons.DRIVER_NOT_LOADED.format(path="/x"), reasons.NO_TSC.format())
    backend = probe.Backend("driver", "d", False, why)
    assert isinstance(backend.reason, reasons.Reason)
    assert (backend.reason.code, backend.reason.remedy) == ("driver_not_loaded",
                                                            why[0].remedy)
    assert backend.reason == "; ".join(why)
    assert backend.to_dict()["reason"] == backend.reason.to_dict()
    assert probe.Backend("timer", "t", True).reason is None
