"""The steps of `invoke test-hw` on real Intel hardware (pmubuild.hw.run runs them).

The same checks the arm64 in-guest suite makes (tests/guest/arm64), on the x86 driver's
sysfs contract (docs/ABI/sysfs-devices-system-simple-pmu): load, sysfs, counters advance
on every CPU, a known loop counted to the instruction, cycles against the TSC, two
processes on one CPU, perf beside the driver, CPU hotplug, unload. And who may read
(issue 23): loading opens the counters to nobody; a process is let in by mapping
/dev/simple-pmu (root's, 0600, or a group's from a udev rule) while the cpu PMU's rdpmc
is 1, and rdpmc 2 lets everyone in.
Programs: tests/hw/src/*.c, built with the project's include/cycles.h (which lets its
process in by itself), and hwraw, a raw RDPMC reader that lets itself in only when told.
Only the pure helpers here (parsers, index rules, verdicts) are tested without hardware,
and the steps about who may read against a fake driver; every step itself has run only
where someone ran test-hw by hand.
"""

from __future__ import annotations

import grp
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from pmubuild.common.errors import PipelineError
from pmubuild.common.progress import say
from pmubuild.hw import hwtest
from pmubuild.hw.hwtest import Record

REPO = Path(__file__).resolve().parents[2]
HW_SRC = REPO / "tests" / "hw" / "src"
SYSFS = Path("/sys/devices/system/simple-pmu/simple-pmu0")
CPU_SYSFS = Path("/sys/devices/system/cpu")
NODE = Path("/dev/simple-pmu")  # the misc device that lets a process in
MISC_SYSFS = Path("/sys/class/misc/simple-pmu")

# The sysfs contract (docs/ABI/sysfs-devices-system-simple-pmu): top-level and per-CPU attributes.
TOP_ATTRS = ("generation", "cpus", "recheck_ms", "events", "ring", "rdpmc_fixed",
             "pmu_version", "num_gp", "gp_width", "num_fixed", "fixed_width", "fixed_mask",
             "events_unavailable", "rdpmc_always", "access", "members")
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
# Who may read: a user that is not root and not in the node's group (nobody/nogroup on
# Debian); the first of the group ids that /etc/group does not name, given to the node
# for a moment (as a udev rule gives it a group) and to that user as a supplementary
# group; how long `members` and `access` may take to follow (munmap and exit end a
# grant at once; `access` follows rdpmc at each CPU's next check, recheck_ms).
NOBODY = 65534
TEMP_GID = 4242
MEMBERS_WAIT_S = 2.0
ACCESS_WAIT_S = 5.0
HOLDER_WAIT_S = 10.0
# Where a program copied for uid 65534 can run (the build tree may sit in a home
# directory only its owner may enter): the first of these that is not mounted noexec.
EXEC_DIRS = ("/var/tmp", "/tmp")


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


# --- who may read: the raw reader's results (unit-tested) ------------------------------

RAW_OTHER_RESULTS = ("stalled", "generation", "unplaced", "unavailable")


@dataclass(frozen=True)
class RawRead:
    """One read of hwraw (tests/hw/src/hwraw.c), judged. result: ok (its counter
    advanced), sigsegv (it was killed by SIGSEGV at its own RDPMC), one of hwraw's
    RAW_OTHER_RESULTS, or error (anything else: detail says what). map: what its --map
    did: none (not asked), ok, unmapped, or the call that failed and the errno
    (open:EACCES, mmap:EPERM); "?" where it printed none."""

    result: str
    map: str
    delta: int | None = None
    detail: str = ""

    def brief(self) -> str:
        text = f"{self.result} map={self.map}"
        if self.delta is not None:
            text += f" delta={self.delta}"
        return f"{text} ({self.detail})" if self.detail else text


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def judge_raw(returncode: int, stdout: str, stderr: str = "") -> RawRead:
    """hwraw's exit status (negative: killed by that signal, as subprocess gives it) and
    its last read's line, judged. A fault counts only where the kernel's SIGSEGV killed it
    and its handler saw the fault at the RDPMC itself (at_rdpmc=1); a read only where it
    exited 0 saying ok with the counter advanced."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("cpu=")]
    f = parse_fields(lines[-1]) if lines else {}
    mapped = f.get("map", "?")
    result = f.get("result")
    said = lines[-1] if lines else stdout.strip() or "no output"
    if stderr.strip():
        said += f"; stderr: {stderr.strip()[:200]}"
    if returncode == -signal.SIGSEGV:
        if result == "sigsegv" and f.get("at_rdpmc") == "1":
            return RawRead("sigsegv", mapped, detail=f"si_code {f.get('code')}")
        return RawRead("error", mapped, detail=f"SIGSEGV, not at its RDPMC: {said}")
    if returncode < 0:
        return RawRead("error", mapped, detail=f"killed by {_signame(-returncode)}: {said}")
    if result == "sigsegv":
        return RawRead("error", mapped, detail=f"a fault caught, then exit status "
                       f"{returncode}, not death by SIGSEGV: {said}")
    if returncode == 0 and result == "ok":
        try:
            delta = int(f["delta"])
        except (KeyError, ValueError):
            return RawRead("error", mapped, detail=f"ok without a delta: {said}")
        if delta <= 0:
            return RawRead("error", mapped, delta, f"ok, but the counter went {delta}")
        return RawRead("ok", mapped, delta)
    if returncode == 1 and result in RAW_OTHER_RESULTS:
        return RawRead(str(result), mapped, detail=said)
    return RawRead("error", mapped, detail=f"exit status {returncode}: {said}")


def raw_problems(results: dict[int, RawRead], result: str, mapped: str) -> list[str]:
    """What is wrong where each CPU's read should be `result` with map `mapped`."""
    if not results:
        return ["no CPU to read on"]
    return [f"cpu{c}: {r.brief()}, want {result} map={mapped}"
            for c, r in results.items() if r.result != result or r.map != mapped]


def gid_taken(gid: int) -> bool:
    try:
        grp.getgrgid(gid)
    except KeyError:
        return False
    return True


def unused_gid(taken: Callable[[int], bool] | None = None, first: int = TEMP_GID) -> int:
    """The first group id from `first` on that no group is named for."""
    taken = taken or gid_taken
    for gid in range(first, first + 1000):
        if gid != NOBODY and not taken(gid):
            return gid
    raise PipelineError(f"every group id from {first} to {first + 999} is in use")


def exec_dir(candidates: tuple[str, ...] = EXEC_DIRS) -> str:
    """The first of `candidates` that exists and is not mounted noexec."""
    for c in candidates:
        try:
            if not os.statvfs(c).f_flag & os.ST_NOEXEC:
                return c
        except OSError:
            continue
    raise PipelineError(f"nowhere to run a program as uid {NOBODY}: "
                        f"{', '.join(candidates)} missing or mounted noexec")


def rdpmc_unchanged(name: str, what: str, before: dict[str, str | None],
                    after: dict[str, str | None]) -> Record:
    """The cpu PMU's rdpmc across insmod or rmmod (`what`): the module leaves it alone."""
    measured: dict[str, object] = {"before": before, "after": after}
    if before != after:
        return Record(name, "fail", f"{what} changed rdpmc from {before} to {after}",
                      measured, {"after": before})
    return Record(name, "pass", "", measured, {"after": before})


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
    # rdpmc is 1 for the block (hw/run.py): the counters are for members only.
    for name, want in (("ring", "2"), ("rdpmc_fixed", "1"), ("rdpmc_always", "0"),
                       ("access", "members"), ("pmu_version", str(ctx.cpuid.version))):
        if _attr(name) != want:
            problems.append(f"{name} {_attr(name)}, want {want}")
    if not _attr("members").isdigit():
        problems.append(f"members '{_attr('members')}', want a count")
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
    expected = {"ring": 2, "rdpmc_fixed": 1, "rdpmc_always": 0, "access": "members",
                "members": "a count", "cpus": cpus, "pmu_version": ctx.cpuid.version}
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


# --- who may read ----------------------------------------------------------------------

@dataclass(frozen=True)
class Who:
    """A user to run a program as (root runs it; uid, gid, supplementary groups)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()


NOBODY_WHO = Who(NOBODY, NOBODY)


def run_raw(prog: Path, cpu: int, map_node: bool = False, who: Who | None = None) -> RawRead:
    """One read of hwraw on `cpu`, let in first where map_node, as `who` (else root)."""
    argv = [str(prog), *(["--map"] if map_node else []), str(cpu)]
    if who is None:
        proc = _run(argv)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              user=who.uid, group=who.gid, extra_groups=list(who.groups))
    return judge_raw(proc.returncode, proc.stdout, proc.stderr)


def raw_all(prog: Path, cpus: list[int], map_node: bool = False,
            who: Who | None = None) -> dict[int, RawRead]:
    """run_raw on each CPU; one retry where the generation changed meanwhile."""
    results = {}
    for c in cpus:
        r = run_raw(prog, c, map_node, who)
        if r.result == "generation":
            r = run_raw(prog, c, map_node, who)
        results[c] = r
    return results


def _briefs(results: dict[int, RawRead]) -> dict[str, object]:
    return {f"cpu{c}": r.brief() for c, r in results.items()}


def _verdict(name: str, problems: list[str], measured: dict[str, object],
             expected: dict[str, object]) -> Record:
    return Record(name, "fail" if problems else "pass", "; ".join(problems), measured,
                  expected)


def visit_cpus(cpus: list[int]) -> None:
    """Run this process on each CPU in turn: an idle CPU runs its deferrable timers (the
    module's checks, which `access` follows) only when something wakes it."""
    old = os.sched_getaffinity(0)
    try:
        for c in cpus:
            os.sched_setaffinity(0, {c})
    finally:
        os.sched_setaffinity(0, old)


def wait_attr(name: str, want: str, timeout: float,
              poke: Callable[[], None] | None = None) -> tuple[str, float]:
    """Poll the attribute until it reads `want` or `timeout` s passed, calling poke
    between reads: (last value, seconds waited)."""
    start = time.monotonic()
    while True:
        value = _attr(name)
        waited = time.monotonic() - start
        if value == want or waited >= timeout:
            return value, round(waited, 3)
        if poke is not None:
            poke()
        time.sleep(0.02)


class Holder:
    """hwraw --hold on one CPU, let in (--map) or not: a process kept alive between
    commands, so that a step can look at `members` while its mapping lives."""

    def __init__(self, prog: Path, cpu: int, map_node: bool = True,
                 rdwr: bool = False) -> None:
        argv = [str(prog), "--hold", *(["--map"] if map_node else []),
                *(["--rdwr"] if rdwr else []), str(cpu)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self._line()
        self.map = parse_fields(line).get("map", "?") if line.startswith("held ") else \
            f"no answer ({line or 'EOF'})"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def _send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def read(self) -> RawRead:
        """One read; a fault ends the process (its SIGSEGV is waited for and judged)."""
        self._send("read")
        line = self._line()
        result = parse_fields(line).get("result")
        if not line or result == "sigsegv":
            rc = self.proc.wait(timeout=HOLDER_WAIT_S)
        else:
            rc = 0 if result == "ok" else 1
        return judge_raw(rc, line)

    def unmap(self) -> str:
        """munmap its mapping: its answer ("unmapped rc=0")."""
        self._send("unmap")
        return self._line()

    def protect(self) -> str:
        """mprotect its mapping read-write: its answer ("protect rc=-1 errno=EACCES")."""
        self._send("protect")
        return self._line()

    def child(self, exec_: bool) -> RawRead:
        """A child it forks reads once, after executing hwraw anew where exec_: judged
        from the child's line and how it ended (the holder lives on)."""
        self._send("fork-exec" if exec_ else "fork")
        line = self._line()
        status = self._line()
        how = parse_fields(status).get("status", "")
        kind, _, num = how.partition(":")
        if kind not in ("exit", "signal") or not num.isdigit():
            return RawRead("error", parse_fields(line).get("map", "?"),
                           detail=f"no child status: {status or 'EOF'}; {line}")
        return judge_raw(int(num) if kind == "exit" else -int(num), line)

    def close(self) -> int:
        """EOF on its stdin: it exits, its mapping with it. Its exit status."""
        if self.proc.stdin is not None:
            with suppress(OSError):
                self.proc.stdin.close()
        try:
            status = self.proc.wait(timeout=HOLDER_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return status

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def public_copy(prog: Path) -> Iterator[Path]:
    """prog copied where any user may run it (the build tree may sit in a home directory
    only its owner can enter), removed after."""
    d = Path(tempfile.mkdtemp(prefix="simple-pmu-hw-", dir=exec_dir()))
    try:
        d.chmod(0o755)
        dst = d / prog.name
        shutil.copyfile(prog, dst)
        dst.chmod(0o755)
        yield dst
    finally:
        shutil.rmtree(d, ignore_errors=True)


def node_access(path: Path, gid: int, mode: int) -> None:
    """Give the node group `gid` and `mode`, taking away first what the old and the new
    mode do not both grant: at no moment may a group open it that neither state lets."""
    os.chmod(path, stat.S_IMODE(os.stat(path).st_mode) & mode)
    os.chown(path, -1, gid)
    os.chmod(path, mode)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def step_node(ctx: Context) -> Record:
    """/dev/simple-pmu: a character device, root's, that others may not open (the kernel
    makes it 0600; the package's udev rule gives it a group, 0660)."""
    try:
        st = os.stat(NODE)
    except FileNotFoundError:
        return Record("node", "fail", f"no {NODE} after load (no devtmpfs, or udev did "
                      "not create it)")
    mode = stat.S_IMODE(st.st_mode)
    measured: dict[str, object] = {"mode": f"{mode:04o}", "uid": st.st_uid,
                                   "group": _group_name(st.st_gid)}
    problems = []
    if not stat.S_ISCHR(st.st_mode):
        problems.append(f"{NODE} is not a character device")
    if st.st_uid != 0:
        problems.append(f"{NODE} belongs to uid {st.st_uid}, not root")
    if mode & 0o007:
        problems.append(f"{NODE} has mode {mode:04o}: every local user may open it and be "
                        "let in (a local udev rule?)")
    dev = MISC_SYSFS / "dev"
    if dev.is_file():
        want = dev.read_text().strip()
        got = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        measured["dev"] = got
        if got != want:
            problems.append(f"{NODE} is device {got}, the module's is {want} ({dev})")
    return _verdict("node", problems, measured, {
        "type": "character device", "uid": 0,
        "mode": "0600, or 0660 with a udev rule's group; nothing for others"})


def step_non_member(ctx: Context) -> Record:
    """A raw reader run as root that does not map the node faults on every CPU."""
    results = raw_all(ctx.progs["hwraw"], online_cpus())
    return _verdict("non-member-faults", raw_problems(results, "sigsegv", "none"),
                    _briefs(results), {"every online CPU": "sigsegv map=none"})


def step_member(ctx: Context) -> Record:
    """The same raw reader, after mapping the node itself, reads on every CPU."""
    results = raw_all(ctx.progs["hwraw"], online_cpus(), map_node=True)
    return _verdict("member-reads", raw_problems(results, "ok", "ok"), _briefs(results),
                    {"every online CPU": "ok map=ok (the cycle counter advanced)"})


def step_members(ctx: Context) -> Record:
    """`members` counts a mapping while it lives, which pins the module (rmmod refused);
    munmap ends the grant (the holder's next read faults) and the count; so does exit."""
    cpu = online_cpus()[0]
    prog = ctx.progs["hwraw"]
    base = int(_attr("members"))
    measured: dict[str, object] = {"cpu": cpu, "before": base}
    expected: dict[str, object] = {
        "while_mapped": base + 1, "read_while_mapped": "ok", "rmmod_while_mapped": "refused",
        "unmap": "unmapped rc=0", "after_munmap": base, "read_after_munmap": "sigsegv",
        "while_mapped_2": base + 1,
        "exit_status": 0, "after_exit": base}
    problems: list[str] = []

    def want_members(key: str, want: int) -> None:
        got, waited = wait_attr("members", str(want), MEMBERS_WAIT_S)
        measured[key] = got
        measured[f"{key}_s"] = waited
        if got != str(want):
            problems.append(f"members {got} {key.replace('_', ' ')}, want {want}")

    with Holder(prog, cpu) as h:
        measured["map"] = h.map
        if h.map != "ok":
            return Record("members", "fail", f"hwraw --hold --map on cpu{cpu}: map={h.map}",
                          measured, expected)
        want_members("while_mapped", base + 1)
        r = h.read()
        measured["read_while_mapped"] = r.brief()
        if r.result != "ok":
            problems.append(f"read while mapped: {r.brief()}")
        err = hwtest.rmmod()
        measured["rmmod_while_mapped"] = "unloaded" if err is None else err
        if err is None or not hwtest.module_loaded():
            problems.append("rmmod succeeded while a let-in process lived: the mapping "
                            "does not pin the module")
            return _verdict("members", problems, measured, expected)
        measured["unmap"] = answer = h.unmap()
        if answer != "unmapped rc=0":
            problems.append(f"the holder's munmap: {answer or 'no answer'}")
        want_members("after_munmap", base)
        r = h.read()
        measured["read_after_munmap"] = r.brief()
        if r.result != "sigsegv":
            problems.append(f"read after munmap: {r.brief()}, want sigsegv (munmap ends "
                            "the grant)")
    with Holder(prog, cpu) as h:
        measured["map_2"] = h.map
        want_members("while_mapped_2", base + 1)
        status = h.close()
        measured["exit_status"] = status
        if status != 0:
            problems.append(f"the second holder exited with status {status}")
        want_members("after_exit", base)
    return _verdict("members", problems, measured, expected)


def step_member_fork(ctx: Context) -> Record:
    """A let-in process cannot make its mapping writable (mprotect: EACCES, the module
    clears VM_MAYWRITE; the node is opened O_RDWR, so the file mode does not); a child
    it forks gets no mapping but keeps RDPMC, as a perf mapper's child does
    (simple-pmu(4)), until it executes another program: then it faults. The holder
    reads on."""
    cpu = online_cpus()[0]
    expected: dict[str, object] = {
        "protect": "protect rc=-1 errno=EACCES", "child": "ok map=inherited",
        "child_exec": "sigsegv map=none", "holder_after": "ok map=ok"}
    measured: dict[str, object] = {"cpu": cpu}
    problems: list[str] = []
    with Holder(ctx.progs["hwraw"], cpu, rdwr=True) as h:
        measured["map"] = h.map
        if h.map != "ok":
            return Record("member-fork", "fail", f"hwraw --hold --map on cpu{cpu}: "
                          f"map={h.map}", measured, expected)
        measured["protect"] = answer = h.protect()
        if answer != expected["protect"]:
            problems.append(f"mprotect read-write: {answer or 'no answer'}, want "
                            "rc=-1 errno=EACCES (the mapping must never become writable)")
        for key, exec_, want, why in (
                ("child", False, ("ok", "inherited"), "the documented inheritance"),
                ("child_exec", True, ("sigsegv", "none"), "execve must end the grant")):
            r = h.child(exec_)
            measured[key] = r.brief()
            if (r.result, r.map) != want:
                problems.append(f"{key.replace('_', ' ')}: {r.brief()}, want "
                                f"{want[0]} map={want[1]} ({why})")
        r = h.read()
        measured["holder_after"] = r.brief()
        if (r.result, r.map) != ("ok", "ok"):
            problems.append(f"the holder after its children: {r.brief()}")
    return _verdict("member-fork", problems, measured, expected)


def step_other_user(ctx: Context) -> Record:
    """uid 65534 may not open the node (EACCES) and its raw reads fault; given a group
    the node is given for a moment (0660, as a udev rule does), it maps and reads. The
    node's group and mode are put back, also when something fails."""
    cpus = online_cpus()
    st = os.stat(NODE)
    mode = stat.S_IMODE(st.st_mode)
    measured: dict[str, object] = {"node": f"{_group_name(st.st_gid)} {mode:04o}"}
    problems: list[str] = []
    with public_copy(ctx.progs["hwraw"]) as prog:
        refused = raw_all(prog, cpus, map_node=True, who=NOBODY_WHO)
        measured["not_let_in"] = _briefs(refused)
        problems += [f"uid {NOBODY} not in the node's group: {p}"
                     for p in raw_problems(refused, "sigsegv", "open:EACCES")]
        gid = unused_gid()
        measured["group"] = gid
        try:
            node_access(NODE, gid, 0o660)
            let_in = raw_all(prog, cpus, map_node=True, who=Who(NOBODY, NOBODY, (gid,)))
        finally:
            node_access(NODE, st.st_gid, mode)
    measured["in_group"] = _briefs(let_in)
    problems += [f"uid {NOBODY} in group {gid}: {p}"
                 for p in raw_problems(let_in, "ok", "ok")]
    after = os.stat(NODE)
    measured["node_after"] = f"{_group_name(after.st_gid)} {stat.S_IMODE(after.st_mode):04o}"
    if (after.st_gid, stat.S_IMODE(after.st_mode)) != (st.st_gid, mode):
        problems.append(f"{NODE} not put back: {measured['node_after']}, was "
                        f"{measured['node']}")
    return _verdict("other-user", problems, measured, {
        "not_let_in": "sigsegv map=open:EACCES on every CPU",
        "in_group": "ok map=ok on every CPU", "node_after": measured["node"]})


def _rdpmc_known(ctx: Context) -> bool:
    return any(v is not None for v in ctx.rdpmc_original.values())


def step_rdpmc_never(ctx: Context) -> Record:
    """With rdpmc 0 nobody may RDPMC: the node's mmap fails EPERM (nobody is counted)
    and the read faults. rdpmc is put back after, also when something fails."""
    if not _rdpmc_known(ctx):
        return Record("rdpmc-0", "skip", "no cpu PMU's rdpmc attribute could be read")
    cpus = online_cpus()
    base = _attr("members")
    before = hwtest.read_rdpmc(ctx.event_source, ctx.pmus)
    with hwtest.rdpmc_set(ctx.event_source, ctx.pmus, hwtest.RDPMC_NEVER, before):
        during = hwtest.read_rdpmc(ctx.event_source, ctx.pmus)
        results = raw_all(ctx.progs["hwraw"], cpus, map_node=True)
        members = _attr("members")
    after = hwtest.read_rdpmc(ctx.event_source, ctx.pmus)
    problems = raw_problems(results, "sigsegv", "mmap:EPERM")
    if {v for v in during.values() if v is not None} != {hwtest.RDPMC_NEVER}:
        problems.append(f"rdpmc {during} after writing 0")
    if members != base:
        problems.append(f"members {members} with rdpmc 0, {base} before")
    if after != before:
        problems.append(f"rdpmc {after} after the step, {before} before")
    measured: dict[str, object] = {"rdpmc": during, **_briefs(results), "members": members,
                                   "rdpmc_after": after}
    return _verdict("rdpmc-0", problems, measured, {
        "every online CPU": "sigsegv map=mmap:EPERM", "members": base,
        "rdpmc_after": before})


def step_everyone(ctx: Context) -> Record:
    """rdpmc 2 is the admin's "everyone": access reads everyone, rdpmc_always 1, and raw
    readers that never map the node read on every CPU, root's and uid 65534's. Back at
    rdpmc 1: they fault again, access reads members, rdpmc_always 0."""
    if not _rdpmc_known(ctx):
        return Record("everyone", "skip", "no cpu PMU's rdpmc attribute could be read")
    cpus = online_cpus()
    prog = ctx.progs["hwraw"]
    before = hwtest.read_rdpmc(ctx.event_source, ctx.pmus)
    measured: dict[str, object] = {}

    def wake() -> None:
        visit_cpus(cpus)

    with public_copy(prog) as public:
        with hwtest.rdpmc_set(ctx.event_source, ctx.pmus, hwtest.RDPMC_EVERYONE, before):
            measured["rdpmc"] = hwtest.read_rdpmc(ctx.event_source, ctx.pmus)
            root = raw_all(prog, cpus)
            nobody = raw_all(public, cpus, who=NOBODY_WHO)
            access, waited = wait_attr("access", "everyone", ACCESS_WAIT_S, wake)
            always = _attr("rdpmc_always")
        measured["rdpmc_after"] = after = hwtest.read_rdpmc(ctx.event_source, ctx.pmus)
        again = raw_all(prog, cpus)
        access_after, waited_after = wait_attr("access", "members", ACCESS_WAIT_S, wake)
        always_after = _attr("rdpmc_always")
    measured.update({"access": access, "access_s": waited, "rdpmc_always": always,
                     "root": _briefs(root), "uid_65534": _briefs(nobody),
                     "root_after": _briefs(again), "access_after": access_after,
                     "access_after_s": waited_after, "rdpmc_always_after": always_after})
    problems = [f"root, rdpmc 2: {p}" for p in raw_problems(root, "ok", "none")]
    problems += [f"uid {NOBODY}, rdpmc 2: {p}" for p in raw_problems(nobody, "ok", "none")]
    problems += [f"root, rdpmc put back: {p}" for p in raw_problems(again, "sigsegv", "none")]
    for name, got, want in (("access", access, "everyone"), ("rdpmc_always", always, "1"),
                            ("access after", access_after, "members"),
                            ("rdpmc_always after", always_after, "0")):
        if got != want:
            problems.append(f"{name} {got}, want {want}")
    if after != before:
        problems.append(f"rdpmc {after} after the step, {before} before")
    return _verdict("everyone", problems, measured, {
        "root": "ok map=none on every CPU", "uid_65534": "ok map=none on every CPU",
        "access": "everyone", "rdpmc_always": "1", "root_after": "sigsegv on every CPU",
        "access_after": "members", "rdpmc_always_after": "0", "rdpmc_after": before})


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
        _guarded("node", lambda: step_node(ctx)),
        _guarded("non-member-faults", lambda: step_non_member(ctx)),
        _guarded("member-reads", lambda: step_member(ctx)),
        _guarded("members", lambda: step_members(ctx)),
        _guarded("member-fork", lambda: step_member_fork(ctx)),
        _guarded("other-user", lambda: step_other_user(ctx)),
        _guarded("advance", lambda: step_advance(ctx)),
        _guarded("known-loop", lambda: step_known_loop(ctx, cpu)),
        _guarded("cycles-vs-tsc", lambda: step_cycles_tsc(ctx, cpu)),
        _guarded("two-processes", lambda: step_alternate(ctx, cpu)),
        _guarded("perf-concurrent", lambda: step_perf_concurrent(ctx)),
        _guarded("perf-known-loop", lambda: step_perf_known_loop(ctx)),
        _guarded("cpu-hotplug", lambda: step_hotplug(ctx)),
        # Last: they change rdpmc for a moment (and put it back).
        _guarded("rdpmc-0", lambda: step_rdpmc_never(ctx)),
        _guarded("everyone", lambda: step_everyone(ctx)),
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
