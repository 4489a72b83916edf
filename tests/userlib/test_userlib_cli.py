"""The simple-pmu console script, installed by `pip install .` into a fresh venv."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from pathlib import Path

import pytest
from userlib_helpers import validate

SYSFS = Path("/sys/devices/system/simple-pmu/simple-pmu0")
MHZ_RUNS = 5


def run(venv, *args, timeout=300):
    return subprocess.run([venv / "simple-pmu", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_status_names_each_reason(venv, simple_pmu):
    res = run(venv, "status")
    assert res.returncode == 0, res.stderr
    print(res.stdout)
    text = " ".join(res.stdout.split())  # undo the wrapping
    report = simple_pmu.probe()
    for backend in report.backends:
        line = re.search(rf"^{re.escape(backend.name)}\s+(yes|no)\s", res.stdout, re.M)
        assert line and line.group(1) == ("yes" if backend.usable else "no")
        for reason in backend.reasons:
            assert reason in text
    assert re.search(r"^timer\s+yes\s", res.stdout, re.M)
    if not SYSFS.exists():
        assert f"simple-pmu module not loaded: {SYSFS} does not exist" in text


def test_status_json(venv, simple_pmu):
    res = run(venv, "status", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    validate(data)
    assert (data["schema"], data["command"]) == (3, "status")
    backends = {b["name"]: b for b in data["backends"]}
    assert list(backends) == ["driver", "perf-rdpmc", "perf-read", "timer"]
    assert backends["timer"]["usable"] is True
    for b in backends.values():
        assert b["usable"] == (b["reason"] is None)
        if b["reason"] is not None:  # one reason object: the texts joined, the first code
            assert b["reason"]["text"] == "; ".join(r["text"] for r in b["reasons"])
            assert b["reason"]["code"] == b["reasons"][0]["code"]
    assert data["cpu"]["arch"] in ("x86_64", "aarch64")
    best = simple_pmu.probe().best("cycles")
    assert data["measure"]["backend"] == (best.name if best else None)
    if best is None:
        assert data["measure"]["reason"]["code"] == "no_counter_backend"


def test_read_json(venv, simple_pmu):
    """A reading, or on failure a JSON error object on stdout and exit 1: both valid."""
    res = run(venv, "read", "--json")
    data = json.loads(res.stdout)
    validate(data)
    if simple_pmu.probe().best("cycles") is None:
        assert res.returncode == 1
        assert data["error"]["code"] == "no_counter_backend"
        assert res.stderr == f"simple-pmu read: {data['error']['text']}\n"
        # The thread scope's backends only, each reason once.
        assert {b for r in data["reasons"] for b in r["backends"]} <= {"perf-rdpmc",
                                                                       "perf-read"}
        assert len({(r["code"], r["text"]) for r in data["reasons"]}) == len(data["reasons"])
        cpu = json.loads(run(venv, "read", "--scope", "cpu", "--json").stdout)
        assert {r["code"] for r in cpu["reasons"]} >= {"driver_not_loaded"} or \
            SYSFS.exists()
    else:
        assert res.returncode == 0, res.stderr
        assert data["scope"] in ("cpu", "thread") and data["cycles"] is not None


def test_bench_json(venv):
    res = run(venv, "bench", "--calls", "20000", "--repeats", "2", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    validate(data)
    assert (data["command"], data["calls"], data["repeats"]) == ("bench", 20000, 2)
    assert data["ratio"] == pytest.approx(data["read_ns"] / data["perf_counter_ns"])


def test_read(venv, simple_pmu):
    res = run(venv, "read")
    best = simple_pmu.probe().best("cycles")
    if best is None:
        assert res.returncode == 1 and res.stdout == ""
        assert res.stderr.startswith("simple-pmu read: no counter backend usable for scope "
                                     "thread:\n  perf-rdpmc")
    else:
        assert res.returncode == 0, res.stderr
        assert re.search(r"^cycles\s+\d+$", res.stdout, re.M)


def test_read_insisting_on_a_backend(venv, simple_pmu):
    driver = simple_pmu.probe().get("driver")
    res = run(venv, "read", "--backend", "driver")
    if driver.usable:
        assert res.returncode == 0
    else:
        assert res.returncode == 1
        assert res.stderr == f"simple-pmu read: driver: {driver.reason}\n"
    res = run(venv, "read", "--backend", "driver", "--json")
    data = json.loads(res.stdout)
    validate(data)
    if not driver.usable:
        assert data["error"]["code"] == driver.reasons[0].code
        assert [r["text"] for r in data["reasons"]] == list(driver.reasons)


@pytest.mark.parametrize("args, message, usage", [
    ([], "the following arguments are required: COMMAND", "simple-pmu [-h]"),
    (["frobnicate"], "invalid choice: 'frobnicate'", "simple-pmu [-h]"),
    (["mhz", "--runs", "0"], "argument --runs: must be at least 1, not 0", "simple-pmu mhz"),
    (["mhz", "--runs", "many"], "argument --runs: 'many' is not a whole number",
     "simple-pmu mhz"),
    (["mhz", "--clock", "sundial"], "argument --clock: invalid choice: 'sundial'",
     "simple-pmu mhz"),
    (["read", "--backend", "bogus"], "argument --backend: invalid choice: 'bogus'",
     "simple-pmu read"),
    (["bench", "--calls", "-3"], "argument --calls: must be at least 1, not -3",
     "simple-pmu bench"),
    (["status", "--jsn"], "simple-pmu status: error: unrecognized arguments: --jsn",
     "simple-pmu status [-h] [--json]"),
    (["bench", "--json", "extra"], "simple-pmu bench: error: unrecognized arguments: extra",
     "simple-pmu bench"),
])
def test_bad_arguments_exit_2(venv, args, message, usage):
    """Exit 2 with the usage of the command given (a subcommand's own, not the top's)."""
    res = run(venv, *args)
    assert res.returncode == 2
    assert res.stdout == ""
    assert message in res.stderr
    assert res.stderr.startswith(f"usage: {usage}"), res.stderr


def _closed_pipe(cmd, env=None):
    """Run cmd with its stdout a pipe whose reader is already gone (`cmd | head -0`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(cmd, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120, env=env)
    finally:
        os.close(write_end)
    return proc


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["--help"],
                                  ["status", "--help"], ["read", "--json"]])
def test_closed_pipe_no_traceback(venv, args):
    res = _closed_pipe([venv / "simple-pmu", *args])
    assert res.stderr == "" or "Traceback" not in res.stderr, res.stderr
    assert "BrokenPipeError" not in res.stderr and "Exception ignored" not in res.stderr
    assert res.returncode == 141, res.stderr


def test_closed_pipe_check_can_fail(venv):
    """The same closed pipe without main()'s handling (cli.run) does end in a traceback:
    the test above would see it."""
    py = venv / "python"
    res = _closed_pipe([py, "-c", "import sys; from simple_pmu.cli import run; "
                        "sys.exit(run(['status']))"])
    assert "BrokenPipeError" in res.stderr


def test_bench_prints_a_ratio(venv):
    res = run(venv, "bench", "--calls", "200000", "--repeats", "5")
    assert res.returncode == 0, res.stderr
    print(res.stdout)
    assert re.search(r"^ratio \d+\.\d\d \(read / time\.perf_counter_ns\(\)", res.stdout, re.M)
    assert re.search(r"^time\.perf_counter_ns\(\)\s+\d+\.\d ns/call$", res.stdout, re.M)


def test_mhz_json_computes_the_mhz_tools_figure(venv):
    """Each run's figure is the mhz tool's formula applied to that run's own timings,
    200 * count XORs over (t250 - t50), and the median is the runs' median: the two
    computations compared on the same measured loops, whatever the machine was doing.
    Agreement of the two tools' timings belongs to `invoke bench` (pmubuild/bench/benchmhz.py):
    both time a loop with a clock, so any other work on the machine moves them."""
    res = run(venv, "mhz", "--runs", str(MHZ_RUNS), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert len(data["runs"]) == MHZ_RUNS and data["clock"] == "cpu"
    for r in data["runs"]:
        assert r["ns_long"] > r["ns_short"] > 0 and r["count"] >= 1000, r
        # The mhz tool: count * 200.0 / (us250 - us50); here in ns, so * 1000.
        assert r["mhz"] == pytest.approx(r["count"] * 200.0 * 1000 / (r["ns_long"] -
                                                                       r["ns_short"]))
    assert data["median_mhz"] == statistics.median(r["mhz"] for r in data["runs"])
    validate(data)  # inside the versioned contract, like the other commands
    assert data["command"] == "mhz" and data["schema"] == 3
    if data["median_cycles_mhz"] is None:
        assert data["cycle_backend"] is None and data["cycle_reason"]


def test_the_seed_mhz_tool_builds_and_runs(tmp_path):
    """The tool `invoke bench` compares with: built as published, it prints one figure a
    run (what pmubuild.bench.benchmhz parses). SKIP on a clone without the seeds beside it."""
    from pmubuild.bench import benchmhz

    exe = benchmhz.compile_seed(tmp_path)
    if exe is None:
        pytest.skip(f"seed mhz.c not beside the checkout ({benchmhz.SEED_MHZ})")
    res = subprocess.run([exe, "-c", "2"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert benchmhz.parse_seed(res.stdout, 2) > 0


def test_without_the_extension(tmp_path):
    """Only the pure-Python modules (standard library only): status explains, read fails."""
    import shutil
    import sys

    from userlib_helpers import USERLIB

    shutil.copytree(USERLIB / "simple_pmu", tmp_path / "simple_pmu",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "simple_pmu"]
    status = subprocess.run([*cmd, "status"], capture_output=True, text=True, cwd=tmp_path,
                            env=env)
    assert status.returncode == 0, status.stderr
    assert ("the C extension simple_pmu._native is not available (No module named "
            "'simple_pmu._native')") in " ".join(status.stdout.split())
    read = subprocess.run([*cmd, "read"], capture_output=True, text=True, cwd=tmp_path,
                          env=env)
    assert read.returncode == 1
    assert read.stderr.startswith("simple-pmu read: the C extension simple_pmu._native is not")
