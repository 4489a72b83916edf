"""invoke bench (pmubuild/bench/bench.py, bench/readbench.c): statistics, ratios, the table, the
reasons of unavailable paths on this host, callgrind's figures, the goals and the plot."""

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from pmubuild.bench import bench

DRIVER_DIR = Path("/sys/devices/system/simple-pmu/simple-pmu0")
EVENT_SOURCES = Path("/sys/bus/event_source/devices")


def cpu_pmu_here() -> bool:
    names = ("cpu", "cpu_core", "cpu_atom", "armv8_pmuv3_0")
    return any((EVENT_SOURCES / n).exists() for n in names)


# --- statistics and ratios ---------------------------------------------------------------

def test_summarize_median_spread_and_ratio_to_the_fastest():
    out = bench.summarize([bench.Path_("a", "A", (10.0, 12.0, 11.0, 30.0, 9.0)),
                           bench.Path_("b", "B", (2.0, 2.5, 2.0)),
                           bench.Path_("c", "C", reason="no such thing here")], "ns")
    a, b, c = out
    assert (a["median"], a["min"], a["max"]) == (11.0, 9.0, 30.0)
    assert (a["q1"], a["q3"]) == (10.0, 12.0)
    assert b["median"] == 2.0 and b["ratio"] == 1.0
    assert a["ratio"] == pytest.approx(5.5)
    assert c == {"name": "c", "what": "C", "available": False, "reason": "no such thing here"}


def test_summarize_one_sample_and_nothing_available():
    (one,) = bench.summarize([bench.Path_("x", "X", (4.0,))], "ns")
    assert (one["q1"], one["q3"], one["ratio"]) == (4.0, 4.0, 1.0)
    (none,) = bench.summarize([bench.Path_("y", "Y", reason="why")], "ns")
    assert none["available"] is False and none["reason"] == "why"


def test_parse_readbench_subtracts_each_runs_empty_loop():
    doc = {"paths": [
        {"name": "rdtsc", "what": "RDTSC", "available": True, "reads": 10,
         "read_ns": [10.0, 11.0], "loop_ns": [0.5, 0.25]},
        {"name": "perf-read", "what": "read", "available": False, "reason": "no PMU"},
    ]}
    r, p = bench.parse_readbench(doc)
    assert r.samples == (9.5, 10.75) and r.reason is None
    assert p.samples == () and p.reason == "no PMU"


def test_table_fastest_first_then_the_reasons():
    # Named so that the order by name is not the order by cost.
    paths = bench.summarize([bench.Path_("a-slow", "S", (100.0,)),
                             bench.Path_("b-fast", "F", (10.0, 10.0)),
                             bench.Path_("gone", "G", reason="module not loaded")], "ns")
    lines = bench.table("T", paths, "ns")
    assert lines[0] == "T" and "median" in lines[1] and "ratio" in lines[1]
    assert lines[2].split()[0] == "b-fast" and lines[2].split()[-1] == "1.00"
    assert lines[3].split()[0] == "a-slow" and lines[3].split()[-1] == "10.00"
    assert lines[4] == "  unavailable: gone: module not loaded"


# --- the C benchmark on this host -------------------------------------------------------

@pytest.fixture(scope="module")
def readbench(tmp_path_factory):
    return bench.compile_readbench(tmp_path_factory.mktemp("readbench"))


@pytest.fixture(scope="module")
def host_doc(readbench):
    return bench.run_readbench(readbench, 3)


def by_name(doc):
    return {p["name"]: p for p in doc["paths"]}


def test_readbench_lists_every_path_once(host_doc):
    assert [p["name"] for p in host_doc["paths"]] == [
        "driver", "window-cpu", "window-cpu-fixed", "bare", "rdtsc", "rdtscp", "lfence-rdtsc",
        "cntvct", "clock_gettime", "selfmon", "window", "window-fixed", "perf-mmap",
        "perf-read"]
    for p in host_doc["paths"]:
        if p["available"]:
            assert len(p["read_ns"]) == len(p["loop_ns"]) == 3
            assert all(v > 0 for v in p["read_ns"]), p
        else:
            assert p["reason"], p


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 host paths")
def test_readbench_x86_paths_run_and_arm64_ones_say_why(host_doc):
    paths = by_name(host_doc)
    for name in ("rdtsc", "lfence-rdtsc", "clock_gettime"):
        assert paths[name]["available"], paths[name]
    assert paths["cntvct"] == {"name": "cntvct", "what": "mrs CNTVCT_EL0", "available": False,
                               "reason": "arm64 only"}


@pytest.mark.skipif(DRIVER_DIR.exists(), reason="simple-pmu is loaded here")
def test_readbench_driver_not_loaded_reason(host_doc):
    paths = by_name(host_doc)
    for name in ("driver", "window-cpu", "window-cpu-fixed"):
        assert paths[name]["reason"] == "simple-pmu: module not loaded"
    # Without the module the bare read is the one perf's self-monitoring grant allows.
    assert paths["bare"]["available"] or paths["bare"]["reason"].startswith("cycles.h reads")


@pytest.mark.skipif(cpu_pmu_here(), reason="this host has a CPU PMU")
def test_readbench_no_pmu_reason(host_doc):
    paths = by_name(host_doc)
    for name in ("perf-read", "perf-mmap"):
        assert paths[name]["available"] is False
        assert paths[name]["reason"].startswith("no PMU: perf_event_open cycles: ENOENT"), \
            paths[name]


@pytest.mark.skipif(cpu_pmu_here(), reason="this host has a CPU PMU")
def test_readbench_insns_needs_the_driver_or_perf(readbench):
    """--insns counts with the module's instruction counter, else with a perf
    instructions event of its thread: with neither it says why, and fails."""
    proc = subprocess.run([str(readbench), "--insns"], capture_output=True, text=True)
    if DRIVER_DIR.exists():
        pytest.skip("simple-pmu is loaded here")
    assert proc.returncode == 3
    assert proc.stdout == ("unavailable path=instrument reason=simple-pmu: module not loaded, "
                           "and perf_event_open instructions: No such file or directory\n")


def test_readbench_refuses_bad_arguments(readbench):
    proc = subprocess.run([str(readbench), "--runs", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "bad --runs: 0" in proc.stderr


# --- callgrind ---------------------------------------------------------------------------

ANNOTATE = """\
--------------------------------------------------------------------------------
Ir                 file:function
--------------------------------------------------------------------------------
3,051,453 (100.0%)  ???:main [/b/readbench]
  900,007 (29.49%)  ???:run_lfence_rdtsc [/b/readbench]
  800,007 (26.22%)  ???:run_rdtsc [/b/readbench]
  400,007 (13.11%)  ???:run_empty [/b/readbench]
"""
ONCE = """\
unavailable path=driver reason=simple-pmu: module not loaded
ran path=rdtsc function=run_rdtsc
ran path=lfence-rdtsc function=run_lfence_rdtsc
unavailable path=clock_gettime reason=no vDSO in this process
"""


def test_parse_callgrind_annotate():
    assert bench.parse_callgrind(ANNOTATE) == {"lfence_rdtsc": 900007, "rdtsc": 800007,
                                               "empty": 400007}


def test_callgrind_table_per_read_minus_the_empty_loop():
    t = bench.callgrind_table(bench.parse_callgrind(ANNOTATE), ONCE, 100000)
    assert t["available"] and t["empty_loop_per_read"] == 4.00007
    assert t["paths"] == [
        {"name": "driver", "available": False, "reason": "simple-pmu: module not loaded"},
        {"name": "rdtsc", "available": True, "insns_per_read": 4.0},
        {"name": "lfence-rdtsc", "available": True, "insns_per_read": 5.0},
        {"name": "clock_gettime", "available": False, "reason": "no vDSO in this process"}]


def test_callgrind_table_without_the_empty_loop():
    assert bench.callgrind_table({"rdtsc": 5}, ONCE, 10)["available"] is False


@pytest.mark.skipif(shutil.which("valgrind") is None or os.uname().machine != "x86_64",
                    reason="needs valgrind on x86-64")
def test_callgrind_counts_rdtsc_exactly(readbench):
    t = bench.callgrind_insns(readbench, {}, reads=1000)
    paths = {p["name"]: p for p in t["paths"]}
    # RDTSC, then shl/or of EDX:EAX and the add into the sum (gcc -O2): 4 instructions;
    # LFENCE one more. Exact: callgrind counts instructions, not time.
    assert paths["rdtsc"]["insns_per_read"] == 4.0
    assert paths["lfence-rdtsc"]["insns_per_read"] == 5.0


# --- goals and the whole report ---------------------------------------------------------

def py_paths(read_ns, clock_ns, reason=None):
    read = bench.Path_("simple_pmu.read", "r", () if reason else (read_ns,), reason)
    return bench.summarize([read, bench.Path_("time.perf_counter_ns", "p", (clock_ns,))], "ns")


@pytest.mark.parametrize(("read", "clock", "status"), [(100.0, 80.0, "met"),
                                                        (120.0, 80.0, "met"),
                                                        (121.0, 80.0, "not met")])
def test_python_goal(read, clock, status):
    (g,) = bench.goals(py_paths(read, clock))
    assert g["status"] == status and g["figure"] == pytest.approx(read / clock)


def test_python_goal_not_measurable_without_a_counter():
    (g,) = bench.goals(py_paths(0, 80.0, reason="no counter backend usable: x"))
    assert g["status"] == "not measurable here" and g["reason"] == "no counter backend usable: x"


def c_paths(window_ns, bare_ns, reason=None):
    window = bench.Path_("window", "w", () if reason else (window_ns,), reason)
    return bench.summarize([window, bench.Path_("bare", "b", (bare_ns,))], "ns")


@pytest.mark.parametrize(("window", "bare", "status"), [(12.0, 10.0, "met"),
                                                        (12.5, 10.0, "not met")])
def test_window_goal(window, bare, status):
    g, cpu, fixed, cpu_fixed = bench.window_goals(c_paths(window, bare))
    assert g["status"] == status and g["figure"] == pytest.approx(window / bare)
    for other in (cpu, fixed, cpu_fixed):
        assert other["status"] == "not measurable here" and other["reason"] == "no figure"
    assert fixed["goal"] == "C window-fixed read <= 1.2 x bare (ns)"


def test_window_goal_not_measurable_without_a_window():
    g, *_ = bench.window_goals(c_paths(0, 10.0, reason="perf grants no user reads"))
    assert g["status"] == "not measurable here" and g["reason"] == "perf grants no user reads"


C_DOC = {"tool": "readbench", "unit": "ns", "arch": "x86_64", "cpu": 0, "runs": 2, "paths": [
    {"name": "rdtsc", "what": "RDTSC", "available": True, "reads": 1000,
     "read_ns": [9.0, 10.0], "loop_ns": [0.0, 0.0]},
    {"name": "clock_gettime", "what": "vDSO", "available": True, "reads": 1000,
     "read_ns": [20.0, 22.0], "loop_ns": [0.0, 0.0]},
    {"name": "perf-read", "what": "read", "available": False, "reason": "no PMU: ENOENT"}]}
PY_DOC = {"calls": 100, "repeats": 2, "paths": [
    {"name": "simple_pmu.read", "what": "r", "available": False, "reason": "no backend"},
    {"name": "time.perf_counter_ns", "what": "p", "available": True,
     "samples_ns": [50.0, 60.0]}]}


def test_document_and_report():
    doc = bench.document(C_DOC, PY_DOC, {"available": False, "reason": "no valgrind"},
                         {"available": False, "reason": "the seed mhz tool is not beside"})
    assert doc["schema"] == bench.SCHEMA
    assert [p["name"] for p in doc["c"]["paths"]] == ["rdtsc", "clock_gettime", "perf-read"]
    assert doc["c"]["paths"][1]["ratio"] == pytest.approx(21.0 / 9.5)
    text = "\n".join(bench.report(doc))
    assert "unavailable: perf-read: no PMU: ENOENT" in text
    assert "unavailable: simple_pmu.read: no backend" in text
    assert "Instructions per read (callgrind): not measured: no valgrind" in text
    assert "goal simple_pmu read <= 1.5 x time.perf_counter_ns(): not measurable here" in text
    assert ("CPU frequency, mhz tool vs simple-pmu mhz: not run: the seed mhz tool is not "
            "beside") in text
    json.dumps(doc)


# --- the plot ----------------------------------------------------------------------------

def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_plot_from_a_json_document(tmp_path):
    pytest.importorskip("matplotlib")
    doc = bench.document(C_DOC, PY_DOC, {"available": False, "reason": "x"},
                         {"available": False, "reason": "y"})
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(doc))
    out = bench.plot(json.loads(src.read_text()), tmp_path / "p.png")
    w, h = png_size(out)
    assert w == 800 and h > 200
    # One bar a path that ran: three here; more rows make a taller figure.
    assert bench.plot_rows(doc) == (["C: rdtsc", "C: clock_gettime",
                                     "Python: time.perf_counter_ns"],
                                    ["C: perf-read", "Python: simple_pmu.read"])
    # The same JSON makes the same file (it is committed).
    again = bench.plot(doc, tmp_path / "q.png")
    assert again.read_bytes() == out.read_bytes()
