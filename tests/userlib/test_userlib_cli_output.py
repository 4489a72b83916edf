"""The CLI's failure output: read's reasons grouped by backend, each reason once (text
and JSON); a command started with standard output closed says so, without a traceback."""

from __future__ import annotations

import importlib
import subprocess

import pytest
from userlib_helpers import validate


@pytest.fixture
def parts(simple_pmu):
    return {n: importlib.import_module(f"simple_pmu.{m}")
            for n, m in (("cli", "cli"), ("jsonout", "jsonout"), ("probe", "_probe"),
                         ("reasons", "reasons"))}


def _report(parts):
    probe, reasons = parts["probe"], parts["reasons"]
    shared = reasons.PERF_OPEN_FAILED.format(event="cycles", errname="EACCES",
                                             meaning="not permitted")
    shared = shared.extended("", "as root: sysctl kernel.perf_event_paranoid=2")
    own = reasons.RDPMC_OFF.format(path="/sys/rdpmc")
    return probe.Report(probe.cpu_info(), (
        probe.Backend("driver", "d", False, (reasons.DRIVER_NOT_LOADED.format(path="/x"),)),
        probe.Backend("perf-rdpmc", "r", False, (own, shared)),
        probe.Backend("perf-read", "p", False, (shared,)),
        probe.Backend("timer", "t", True, (), (), ("ticks",))))


def test_read_failure_grouped_without_duplicates(parts):
    report = _report(parts)
    error = parts["cli"].no_backend_error(report, "thread", report.no_backend("thread"))
    lines = str(error).splitlines()
    assert lines[0] == "no counter backend usable for scope thread:"
    assert lines[1] == "  perf-rdpmc: /sys/rdpmc is 0: user RDPMC is disabled (fix: as root: " \
        "echo 1 > /sys/rdpmc (the kernel's default: RDPMC for tasks with a perf event))"
    assert lines[2] == ("  perf-rdpmc, perf-read: perf_event_open(cycles) failed: EACCES (not "
                        "permitted) (fix: as root: sysctl kernel.perf_event_paranoid=2)")
    assert len(lines) == 3 and "driver" not in str(error)  # the thread scope's backends
    doc = parts["jsonout"].error_doc("read", error)
    validate(doc)
    assert [(r["code"], r["backends"]) for r in doc["reasons"]] == [
        ("rdpmc_off", ["perf-rdpmc"]), ("perf_open_failed", ["perf-rdpmc", "perf-read"])]


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["read", "--json"]])
def test_stdout_closed_no_traceback(venv, args):
    """`simple-pmu status >&-`: descriptor 1 closed at start (sys.stdout is None)."""
    res = subprocess.run(["sh", "-c", '"$0" "$@" >&-', venv / "simple-pmu", *args],
                         capture_output=False, stderr=subprocess.PIPE, text=True,
                         timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stderr == ("simple-pmu: standard output is closed: nothing to write the "
                          "result to\n")
    assert res.returncode == 1
