"""`invoke bench`: the cost of reading a counter, every way, on this host.

Three measurements, one JSON document (build/bench.json), a table and a plot:

- C (bench/readbench.c, built here with -Wall -Wextra -Werror): ns per read of every
  read path the machine has (the driver's read, RDTSC, RDTSCP, LFENCE;RDTSC,
  CNTVCT, clock_gettime through the vDSO, perf read(2), perf mmap self-monitoring),
  each repeat's figure minus the empty loop's; median, min/max, IQR and the ratio of
  each median to the fastest; a path that cannot run, with its probe's reason.
- Python (`python -m simple_pmu bench --json` of the userlib built here, as
  `simple-pmu bench --json` runs for an installed library): simple_pmu's read,
  time.perf_counter_ns(), time.monotonic_ns(), the same statistics.
- Instructions (x86-64, valgrind's callgrind): per read, each path's loop function's
  inclusive instruction count minus the empty loop's, over N reads. callgrind counts
  user-space instructions only and hides the vDSO (clock_gettime becomes a system
  call), so those paths are listed with that reason.
- CPU frequency (pmubuild/bench/benchmhz.py): the seed mhz tool and `simple-pmu mhz`, round
  by round, each tool's spread, and a verdict only where the spreads allow one.

The exact instruction counts of arm64 come from the guest (tests/guest/arm64/
45-bench-icount.sh), not from here. docs/benchmarks.md reads the tables.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pmubuild.bench import benchmhz
from pmubuild.common.errors import PipelineError

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "bench" / "readbench.c"
OUT_DIR = REPO / "build" / "bench"
JSON_OUT = REPO / "build" / "bench.json"
PLOT_OUT = REPO / "docs" / "benchmarks.png"
CALLGRIND_READS = 100_000
# The goals the tables are read against (issue 14; docs/benchmarks.md).
GOAL_PYTHON_RATIO = 1.5  # simple_pmu read / time.perf_counter_ns(), at most
GOAL_WINDOW_RATIO = 1.2  # a read inside a cycles.h window / the bare instruction (issue 22)
SCHEMA = 2  # of build/bench.json (2: the mhz comparison)


@dataclass(frozen=True)
class Path_:
    """One read path of one measurement: per-repeat figures, or why it cannot run."""

    name: str
    what: str
    samples: tuple[float, ...] = ()
    reason: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def quartiles(self) -> tuple[float, float] | None:
        if not self.samples:
            return None
        if len(self.samples) == 1:
            return self.samples[0], self.samples[0]
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]


def _num(x: object) -> float:
    """A number of the JSON document (the statistics are ints or floats there)."""
    if not isinstance(x, int | float):
        raise PipelineError(f"not a number in the benchmark document: {x!r}")
    return float(x)


def summarize(paths: Sequence[Path_], unit: str) -> list[dict[str, object]]:
    """The paths as JSON objects: median, min, max, Q1, Q3 and ratio (median over the
    smallest median of the available paths), or available false with the reason."""
    medians = [m for m in (p.median for p in paths) if m is not None]
    fastest = min(medians) if medians else None
    out: list[dict[str, object]] = []
    for p in paths:
        q = p.quartiles()
        if p.reason is not None or p.median is None or q is None:
            out.append({"name": p.name, "what": p.what, "available": False,
                        "reason": p.reason or "no samples"})
            continue
        ratio = p.median / fastest if fastest else None
        out.append({"name": p.name, "what": p.what, "available": True, "unit": unit,
                    "median": p.median, "min": min(p.samples), "max": max(p.samples),
                    "q1": q[0], "q3": q[1], "ratio": ratio, "samples": list(p.samples)})
    return out


def parse_readbench(doc: dict[str, object]) -> list[Path_]:
    """readbench's JSON: each available path's per-repeat ns per read minus the empty
    loop's in the same repeat (never below 0)."""
    paths = []
    raw = doc.get("paths")
    if not isinstance(raw, list):
        raise PipelineError(f"readbench printed no paths: {doc}")
    for p in raw:
        if not p.get("available"):
            paths.append(Path_(p["name"], p["what"], reason=p.get("reason") or "unavailable"))
            continue
        samples = tuple(max(0.0, r - loop) for r, loop in zip(p["read_ns"], p["loop_ns"],
                                                              strict=True))
        paths.append(Path_(p["name"], p["what"], samples))
    return paths


def table(title: str, paths: Sequence[dict[str, object]], unit: str) -> list[str]:
    """A summarized measurement as text: one line per available path, fastest first;
    then each unavailable path with its reason."""
    ran = sorted((p for p in paths if p["available"]), key=lambda p: _num(p["median"]))
    name_w = max([len(str(p["name"])) for p in paths] + [4])
    lines = [title, f"  {'path':<{name_w}}  {'median':>9}  {'min':>9}  {'max':>9}  "
                    f"{'IQR':>8}  {'ratio':>6}  ({unit} per read)"]
    for p in ran:
        iqr = _num(p["q3"]) - _num(p["q1"])
        lines.append(f"  {p['name']!s:<{name_w}}  {p['median']:9.2f}  {p['min']:9.2f}  "
                     f"{p['max']:9.2f}  {iqr:8.2f}  {p['ratio']:6.2f}")
    lines += [f"  unavailable: {p['name']}: {p['reason']}" for p in paths if not p["available"]]
    return lines


def compile_readbench(out_dir: Path = OUT_DIR) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise PipelineError("no C compiler (gcc) to build bench/readbench.c: ./devenv installs it")
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "readbench"
    proc = subprocess.run([cc, "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-I",
                           str(REPO / "include"), "-o", str(exe), str(SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"compiling {SOURCE.name} failed:\n{proc.stderr}")
    return exe


def run_readbench(exe: Path, runs: int) -> dict[str, object]:
    proc = subprocess.run([str(exe), "--runs", str(runs)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"readbench failed ({proc.returncode}): {proc.stderr}")
    try:
        doc: dict[str, object] = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise PipelineError(f"readbench printed no JSON ({e}): {proc.stdout[:500]}") from None
    return doc


def build_userlib(out_dir: Path = OUT_DIR / "py") -> Path:
    """An importable simple_pmu (the pure-Python modules and a freshly built _native)
    in out_dir, built with the one-line command of docs/DEVELOPING.md (Running things in a
    guest)."""
    pkg = out_dir / "simple_pmu"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(REPO / "userlib" / "simple_pmu", pkg,
                    ignore=shutil.ignore_patterns("*.c", "*.so", "__pycache__"))
    cc = shutil.which("gcc") or "cc"
    ext = pkg / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    proc = subprocess.run([cc, "-O2", "-shared", "-fPIC",
                           f"-I{sysconfig.get_paths()['include']}", f"-I{REPO / 'include'}",
                           str(REPO / "userlib" / "simple_pmu" / "_native.c"), "-o", str(ext)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"building simple_pmu's extension failed (python3-dev?):\n"
                            f"{proc.stderr}")
    return out_dir


def run_python_bench(pythonpath: Path, calls: int, repeats: int) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    proc = subprocess.run([sys.executable, "-m", "simple_pmu", "bench", "--json", "--calls",
                           str(calls), "--repeats", str(repeats)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise PipelineError(f"simple-pmu bench failed ({proc.returncode}): "
                            f"{proc.stdout}{proc.stderr}")
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


def python_paths(doc: dict[str, object]) -> list[Path_]:
    raw = doc.get("paths")
    if not isinstance(raw, list):
        raise PipelineError("simple-pmu bench --json has no paths (an older simple_pmu?)")
    return [Path_(p["name"], p["what"], tuple(p.get("samples_ns", ())),
                  None if p["available"] else p["reason"]) for p in raw]


_CG_LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+\S*:run_(\w+)\s")


def parse_callgrind(annotate: str) -> dict[str, int]:
    """Inclusive instruction counts of readbench's run_* loop functions, from
    callgrind_annotate --inclusive=yes output: {path function suffix: count}."""
    counts = {}
    for line in annotate.splitlines():
        m = _CG_LINE.match(line)
        if m:
            counts[m.group(2)] = int(m.group(1).replace(",", ""))
    return counts


def callgrind_insns(exe: Path, ran: dict[str, object], reads: int = CALLGRIND_READS
                    ) -> dict[str, object]:
    """Instructions per read of each path under callgrind, or why there are none."""
    valgrind, annotate = shutil.which("valgrind"), shutil.which("callgrind_annotate")
    if platform.machine() != "x86_64":
        return {"available": False, "reason": "callgrind figures are for the x86-64 host"}
    if not valgrind or not annotate:
        return {"available": False,
                "reason": "valgrind is not installed (./devenv installs it: Debian valgrind)"}
    out = exe.parent / "callgrind.out"
    proc = subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={out}",
                           str(exe), "--once", str(reads)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"available": False, "reason": f"valgrind exited {proc.returncode}: "
                f"{proc.stderr.strip().splitlines()[-1:]}"}
    text = subprocess.run([annotate, "--inclusive=yes", str(out)], capture_output=True,
                          text=True, check=True).stdout
    return callgrind_table(parse_callgrind(text), proc.stdout, reads)


def callgrind_table(counts: dict[str, int], once_out: str, reads: int) -> dict[str, object]:
    """readbench --once's lines (which paths ran, which not and why) and the counts."""
    if "empty" not in counts:
        return {"available": False, "reason": "callgrind counted no empty loop"}
    paths: list[dict[str, object]] = []
    for line in once_out.splitlines():
        m = re.match(r"ran path=(\S+) function=run_(\w+)$", line)
        if m and m.group(2) in counts:
            per = (counts[m.group(2)] - counts["empty"]) / reads
            paths.append({"name": m.group(1), "available": True, "insns_per_read": per})
        elif m:
            paths.append({"name": m.group(1), "available": False,
                          "reason": "callgrind counted no such function"})
        m = re.match(r"unavailable path=(\S+) reason=(.*)$", line)
        if m:
            paths.append({"name": m.group(1), "available": False, "reason": m.group(2)})
    return {"available": True, "reads": reads, "empty_loop_per_read": counts["empty"] / reads,
            "paths": paths,
            "note": "user-space instructions only (callgrind): a system call's kernel share "
                    "is not counted; valgrind hides the vDSO"}


def machine() -> dict[str, object]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        clocksource = Path("/sys/devices/system/clocksource/clocksource0/"
                           "current_clocksource").read_text().strip()
    except OSError:
        clocksource = None
    return {"cpu": model, "cpus": os.cpu_count(), "kernel": platform.release(),
            "machine": platform.machine(), "clocksource": clocksource,
            "python": platform.python_version()}


def window_goals(c: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Each cycles.h window read (readbench's window, window-cpu, and the fixed-register
    reads window-fixed, window-cpu-fixed) against the bare instruction, in ns here (exact
    instruction counts: the arm64 guest, 45-bench-icount)."""
    by = {p["name"]: p for p in c}
    bare = by.get("bare")
    out: list[dict[str, object]] = []
    for name in ("window", "window-cpu", "window-fixed", "window-cpu-fixed"):
        goal: dict[str, object] = {"goal": f"C {name} read <= {GOAL_WINDOW_RATIO} x bare "
                                           "(ns)", "bound": GOAL_WINDOW_RATIO}
        path = by.get(name)
        if path is None or bare is None or not path["available"] or not bare["available"]:
            why = next((p["reason"] for p in (path, bare) if p is not None and
                        not p["available"]), "no figure")
            out.append(goal | {"status": "not measurable here", "reason": why})
            continue
        figure = _num(path["median"]) / _num(bare["median"]) if _num(bare["median"]) else None
        if figure is None:
            out.append(goal | {"status": "not measurable here", "reason": "bare read 0 ns"})
            continue
        out.append(goal | {"figure": figure,
                           "status": "met" if figure <= GOAL_WINDOW_RATIO else "not met"})
    return out


def goals(python: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """The Python goal read against the figures: met, not met, or not measurable here."""
    by = {p["name"]: p for p in python}
    read, clock = by.get("simple_pmu.read"), by.get("time.perf_counter_ns")
    goal: dict[str, object] = {"goal": "simple_pmu read <= 1.5 x time.perf_counter_ns()",
                               "bound": GOAL_PYTHON_RATIO}
    if read is None or clock is None or not read["available"] or not clock["available"]:
        why = read["reason"] if read is not None and not read["available"] else "no figure"
        return [goal | {"status": "not measurable here", "reason": why}]
    figure = _num(read["median"]) / _num(clock["median"])
    return [goal | {"figure": figure,
                    "status": "met" if figure <= GOAL_PYTHON_RATIO else "not met"}]


def document(c_doc: dict[str, object], py_doc: dict[str, object],
             callgrind: dict[str, object], mhz: dict[str, object]) -> dict[str, object]:
    c_paths = summarize(parse_readbench(c_doc), "ns")
    py_paths = summarize(python_paths(py_doc), "ns")
    return {"schema": SCHEMA, "machine": machine(),
            "c": {"runs": c_doc.get("runs"), "cpu": c_doc.get("cpu"), "paths": c_paths},
            "python": {"calls": py_doc.get("calls"), "repeats": py_doc.get("repeats"),
                       "paths": py_paths},
            "callgrind": callgrind, "mhz": mhz,
            "goals": goals(py_paths) + window_goals(c_paths)}


def report(doc: dict[str, object]) -> list[str]:
    """The whole document as text: the tables, callgrind's figures and the goals."""
    m = doc["machine"]
    assert isinstance(m, dict)
    c, py, cg = doc["c"], doc["python"], doc["callgrind"]
    assert isinstance(c, dict) and isinstance(py, dict) and isinstance(cg, dict)
    lines = [f"{m['cpu']} ({m['cpus']} CPUs), Linux {m['kernel']}, clocksource "
             f"{m['clocksource']}, Python {m['python']}", ""]
    lines += table(f"C read paths (bench/readbench.c, {c['runs']} runs, loop subtracted)",
                   c["paths"], "ns")
    lines += [""] + table(f"Python read paths ({py['repeats']} x {py['calls']} calls, "
                          "loop included)", py["paths"], "ns")
    lines.append("")
    if cg.get("available"):
        lines.append(f"Instructions per read, callgrind ({cg['reads']} reads; {cg['note']})")
        for p in cg["paths"]:
            lines.append(f"  {p['name']:<14} {p['insns_per_read']:.2f}" if p["available"]
                         else f"  {p['name']:<14} unavailable: {p['reason']}")
    else:
        lines.append(f"Instructions per read (callgrind): not measured: {cg['reason']}")
    lines.append("")
    mhz = doc["mhz"]
    assert isinstance(mhz, dict)
    lines += benchmhz.report(mhz) + [""]
    for g in doc["goals"]:  # type: ignore[attr-defined]
        fig = f" ({g['figure']:.2f})" if "figure" in g else f" ({g.get('reason')})"
        lines.append(f"goal {g['goal']}: {g['status']}{fig}")
    return lines


def _rows(doc: dict[str, object], available: bool) -> list[tuple[str, dict[str, object]]]:
    c, py = doc["c"], doc["python"]
    assert isinstance(c, dict) and isinstance(py, dict)
    rows = [(f"C: {p['name']}", p) for p in c["paths"]] + \
           [(f"Python: {p['name']}", p) for p in py["paths"]]
    return [(label, p) for label, p in rows if bool(p["available"]) == available]


def plot_rows(doc: dict[str, object]) -> tuple[list[str], list[str]]:
    """The plot's bars (paths that ran) and the paths named as not available."""
    return [lbl for lbl, _ in _rows(doc, True)], [lbl for lbl, _ in _rows(doc, False)]


def plot(doc: dict[str, object], out: Path) -> Path:
    """A horizontal bar chart of the C and Python paths' medians (log scale), IQR as
    error bars; unavailable paths named at the bottom. Written from the JSON alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = doc["machine"]
    assert isinstance(m, dict)
    ran = _rows(doc, True)
    missing = [label for label, _ in _rows(doc, False)]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(ran) + 2.2))
    ys = range(len(ran))
    med = [_num(p["median"]) for _, p in ran]
    err = [[max(0.0, _num(p["median"]) - _num(p["q1"])) for _, p in ran],
           [max(0.0, _num(p["q3"]) - _num(p["median"])) for _, p in ran]]
    ax.barh(list(ys), med, xerr=err, color=["#4477aa" if lbl.startswith("C") else "#cc6677"
                                            for lbl, _ in ran])
    ax.set_yticks(list(ys), [lbl for lbl, _ in ran])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ns per read (median, IQR bars; log scale)")
    for y, v in zip(ys, med, strict=True):
        ax.text(v, y, f" {v:.1f}", va="center", fontsize=8)
    ax.set_title(f"Cost of one read: {m['cpu']}, Linux {m['kernel']}", fontsize=10)
    if missing:
        fig.text(0.01, 0.01, "not available here: " + ", ".join(missing), fontsize=7,
                 wrap=True)
    fig.tight_layout(rect=(0, 0.05 if missing else 0, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    # No timestamps in the file: the same JSON gives the same PNG.
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return out


def run(runs: int = 11, calls: int = 200_000, repeats: int = 7, json_out: Path = JSON_OUT,
        plot_out: Path | None = PLOT_OUT) -> list[str]:
    """Build and run everything; write the JSON (and the plot); the report's lines."""
    exe = compile_readbench()
    c_doc = run_readbench(exe, runs)
    userlib = build_userlib()
    py_doc = run_python_bench(userlib, calls, repeats)
    doc = document(c_doc, py_doc, callgrind_insns(exe, c_doc),
                   benchmhz.measure(OUT_DIR / "mhz", userlib))
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(doc, indent=1) + "\n")
    lines = report(doc) + ["", f"JSON: {json_out}"]
    if plot_out is not None:
        lines.append(f"plot: {plot(doc, plot_out)}")
    return lines
