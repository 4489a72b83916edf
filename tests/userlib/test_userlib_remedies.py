"""Each reason that something would fix carries the remedy: the sysctl, the module, the
capability, the hypervisor's PMU switch; in the text output (status: "(fix: ...)") and
as the "remedy" member of every JSON reason. And mhz --json inside the contract."""

from __future__ import annotations

import errno
import importlib
import pickle

import jsonschema
import pytest
from test_userlib_driver_abi import (  # noqa: F401
    CPUS,
    arm64_cpu,
    driver_measure,
    fake,
    mods,
)
from userlib_helpers import validate


@pytest.fixture
def reasons(simple_pmu):
    return importlib.import_module("simple_pmu.reasons")


@pytest.mark.parametrize(("name", "fields", "remedy"), [
    ("DRIVER_NOT_LOADED", {"path": "/x"}, "modprobe simple-pmu"),
    ("PERF_USER_ACCESS_OFF", {"path": "/p", "value": 0}, "sysctl kernel.perf_user_access=1"),
    ("PERF_USER_ACCESS_ABSENT", {"path": "/p"}, "modprobe simple-pmu"),
    ("RDPMC_OFF", {"path": "/sys/rdpmc"}, "echo 1 > /sys/rdpmc"),
    ("HYPERVISOR_NO_VPMU", {"hypervisor": "KVM"}, "<pmu state='on'/>"),
    ("NO_CPU_PMU", {"path": "/e", "names": "cpu"}, "-cpu host"),
])
def test_reason_carries_its_remedy(reasons, name, fields, remedy):
    reason = getattr(reasons, name).format(**fields)
    assert remedy in reason.remedy
    assert reason.to_dict()["remedy"] == reason.remedy
    assert reason.with_remedy() == f"{reason} (fix: {reason.remedy})"
    assert pickle.loads(pickle.dumps(reason)).remedy == reason.remedy


@pytest.mark.parametrize(("err", "remedy"), [
    (errno.EACCES, "kernel.perf_event_paranoid=2"),
    (errno.EACCES, "CAP_PERFMON"),
    (errno.EPERM, "seccomp profile"),
])
def test_perf_open_failure_remedy(simple_pmu, err, remedy):
    perf = importlib.import_module("simple_pmu.perf")
    exc = perf.perf_error("cycles", err)
    assert remedy in exc.reason.remedy and "modprobe simple-pmu" in exc.reason.remedy


def test_a_reason_without_remedy_says_null(reasons):
    reason = reasons.NO_INSN_COUNTER.format()
    assert reason.remedy == "" and reason.to_dict()["remedy"] is None
    assert reason.with_remedy() == str(reason)


def test_thread_scope_points_to_the_cpu_scope(driver_measure, simple_pmu, mods):  # noqa: F811
    report = mods["measure"]._cache["report"]
    reason = report.no_backend("thread")
    assert reason.remedy == 'measure(scope="cpu") or read --scope cpu'


def test_status_text_and_json_carry_remedies(simple_pmu, reasons):
    cli = importlib.import_module("simple_pmu.cli")
    jsonout = importlib.import_module("simple_pmu.jsonout")
    probe = importlib.import_module("simple_pmu._probe")
    why = reasons.DRIVER_NOT_LOADED.format(path="/sys/x")
    report = probe.Report(probe.cpu_info(), (probe.Backend("driver", "d", False, (why,)),
                          *(probe.Backend(n, n, False, (reasons.NO_INSN_COUNTER.format(),))
                            for n in ("perf-rdpmc", "perf-read", "timer"))))
    text = cli.format_status(report, width=400)
    assert f"{why} (fix: as root: modprobe simple-pmu" in text
    doc = jsonout.status_doc(report)
    validate(doc)
    driver = doc["backends"][0]
    assert driver["reasons"][0]["remedy"].startswith("as root: modprobe simple-pmu")
    assert driver["reason"] == driver["reasons"][0]  # one shape: an object, not a string


def test_mhz_document(simple_pmu, reasons):
    jsonout = importlib.import_module("simple_pmu.jsonout")
    mhz = importlib.import_module("simple_pmu.mhz")
    run = mhz.MhzRun(1000, 1_000_000, 5_000_000, 50.0, 1000.0)
    result = mhz.MhzResult((run,), "cpu", None, reasons.NO_INSN_COUNTER.format())
    doc = jsonout.mhz_doc(result)
    validate(doc)
    assert (doc["schema"], doc["command"]) == (jsonout.SCHEMA_VERSION, "mhz")
    assert doc["cycle_reason"]["code"] == "no_insn_counter"
    del doc["schema"]
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)
