"""The steps of `invoke test-hw` on real Intel hardware (pmubuild.hwtest runs them).

The same checks the arm64 in-guest suite makes (tests/guest/arm64), on the x86 driver's
sysfs contract (notes/x86-abi.md): load, sysfs, counters advance on every CPU, a known
loop counted to the instruction, cycles against the TSC, two processes on one CPU, perf
beside the driver, CPU hotplug, unload. Programs: tests/hw/src/*.c, built with the
project's include/cycles.h. Only the pure helpers here (parsers, index rules) are tested
without hardware; every step itself has run only where someone ran test-hw by hand.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from .errors import PipelineError
from .hwtest import Record
from .progress import say

REPO = Path(__file__).resolve().parents[1]
HW_SRC = REPO / "tests" / "hw" / "src"
SYSFS = Path("/sys/devices/system/simple-pmu/simple-pmu0")
CPU_SYSFS = Path("/sys/devices/system/cpu")

# The sysfs contract (notes/x86-abi.md): top-level and per-CPU attributes.
TOP_ATTRS = ("generation", "cpus", "recheck_ms", "events", "ring", "rdpmc_fixed",
             "pmu_version", "num_gp", "gp_width", "num_fixed", "fixed_width", "fixed_mask",
             "events_unavailable", "rdpmc_always")
CPU_ATTRS = ("cycle_index", "event_index", "generation", "interventions", "kvm_deferrals",
             "checks", "user_access", "conflicts")
RDPMC_FIXED = 1 << 30
INSN_EVENT = 0xC0  # INST_RETIRED.ANY in perf's x86 raw encoding

# The known loop: iterations, runs (the smallest count is judged: an interrupt or page
# fault can only add), and the bound on what insn_retired() itself and the call retire
# between the two RDPMCs (the "read overhead"); the difference between two loop lengths
# must be exact.
LOOP_SHORT, LOOP_LONG, LOOP_RUNS = 1_000, 1_000_000, 7
READ_OVERHEAD_MAX = 200
# Core cycles against TSC ticks around a long loop: turbo and power saving keep the ratio
# near 0.3..5 on every Intel part; outside 0.2..10 one of the two is not counting cycles.
TSC_LOOP = 50_000_000
TSC_RATIO_BAND = (0.2, 10.0)
ALT_ROUNDS = 20_000
# perf stat of the same program with and without the module: user-space instructions
# of a static binary barely vary; allow 0.1% plus 2000.
PERF_LOOP = 10_000_000
PERF_RUNS = 3
PERF_REL_TOL, PERF_ABS_TOL = 0.001, 2000
PERF_CONCURRENT_S = 2
HOTPLUG_WAIT_S = 2.0


# --- pure helpers (unit-tested) --------------------------------------------------------

def parse_cpulist(text: str) -> list[int]:
    """'0-3,5' -> [0, 1, 2, 3, 5]; '' -> []."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def index_problem(idx: int, num_gp: int, fixed_mask: int) -> str | None:
    """Why idx is not an RDPMC operand of a counter this CPU has (None if it is)."""
    if idx < 0:
        return f"{idx}: neither a general counter nor a fixed one (not placed)"
    if idx & RDPMC_FIXED:
        n = idx & ~RDPMC_FIXED
        return None if 0 <= n < 32 and fixed_mask >> n & 1 else \
            f"{idx} names fixed counter {n}, which fixed_mask {fixed_mask:#x} lacks"
    if 0 <= idx < num_gp:
        return None
    return f"{idx} is neither a general counter (0..{num_gp - 1}) nor a fixed one"


# Where perf may put each event (arch/x86/events/intel/core.c's fixed constraints; the
# driver's drivers/x86/plan.h): core cycles on fixed 1 or a general counter, instructions
# on fixed 0 or a general one, reference cycles (0x0300, event code 0) on fixed 2 only.
EVENT_FIXED = {0x3C: 1, 0xC0: 0, 0x300: 2}
FIXED_ONLY = {0x300}


def placement_problem(event: int, idx: int) -> str | None:
    """Why perf could not have put `event` at RDPMC index `idx` (None if it could)."""
    if idx < 0 or event not in EVENT_FIXED:
        return None  # unplaced (index_problem says so) or not an event the driver takes
    if idx & RDPMC_FIXED:
        n = idx & ~RDPMC_FIXED
        return None if n == EVENT_FIXED[event] else \
            f"event {event:#x} at fixed counter {n}, where only {EVENT_FIXED[event]} counts it"
    return f"event {event:#x} at general counter {idx}, but it is fixed-only" \
        if event in FIXED_ONLY else None


def parse_fields(line: str) -> dict[str, str]:
    """'a=1 b=x' -> {'a': '1', 'b': 'x'}."""
    return dict(p.split("=", 1) for p in line.split() if "=" in p)


def parse_perf_csv(text: str) -> dict[str, int | None]:
    """perf stat -x, output -> {event: count}, None for <not counted>/<not supported>.
    Hybrid parts print cpu_core/instructions:u/ and cpu_atom/...: summed under the
    bare name (instructions:u)."""
    counts: dict[str, int | None] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        cols = line.split(",")
        if len(cols) < 3 or not cols[2]:
            continue
        event = cols[2]
        if "/" in event:  # cpu_core/instructions:u/
            event = event.strip("/").split("/", 1)[-1]
        try:
            value: int | None = int(cols[0])
        except ValueError:
            value = None
        old = counts.get(event, 0)
        counts[event] = None if value is None or old is None else old + value
    return counts


@dataclass(frozen=True)
class LoopLayout:
    head: int  # instructions before the loop body, run once
    body: int  # per iteration
    tail: int  # after the loop, run once

    def count(self, n: int) -> int:
        return self.head + self.body * n + self.tail


def objdump_addresses(binary: Path, start: int, stop: int) -> list[int]:
    """Addresses of the instructions objdump decodes in [start, stop)."""
    proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
                           f"--stop-address={stop}", str(binary)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise PipelineError(f"objdump of {binary} failed: {proc.stderr.strip()}")
    addrs = []
    for line in proc.stdout.splitlines():
        head, sep, insn = line.partition(":\t")
        if sep and insn.strip() and head.strip():
            try:
                addrs.append(int(head.strip(), 16))
            except ValueError:
                continue
    return addrs


def loop_layout(binary: Path) -> LoopLayout:
    """hw_loop's instruction counts, read from the built binary: its symbols (hw_loop,
    with its .size; hw_loop_body; hw_loop_end) and objdump's decoding between them."""
    with open(binary, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            raise PipelineError(f"{binary}: no symbol table")
        sym = {}
        for name in ("hw_loop", "hw_loop_body", "hw_loop_end"):
            found = symtab.get_symbol_by_name(name)
            if not found:
                raise PipelineError(f"{binary}: no symbol {name}")
            sym[name] = found[0]
    start = sym["hw_loop"]["st_value"]
    end = start + sym["hw_loop"]["st_size"]
    body, body_end = sym["hw_loop_body"]["st_value"], sym["hw_loop_end"]["st_value"]
    addrs = objdump_addresses(binary, start, end)
    return LoopLayout(sum(a < body for a in addrs), sum(body <= a < body_end for a in addrs),
                      sum(a >= body_end for a in addrs))


# --- programs and CPUID ----------------------------------------------------------------

def compile_programs(out: Path) -> dict[str, Path]:
    """tests/hw/src/*.c, static, with include/cycles.h: {name: binary}."""
    if not shutil.which("gcc"):
        raise PipelineError("gcc not found: the test's programs need it (apt install gcc)")
    out.mkdir(parents=True, exist_ok=True)
    progs = {}
    for src in sorted(HW_SRC.glob("*.c")):
        exe = out / src.stem
        proc = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-static",
                               "-I", str(REPO / "include"), "-I", str(HW_SRC), "-o", str(exe),
                               str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise PipelineError(f"compiling {src.name} failed:\n{proc.stderr}")
        progs[src.stem] = exe
    return progs


@dataclass(frozen=True)
class Cpuid:
    vendor: str
    family_model_stepping: tuple[int, int, int]
    hypervisor: bool
    hybrid: bool
    leaf_a: tuple[int, int, int, int]

    @property
    def version(self) -> int:
        return self.leaf_a[0] & 0xFF

    @property
    def num_fixed(self) -> int:
        return self.leaf_a[3] & 0x1F if self.version >= 2 else 0

    def fixed_exists(self, i: int) -> bool:
        """Version 5: ECX bitmap; from version 2: the first EDX[4:0] counters."""
        return self.version >= 2 and bool(self.leaf_a[2] >> i & 1 or self.num_fixed > i)

    @property
    def problem(self) -> str | None:
        if self.version < 2:
            return (f"CPUID leaf 0xA reports architectural perfmon version {self.version}: "
                    "fixed counters need version 2 or later")
        missing = [n for i, n in ((0, "0 (instructions)"), (1, "1 (core cycles)"))
                   if not self.fixed_exists(i)]
        if missing:
            return f"CPUID leaf 0xA lists no fixed counter {' or '.join(missing)}"
        return None

    def facts(self) -> dict[str, object]:
        f, m, s = self.family_model_stepping
        return {"cpuid_vendor": self.vendor, "cpuid_family_model_stepping": [f, m, s],
                "perfmon_version": self.version, "num_fixed": self.num_fixed,
                "cpuid_leaf_0xa": [f"{r:#010x}" for r in self.leaf_a],
                "cpuid_hypervisor": self.hypervisor, "cpuid_hybrid": self.hybrid}


def parse_cpuid(text: str) -> Cpuid:
    kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    eax = int(kv["leaf1_eax"], 0)
    family = (eax >> 8) & 0xF
    model = (eax >> 4) & 0xF
    if family in (6, 15):
        model |= (eax >> 12) & 0xF0
    if family == 15:
        family += (eax >> 20) & 0xFF
    regs = tuple(int(x, 0) for x in kv["leafa"].split())
    assert len(regs) == 4
    return Cpuid(kv["vendor"], (family, model, eax & 0xF), kv["hypervisor"] == "1",
                 kv["hybrid"] == "1", (regs[0], regs[1], regs[2], regs[3]))


def cpuid_facts(progs: dict[str, Path]) -> Cpuid:
    return parse_cpuid(subprocess.run([str(progs["hwcpuid"])], capture_output=True, text=True,
                                      check=True).stdout)


# --- the steps -------------------------------------------------------------------------

@dataclass
class Context:
    progs: dict[str, Path]
    event_source: Path
    pmus: tuple[str, ...]
    rdpmc_original: dict[str, str | None]
    cpuid: Cpuid
    perf_without: int | None = None  # perf stat instructions:u of the loop, no module
    notes: list[str] = field(default_factory=list)


def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def _attr(name: str) -> str:
    return (SYSFS / name).read_text().strip()


def _cpu_attr(cpu: int, name: str) -> str:
    return (SYSFS / f"cpu{cpu}" / name).read_text().strip()


def online_cpus() -> list[int]:
    return parse_cpulist((CPU_SYSFS / "online").read_text())


def step_sysfs(ctx: Context) -> Record:
    missing = [a for a in TOP_ATTRS if not (SYSFS / a).is_file()]
    cpus = online_cpus()
    missing += [f"cpu{c}/{a}" for c in cpus for a in CPU_ATTRS
                if not (SYSFS / f"cpu{c}" / a).is_file()]
    if missing:
        return Record("sysfs", "fail", f"missing: {' '.join(missing)}")
    problems = []
    published = parse_cpulist(_attr("cpus"))
    if not published:
        problems.append("cpus is empty")
    elif published != cpus:
        problems.append(f"cpus {_attr('cpus')}, online {cpus}")
    events = [int(e, 16) for e in _attr("events").split(",") if e]
    if INSN_EVENT not in events:
        problems.append(f"events '{_attr('events')}' lacks 0xc0")
    # On hybrid parts leaf 0xA (num_gp) gives only what both core types share; a P-core
    # has more general counters, up to the architectural 32.
    hybrid = (SYSFS / "hybrid").exists() and _attr("hybrid") == "1"
    num_gp = 32 if hybrid else int(_attr("num_gp"))
    fixed_mask = int(_attr("fixed_mask"), 0)
    for name, want in (("ring", "2"), ("rdpmc_fixed", "1"), ("rdpmc_always", "1"),
                       ("pmu_version", str(ctx.cpuid.version))):
        if _attr(name) != want:
            problems.append(f"{name} {_attr(name)}, want {want}")
    for c in cpus:
        idx = [int(_cpu_attr(c, "cycle_index"))]
        ev = [int(x) for x in _cpu_attr(c, "event_index").split()]
        if len(ev) != len(events):
            problems.append(f"cpu{c}: {len(ev)} event_index entries for {len(events)} events")
        for i in idx + ev:
            if (p := index_problem(i, num_gp, fixed_mask)) is not None:
                problems.append(f"cpu{c}: {p}")
        for e, i in zip([0x3C, *events], idx + ev, strict=False):
            if (p := placement_problem(e, i)) is not None:
                problems.append(f"cpu{c}: {p}")
        placed = [i for i in idx + ev if i >= 0]
        if len(set(placed)) != len(placed):
            problems.append(f"cpu{c}: two events at one counter: {idx + ev}")
        if _cpu_attr(c, "user_access") != "1":
            problems.append(f"cpu{c}: user_access {_cpu_attr(c, 'user_access')}")
    measured: dict[str, object] = {a: _attr(a) for a in TOP_ATTRS}
    measured["cpu0"] = {a: _cpu_attr(cpus[0], a) for a in CPU_ATTRS}
    expected = {"ring": 2, "rdpmc_fixed": 1, "rdpmc_always": 1, "cpus": cpus,
                "pmu_version": ctx.cpuid.version}
    if problems:
        return Record("sysfs", "fail", "; ".join(problems), measured, expected)
    return Record("sysfs", "pass", "", measured, expected)


def _hwread(ctx: Context, cpu: int) -> dict[str, str]:
    proc = _run([str(ctx.progs["hwread"]), str(cpu)])
    out = proc.stdout.strip().splitlines()
    return parse_fields(out[-1]) if out else {"result": f"no output, rc {proc.returncode}"}


def read_all(ctx: Context, cpus: list[int]) -> dict[int, dict[str, str]]:
    """hwread on each CPU; one retry where the generation changed meanwhile."""
    results = {}
    for c in cpus:
        r = _hwread(ctx, c)
        if r.get("result") == "generation":
            r = _hwread(ctx, c)
        results[c] = r
    return results


def step_advance(ctx: Context) -> Record:
    cpus = online_cpus()
    results = read_all(ctx, cpus)
    bad = {c: r.get("result") for c, r in results.items() if r.get("result") != "ok"}
    measured: dict[str, object] = {f"cpu{c}": {k: r.get(k) for k in ("cycles", "insns", "ref")}
                                   for c, r in results.items()}
    if bad:
        return Record("advance", "fail", "not advancing or not readable on "
                      + ", ".join(f"cpu{c}: {v}" for c, v in bad.items()), measured)
    return Record("advance", "pass", "", measured, {"result": "ok on every online CPU"})


def _loop_runs(ctx: Context, cpu: int, n: int, runs: int) -> list[dict[str, str]]:
    proc = _run([str(ctx.progs["hwloop"]), "measure", str(cpu), str(n), str(runs)])
    lines = [parse_fields(x) for x in proc.stdout.splitlines()]
    if proc.returncode != 0 or not lines or "insns" not in lines[0]:
        raise PipelineError(f"hwloop measure {cpu} {n}: rc {proc.returncode}, "
                            f"{proc.stdout.strip()} {proc.stderr.strip()}")
    return [x for x in lines if x.get("gen") == "same"]


def step_known_loop(ctx: Context, cpu: int) -> Record:
    layout = loop_layout(ctx.progs["hwloop"])
    short = _loop_runs(ctx, cpu, LOOP_SHORT, LOOP_RUNS)
    long = _loop_runs(ctx, cpu, LOOP_LONG, LOOP_RUNS)
    if not short or not long:
        return Record("known-loop", "fail", "the CPU's generation changed in every run")
    lo_s = min(int(x["insns"]) for x in short)
    lo_l = min(int(x["insns"]) for x in long)
    overhead = lo_s - layout.count(LOOP_SHORT)
    diff_want = layout.body * (LOOP_LONG - LOOP_SHORT)
    measured: dict[str, object] = {
        "cpu": cpu, f"insns_n{LOOP_SHORT}": lo_s, f"insns_n{LOOP_LONG}": lo_l,
        "read_overhead": overhead, "difference": lo_l - lo_s,
        "layout": {"head": layout.head, "body": layout.body, "tail": layout.tail}}
    expected: dict[str, object] = {
        f"insns_n{LOOP_SHORT}": f"{layout.count(LOOP_SHORT)} + overhead",
        "read_overhead": f"0..{READ_OVERHEAD_MAX}", "difference": diff_want,
        "tolerance": f"difference exact (smallest of {LOOP_RUNS} runs)"}
    problems = []
    if lo_l - lo_s != diff_want:
        problems.append(f"{LOOP_LONG - LOOP_SHORT} more iterations of a {layout.body}-"
                        f"instruction body retired {lo_l - lo_s}, want {diff_want}")
    if not 0 <= overhead <= READ_OVERHEAD_MAX:
        problems.append(f"read overhead {overhead}, want 0..{READ_OVERHEAD_MAX}")
    return Record("known-loop", "fail" if problems else "pass", "; ".join(problems),
                  measured, expected)


def step_cycles_tsc(ctx: Context, cpu: int) -> Record:
    runs = _loop_runs(ctx, cpu, TSC_LOOP, 3)
    if not runs:
        return Record("cycles-vs-tsc", "fail", "the CPU's generation changed in every run")
    ratios = sorted(int(x["cycles"]) / int(x["tsc"]) for x in runs)
    ratio = ratios[len(ratios) // 2]
    ipc = int(runs[0]["insns"]) / max(1, int(runs[0]["cycles"]))
    lo, hi = TSC_RATIO_BAND
    measured: dict[str, object] = {"cpu": cpu, "ratio": round(ratio, 4),
                                   "ratios": [round(r, 4) for r in ratios],
                                   "ipc": round(ipc, 3), "cycles": runs[0]["cycles"],
                                   "tsc": runs[0]["tsc"]}
    if not lo <= ratio <= hi:
        return Record("cycles-vs-tsc", "fail", f"core cycles / TSC ticks = {ratio:.3f}, "
                      f"want {lo}..{hi}", measured, {"ratio": f"{lo}..{hi}"})
    return Record("cycles-vs-tsc", "pass", "", measured, {"ratio": f"{lo}..{hi}"})


def step_alternate(ctx: Context, cpu: int) -> Record:
    proc = _run([str(ctx.progs["hwalt"]), str(cpu), str(ALT_ROUNDS)], timeout=120)
    out = proc.stdout.strip().splitlines()
    r = parse_fields(out[-1]) if out else {}
    measured: dict[str, object] = {"cpu": cpu, **r}
    if proc.returncode != 0 or r.get("result") != "ok" or int(r.get("checked", "0")) == 0:
        return Record("two-processes", "fail", f"hwalt: rc {proc.returncode}, "
                      f"{' '.join(out) or 'no output'} {proc.stderr.strip()[:300]}",
                      measured)
    return Record("two-processes", "pass", "", measured,
                  {"violations": 0, "rounds": ALT_ROUNDS})


def _perf_loop(ctx: Context) -> tuple[int | None, str]:
    """perf stat instructions:u of hwloop spin, smallest of PERF_RUNS; (count, error)."""
    values = []
    for _ in range(PERF_RUNS):
        proc = _run(["perf", "stat", "-x,", "-e", "instructions:u", "--",
                     str(ctx.progs["hwloop"]), "spin", str(PERF_LOOP)])
        v = parse_perf_csv(proc.stderr).get("instructions:u")
        if proc.returncode != 0 or v is None:
            return None, f"perf stat: rc {proc.returncode}: {proc.stderr.strip()[:300]}"
        values.append(v)
    return min(values), ""


def perf_baseline(ctx: Context) -> Record:
    if not shutil.which("perf"):
        return Record("perf-baseline", "skip", "perf not installed (apt install linux-perf)")
    value, err = _perf_loop(ctx)
    if value is None:
        return Record("perf-baseline", "fail", err)
    ctx.perf_without = value
    return Record("perf-baseline", "pass", "", {"instructions_u": value, "loop": PERF_LOOP},
                  {"instructions_u": f">= {loop_layout(ctx.progs['hwloop']).count(PERF_LOOP)}"})


def step_perf_concurrent(ctx: Context) -> Record:
    if not shutil.which("perf"):
        return Record("perf-concurrent", "skip", "perf not installed (apt install linux-perf)")
    cpus = online_cpus()
    perf = subprocess.Popen(["perf", "stat", "-a", "-x,", "-e", "cycles,instructions", "--",
                             "sleep", str(PERF_CONCURRENT_S)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    rounds, bad = 0, {}
    while perf.poll() is None or rounds == 0:
        for c, r in read_all(ctx, cpus).items():
            if r.get("result") != "ok":
                bad[c] = r.get("result")
        rounds += 1
    _, err = perf.communicate(timeout=60)
    counts = parse_perf_csv(err)
    after = {c: r.get("result") for c, r in read_all(ctx, cpus).items()
             if r.get("result") != "ok"}
    measured: dict[str, object] = {"perf": counts, "read_rounds": rounds}
    problems = []
    for ev in ("cycles", "instructions"):
        if not counts.get(ev):
            problems.append(f"perf stat -a {ev}: {counts.get(ev, 'missing')}")
    if bad:
        problems.append("reads failed during perf on " + ", ".join(f"cpu{c}: {v}"
                                                                   for c, v in bad.items()))
    if after:
        problems.append("reads failed after perf on " + ", ".join(f"cpu{c}: {v}"
                                                                  for c, v in after.items()))
    return Record("perf-concurrent", "fail" if problems else "pass", "; ".join(problems),
                  measured, {"perf": "cycles and instructions counted", "reads": "ok"})


def step_perf_known_loop(ctx: Context) -> Record:
    if ctx.perf_without is None:
        return Record("perf-known-loop", "skip", "no perf baseline without the module")
    value, err = _perf_loop(ctx)
    if value is None:
        return Record("perf-known-loop", "fail", err)
    tol = int(ctx.perf_without * PERF_REL_TOL) + PERF_ABS_TOL
    measured: dict[str, object] = {"with_module": value, "without_module": ctx.perf_without,
                                   "difference": value - ctx.perf_without}
    expected: dict[str, object] = {"difference": f"within +-{tol}"}
    if abs(value - ctx.perf_without) > tol:
        return Record("perf-known-loop", "fail", f"perf stat instructions:u {value} with "
                      f"the module, {ctx.perf_without} without (tolerance {tol})",
                      measured, expected)
    return Record("perf-known-loop", "pass", "", measured, expected)


def hotplug_cpu() -> int | None:
    """The highest online CPU other than 0 that can go offline."""
    for c in sorted(online_cpus(), reverse=True):
        if c != 0 and (CPU_SYSFS / f"cpu{c}" / "online").exists():
            return c
    return None


def step_hotplug(ctx: Context) -> Record:
    cpu = hotplug_cpu()
    if cpu is None:
        return Record("cpu-hotplug", "skip", "no CPU other than 0 can go offline here")
    online = CPU_SYSFS / f"cpu{cpu}" / "online"
    g0 = _cpu_attr(cpu, "generation")
    problems = []
    offline_seen: dict[str, object] = {}
    try:
        online.write_text("0")
        offline_seen = {a: _cpu_attr(cpu, a) for a in ("cycle_index", "event_index",
                                                       "user_access")}
        if offline_seen["cycle_index"] != "-1" or \
                set(str(offline_seen["event_index"]).split()) != {"-1"}:
            problems.append(f"offline cpu{cpu} publishes {offline_seen}")
        if offline_seen["user_access"] != "0":
            problems.append(f"offline cpu{cpu} user_access {offline_seen['user_access']}")
        if cpu in parse_cpulist(_attr("cpus")):
            problems.append(f"cpus {_attr('cpus')} lists offline cpu{cpu}")
    finally:
        online.write_text("1")
    deadline = time.monotonic() + HOTPLUG_WAIT_S
    while _cpu_attr(cpu, "user_access") != "1" and time.monotonic() < deadline:
        time.sleep(0.05)
    g1 = _cpu_attr(cpu, "generation")
    if _cpu_attr(cpu, "user_access") != "1":
        problems.append(f"cpu{cpu} user_access still 0 {HOTPLUG_WAIT_S}s after online")
    if g1 == g0:
        problems.append(f"cpu{cpu} generation unchanged ({g0}) across offline/online")
    r = read_all(ctx, [cpu])[cpu]
    if r.get("result") != "ok":
        problems.append(f"read on cpu{cpu} after online: {r.get('result')}")
    measured: dict[str, object] = {"cpu": cpu, "offline": offline_seen,
                                   "generation": [g0, g1], "read_after": r.get("result")}
    expected: dict[str, object] = {"offline": {"cycle_index": "-1", "event_index": "-1 ...",
                                               "user_access": "0"},
                                   "generation": "changes", "read_after": "ok"}
    return Record("cpu-hotplug", "fail" if problems else "pass", "; ".join(problems),
                  measured, expected)


def _guarded(name: str, fn: Callable[[], Record]) -> Record:
    """A step's own error (a missing file, a program that would not run) fails that step,
    not the whole test: the module must still be unloaded and rdpmc put back."""
    say(f"==> {name}")
    try:
        return fn()
    except (OSError, ValueError, KeyError, IndexError, PipelineError,
            subprocess.SubprocessError) as e:
        return Record(name, "fail", f"{type(e).__name__}: {e}")


def loaded_steps(ctx: Context) -> list[Record]:
    cpu = online_cpus()[0]
    return [
        _guarded("sysfs", lambda: step_sysfs(ctx)),
        _guarded("advance", lambda: step_advance(ctx)),
        _guarded("known-loop", lambda: step_known_loop(ctx, cpu)),
        _guarded("cycles-vs-tsc", lambda: step_cycles_tsc(ctx, cpu)),
        _guarded("two-processes", lambda: step_alternate(ctx, cpu)),
        _guarded("perf-concurrent", lambda: step_perf_concurrent(ctx)),
        _guarded("perf-known-loop", lambda: step_perf_known_loop(ctx)),
        _guarded("cpu-hotplug", lambda: step_hotplug(ctx)),
    ]


def unload_record(err: str | None) -> Record:
    if err is not None:
        return Record("unload", "fail", f"rmmod simple-pmu: {err}")
    left = [str(p) for p in (SYSFS, SYSFS.parent) if p.exists()]
    if left:
        return Record("unload", "fail", f"still present after rmmod: {' '.join(left)}")
    return Record("unload", "pass", "", {"sysfs": "gone"})


def rdpmc_restored(ctx: Context) -> Record:
    now = {p: (ctx.event_source / p / "rdpmc").read_text().strip() for p in ctx.pmus
           if ctx.rdpmc_original.get(p) is not None}
    want = {p: v for p, v in ctx.rdpmc_original.items() if v is not None}
    if now != want:
        return Record("rdpmc-restored", "fail", f"rdpmc {now}, before the test {want}",
                      {"rdpmc": now}, {"rdpmc": want})
    return Record("rdpmc-restored", "pass", "", {"rdpmc": now}, {"rdpmc": want})
