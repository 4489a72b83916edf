"""simple_pmu.bench's Python read paths: statistics, ratios, the table, the reason of an
unavailable counter read on this host, the JSON document against the schema, the CLI."""

from __future__ import annotations

import json
import re

import pytest
from jsonschema import Draft202012Validator


@pytest.fixture
def b(simple_pmu):
    import simple_pmu.bench as mod

    return mod


WINDOWS = ["Window(thread).cycles", "Window(cpu).cycles"]
ALWAYS = ["simple_pmu.timer", "time.perf_counter_ns", "time.monotonic_ns"]  # run anywhere
PATHS = ["simple_pmu.read", *WINDOWS, *ALWAYS]


def test_stats_median_quartiles_and_ratios(b):
    paths = b.with_ratios([b.PathStats("a", "A", (10.0, 12.0, 11.0, 30.0, 9.0)),
                           b.PathStats("b", "B", (2.0, 2.5, 2.0)),
                           b.PathStats("c", "C", reason="cannot")])
    a, fast, gone = paths
    assert a.median == 11.0 and a.quartiles() == (10.0, 12.0)
    assert fast.ratio == 1.0 and a.ratio == pytest.approx(5.5) and gone.ratio is None
    assert gone.to_dict() == {"name": "c", "what": "C", "available": False,
                              "reason": "cannot"}
    d = a.to_dict()
    assert (d["median_ns"], d["min_ns"], d["max_ns"], d["q1_ns"], d["q3_ns"]) == \
        (11.0, 9.0, 30.0, 10.0, 12.0)
    assert d["samples_ns"] == [10.0, 12.0, 11.0, 30.0, 9.0]


def test_paths_table(b):
    lines = b.paths_table(b.with_ratios([b.PathStats("x.fast", "F", (1.0, 1.0)),
                                         b.PathStats("x.slow", "S", (3.0,)),
                                         b.PathStats("x.gone", "G", reason="why not")]))
    assert lines[0].split() == ["path", "median", "min", "max", "IQR", "ratio"]
    assert lines[1].split() == ["x.fast", "1.00", "1.00", "1.00", "0.00", "1.00"]
    assert lines[2].split() == ["x.slow", "3.00", "3.00", "3.00", "0.00", "3.00"]
    assert lines[-1] == "unavailable: x.gone: why not"


def test_bench_has_every_python_path(simple_pmu, b):
    report = simple_pmu.probe()
    r = b.bench(report, calls=2000, repeats=3)
    assert [p.name for p in r.paths] == PATHS
    by = {p.name: p for p in r.paths}
    for name in ALWAYS:
        assert by[name].available and len(by[name].samples) == 3
        assert all(s > 0 for s in by[name].samples)
    for name in WINDOWS:  # read in an open window, or why none could begin
        window = by[name]
        assert window.available and len(window.samples) == 3 or \
            window.reason.startswith(("no window could begin (scope ", "not beside")), window
    assert min(p.ratio for p in r.paths if p.ratio is not None) == 1.0
    counter = by["simple_pmu.read"]
    if report.best("cycles") is None:
        # This host: no counter backend; the reason is the probe's.
        assert not counter.available
        assert counter.reason == str(report.no_backend())
        assert counter.reason.startswith("no counter backend usable for scope thread: "
                                         "perf-rdpmc: ")
    else:
        assert counter.available and len(counter.samples) == 3


def test_bench_document_validates(simple_pmu, b):
    import simple_pmu.jsonout as jsonout

    r = b.bench(simple_pmu.probe(), calls=1000, repeats=2)
    doc = jsonout.bench_doc(r)
    Draft202012Validator(jsonout.schema()).validate(doc)
    assert doc["schema"] == jsonout.SCHEMA_VERSION == 3
    assert [p["name"] for p in doc["paths"]] == PATHS
    broken = json.loads(json.dumps(doc))
    broken["paths"][PATHS.index("time.perf_counter_ns")]["median_ns"] = -1
    assert list(Draft202012Validator(jsonout.schema()).iter_errors(broken))


def test_cli_bench_prints_the_paths(venv):
    from test_userlib_cli import run

    res = run(venv, "bench", "--calls", "20000", "--repeats", "3")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # The first lines and the ratio line as before (tests/guest/arm64/28-python-bench.sh).
    assert re.search(r"^ratio \d+\.\d\d \(read / time\.perf_counter_ns\(\)", out, re.M)
    assert len(re.findall(r"^ratio ", out, re.M)) == 1
    assert "Python read paths, 3 x 20000 calls, loop included:" in out
    for name in ALWAYS:
        assert re.search(rf"^{re.escape(name)}\s+\d+\.\d\d\s", out, re.M), out
    res = run(venv, "bench", "--calls", "2000", "--repeats", "2", "--json")
    data = json.loads(res.stdout)
    assert [p["name"] for p in data["paths"]] == PATHS


def test_every_path_is_called_calls_times_per_repeat(simple_pmu, b, monkeypatch):
    made = []

    def counted():
        made.append(1)

    monkeypatch.setattr(b, "python_paths", lambda *a: [("x", "X", counted, None),
                                                       ("y", "Y", None, "cannot")])
    r = b.bench(simple_pmu.probe(), calls=500, repeats=3)
    assert len(made) == 1500
    assert [p.name for p in r.paths] == ["x", "y"] and r.paths[1].reason == "cannot"
    assert len(r.paths[0].samples) == 3
