"""include/cycles.h: the 2011 demo builds unchanged on x86-64 and arm64; the header works here.

The seed copy of tcyc.c lost the names of its three system #includes and gained a
line-count trailer ("} 64 |") in transmission (shared/README.md says so). The test
restores only that damage, in a temporary copy, and checks that nothing else differs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from userlib_helpers import LineProcess

from pmubuild.common import seeds
from pmubuild.common.seeds import restore_seed

REPO = Path(__file__).resolve().parents[2]
INCLUDE = REPO / "include"
SEEDS = seeds.SEEDS
TCYC = seeds.TCYC
CSRC = Path(__file__).resolve().parent / "c"
SYSFS_DIR = Path("/sys/devices/system/simple-pmu/simple-pmu0")
ARM64_SYSROOT = Path("/usr/aarch64-linux-gnu")

NATIVE_CC = "gcc"
CROSS_CC = "aarch64-linux-gnu-gcc"
WARN = ["-Wall", "-Wextra", "-Werror"]

# Headers tcyc.c needs (printf, exit) plus one more, as the 2011 original had three;
# the variants prove the result does not depend on which third header it was.
LOST_INCLUDE_VARIANTS = [
    ["<stdio.h>", "<stdlib.h>", "<unistd.h>"],
    ["<stdio.h>", "<stdlib.h>", "<sched.h>"],
    ["<stdio.h>", "<stdlib.h>", "<string.h>"],
]


def need_seeds() -> None:
    if not SEEDS.is_dir():
        pytest.skip(f"seed documents not found at {SEEDS} (shared/reference/seeds)")


def need_cc(cc: str) -> None:
    if shutil.which(cc) is None:
        pytest.fail(f"{cc} is not installed (apt-get install gcc-aarch64-linux-gnu "
                    "libc6-dev-arm64-cross); ./devenv installs it")


def compile_c(cc: str, sources: list[Path], out: Path, extra: list[str] | tuple[()] = ()) -> None:
    cmd = [cc, "-O2", *WARN, *extra, "-I", str(INCLUDE), *map(str, sources), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stderr}"


def run_arm64(binary: Path) -> subprocess.CompletedProcess[str] | None:
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        return None
    return subprocess.run([qemu, "-L", str(ARM64_SYSROOT), str(binary)],
                          capture_output=True, text=True, timeout=120)


def parse_kv(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line
                and not line.startswith("FAIL"))


@pytest.mark.parametrize("includes", LOST_INCLUDE_VARIANTS, ids=lambda v: v[2].strip("<>"))
@pytest.mark.parametrize("cc", [NATIVE_CC, CROSS_CC])
def test_tcyc_builds_unmodified(tmp_path, cc, includes):
    need_seeds()
    need_cc(cc)
    original = TCYC.read_text()
    restored = restore_seed(original, includes)
    # Only the damage was touched: same lines apart from the three #include lines.
    diff = [(a, b) for a, b in zip(original.splitlines(), restored.splitlines(), strict=True)
            if a != b]
    assert [a for a, _ in diff if a != "#include"] == [original.splitlines()[-1]]
    src = tmp_path / "tcyc.c"
    src.write_text(restored)
    compile_c(cc, [src], tmp_path / "tcyc")


def test_tcyc_runs_here(tmp_path):
    """Without the module, the demo takes its 'no perfmon' exit instead of faulting."""
    need_seeds()
    src = tmp_path / "tcyc.c"
    src.write_text(restore_seed(TCYC.read_text(), LOST_INCLUDE_VARIANTS[0]))
    compile_c(NATIVE_CC, [src], tmp_path / "tcyc")
    res = subprocess.run([tmp_path / "tcyc"], capture_output=True, text=True, timeout=30)
    if SYSFS_DIR.exists():
        pytest.skip("simple-pmu is loaded here; the refusal path cannot be seen")
    assert (res.returncode, res.stdout) == (1, "no fixed perfmon available\n")


@pytest.mark.parametrize("flags", [["-O0"], ["-O2"], ["-O2", "-std=c11", "-pedantic"]],
                         ids=["O0", "O2", "c11-pedantic"])
def test_header_native(tmp_path, flags):
    out = tmp_path / "header_check"
    compile_c(NATIVE_CC, [CSRC / "header_check.c", CSRC / "other_unit.c"], out, flags)
    res = subprocess.run([out], capture_output=True, text=True, timeout=60)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
    kv = parse_kv(res.stdout)
    if not SYSFS_DIR.exists():
        assert kv["perfmon"] == "0"
    assert int(kv["timer_ticks_100k_reads"]) > 0
    assert int(kv["cpus"]) == len(os.sched_getaffinity(0))


def test_header_arm64(tmp_path):
    need_cc(CROSS_CC)
    out = tmp_path / "header_check"
    compile_c(CROSS_CC, [CSRC / "header_check.c", CSRC / "other_unit.c"], out)
    disasm = shutil.which("aarch64-linux-gnu-objdump")
    if disasm:
        text = subprocess.run([disasm, "-d", str(out)], capture_output=True, text=True).stdout
        # The counters are read with mrs of the named registers, never via PMSELR.
        for reg in ("pmccntr_el0", "pmevcntr0_el0", "pmevcntr30_el0", "cntvct_el0",
                    "cntfrq_el0"):
            assert re.search(rf"\bmrs\s+x\d+, {reg}\b", text), f"no mrs of {reg} in the build"
        assert "pmselr_el0" not in text
    res = run_arm64(out)
    if res is None:
        pytest.skip("built for arm64; qemu-aarch64 (Debian qemu-user) absent, not run")
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
    kv = parse_kv(res.stdout)
    assert kv["perfmon"] == "0"  # no simple-pmu sysfs directory seen by a user-mode emulator
    assert int(kv["timer_frequency"]) > 0  # CNTFRQ_EL0
    assert kv["unhalted_ref_is_timer"] == "1"


def test_header_refuses_late_gnu_source(tmp_path):
    """A file that included a libc header before _GNU_SOURCE gets a clear #error."""
    src = tmp_path / "late.c"
    src.write_text('#include <stdio.h>\n#define _GNU_SOURCE 1\n#include "cycles.h"\n'
                   "int main(void) { return 0; }\n")
    res = subprocess.run([NATIVE_CC, "-I", str(INCLUDE), "-c", str(src), "-o",
                          str(tmp_path / "late.o")], capture_output=True, text=True)
    assert res.returncode != 0
    assert "add #define _GNU_SOURCE 1 before the first #include" in res.stderr


def test_header_weak_objects_cannot_differ_in_size(tmp_path):
    """The program-wide weak objects are one object across translation units: a unit
    may not size the module cache (CYCLES_MAX_CPUS) differently from another, so the
    header refuses the macro instead of letting two sizes overflow each other."""
    res = subprocess.run([NATIVE_CC, "-I", str(INCLUDE), "-DCYCLES_MAX_CPUS=8", "-c",
                          str(CSRC / "other_unit.c"), "-o", str(tmp_path / "o.o")],
                         capture_output=True, text=True)
    assert res.returncode != 0, "a unit with its own CYCLES_MAX_CPUS compiled"
    assert "CYCLES_MAX_CPUS is fixed" in res.stderr


# --- The per-CPU lookup, against fake driver directories (c/lookup_check.c) ---------

CPUS = sorted(os.sched_getaffinity(0))
PER_CPU, NONE = -3, -1  # CYCLES_IDX_PER_CPU, CYCLES_IDX_NONE
# The INST_RETIRED event insn_retired() looks for in `events` (CYCLES_EVENT_INST_RETIRED).
INSN_EVENT = {False: "0xc0", True: "0x8"}  # x86 (raw event|umask<<8), arm64


class Lookup(LineProcess):
    """lookup_check running against a FakeDriver: one command, one answer line."""

    def index_on(self, cpu: int) -> tuple[int, int]:
        """(cycle, insn) the counter reads would use on cpu."""
        assert self.ask(f"pin {cpu}") == "ok"
        got = self.pairs("index")
        return got["cycle"], got["insn"]

    def shared(self) -> tuple[int, int]:
        got = self.pairs("shared")
        return got["cycle"], got["insn"]

    def entry(self, cpu: int) -> dict[str, int]:
        return self.pairs(f"cpu {cpu}")

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture(params=[NATIVE_CC, CROSS_CC], ids=["native", "arm64"])
def lookup(request, tmp_path):
    """(start, fake, arm64): start() runs lookup_check built for the fake driver's
    directory. The driver's layout is arm64's on both; natively (x86) it counts x86's
    INST_RETIRED, and the cpu PMU's rdpmc attribute is looked for in an empty directory
    (no such attribute: allowed, as on kernels before 4.0)."""
    from userlib_helpers import FakeDriver

    cc = request.param
    need_cc(cc)
    fake = FakeDriver(tmp_path / "sys", max(CPUS) + 1, events=INSN_EVENT[cc == CROSS_CC])
    exe = tmp_path / "lookup_check"
    (tmp_path / "event_source").mkdir()
    # arm64's perf_user_access sysctl, as on Linux >= 5.17 (a test may remove it).
    (tmp_path / "perf_user_access").write_text("0\n")
    compile_c(cc, [CSRC / "lookup_check.c"], exe,
              [f'-DCYCLES_SYSFS_DIR="{fake.dir}"',
               f'-DCYCLES_EVENT_SOURCE_DIR="{tmp_path / "event_source"}"',
               f'-DCYCLES_PERF_USER_ACCESS="{tmp_path / "perf_user_access"}"'])
    argv = [str(exe)]
    if cc == CROSS_CC:
        qemu = shutil.which("qemu-aarch64")
        if qemu is None:
            pytest.skip("qemu-aarch64 (Debian qemu-user) absent: built, not run")
        argv = [qemu, "-L", str(ARM64_SYSROOT), str(exe)]
    started: list[Lookup] = []

    def start() -> Lookup:
        started.append(Lookup(argv))
        return started[-1]
    yield start, fake, cc == CROSS_CC
    for proc in started:
        proc.close()


def need_two_cpus() -> tuple[int, int]:
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs this process may run on")
    return CPUS[0], CPUS[1]


def test_lookup_uniform_placement(lookup):
    """Every CPU alike: one shared index pair, the same on every CPU, no lookup."""
    start, fake, arm64 = lookup
    run = start()
    for cpu in CPUS:
        assert run.index_on(cpu) == (31, 5)
    assert run.shared() == (31, 5)
    entry = run.entry(CPUS[0])
    assert entry == {"rc": 0, "cycle": 31, "insn": 5, "gen": fake.generation(CPUS[0])}
    assert run.entry(max(CPUS) + 1)["rc"] == -1  # no such cpuN/
    if arm64:
        assert run.ask("avail") == "4"  # pmu_version


def test_lookup_differs_per_cpu(lookup):
    """Cycles on PMCCNTR_EL0 on one CPU, on an event counter on another: per-CPU reads."""
    a, b = need_two_cpus()
    start, fake, _ = lookup
    fake.place(b, 2, [3])
    run = start()
    assert run.shared() == (PER_CPU, PER_CPU)
    assert run.index_on(a) == (31, 5)
    assert run.index_on(b) == (2, 3)
    assert run.index_on(a) == (31, 5)  # looked up again, not remembered


def test_lookup_event_by_position(lookup):
    """INST_RETIRED's counter is the entry of event_index at its position in events."""
    start, fake, arm64 = lookup
    fake.attr("events", f"0x11,{INSN_EVENT[arm64]},0x3")
    for cpu in CPUS:
        fake.place(cpu, 31, [4, 2, 1])
    run = start()
    assert run.index_on(CPUS[0]) == (31, 2)
    fake.attr("events", "0x11")
    for cpu in CPUS:
        fake.place(cpu, 31, [4])
    assert run.ask("refresh") == "0"
    assert run.index_on(CPUS[0]) == (31, NONE)  # not counted: insn_retired() returns 0


def test_lookup_follows_the_generation(lookup):
    """The cache is used until cycles_generation() sees this CPU's generation change."""
    a, b = need_two_cpus()
    start, fake, _ = lookup
    run = start()
    assert run.index_on(b) == (31, 5)
    new_gen = fake.place(b, 0, [1])  # perf moved both counters on CPU b
    assert run.index_on(b) == (31, 5)  # no system call per read: not seen yet
    assert run.ask(f"pin {b}") == "ok"
    assert int(run.ask("gen")) == new_gen
    assert run.index_on(b) == (0, 1)
    assert run.shared() == (PER_CPU, PER_CPU)
    assert run.index_on(a) == (31, 5)
    # Unchanged generation: no re-read, even if the files say otherwise (they cannot).
    fake.cpu_attr(a, "cycle_index", 7)
    assert run.ask(f"pin {a}") == "ok"
    assert int(run.ask("gen")) == fake.generation(a)
    assert run.index_on(a) == (31, 5)
    assert run.ask("refresh") == "0"
    assert run.index_on(a) == (7, 5)


def test_lookup_unplaced_cpu(lookup):
    """A CPU with cycle_index -1 (offline, or perf left no counter) has none; the others
    still share one index pair; perfmon_available() is 0 only there."""
    a, b = need_two_cpus()
    start, fake, arm64 = lookup
    fake.place(b, -1, [-1])
    run = start()
    assert run.shared() == (31, 5)
    assert run.entry(b) == {"rc": 0, "cycle": -1, "insn": -1, "gen": fake.generation(b)}
    if arm64:
        assert run.ask(f"pin {b}") == "ok" and run.ask("avail") == "0"
        assert run.ask(f"pin {a}") == "ok" and run.ask("avail") == "4"


def test_lookup_refuses(lookup):
    """user_access 0, lists that do not belong together, no module: nothing to read."""
    start, fake, arm64 = lookup
    cpu = CPUS[0]
    fake.attr("user_access", 0)
    run = start()
    if arm64:
        assert run.ask("avail") == "0"
    fake.attr("user_access", 1)
    fake.cpu_attr(cpu, "event_index", "5 4")  # two entries for one event
    assert run.ask("refresh") == "0"
    assert run.entry(cpu)["cycle"] == -1 and run.entry(cpu)["insn"] == -1
    shutil.rmtree(fake.dir)
    assert run.ask("refresh") == "-1"
    assert run.shared() == (NONE, NONE)
    assert run.ask(f"pin {cpu}") == "ok" and run.ask("gen") == "0"
    assert run.ask("avail") == "0"


def test_lookup_module_loaded_later(lookup, tmp_path):
    """Read before the module loads (nothing), then cycles_generation() after: it reads
    the placement the module published, without a cycles_refresh()."""
    from userlib_helpers import FakeDriver

    start, fake, arm64 = lookup
    shutil.rmtree(fake.dir)
    run = start()
    cpu = CPUS[0]
    assert run.index_on(cpu) == (NONE, NONE)
    loaded = FakeDriver(tmp_path / "sys", max(CPUS) + 1, events=INSN_EVENT[arm64])
    loaded.place(cpu, 30, [29])
    assert int(run.ask("gen")) == loaded.generation(cpu)
    assert run.index_on(cpu) == (30, 29)


# --- x86: the RDPMC operand the driver publishes (c/lookup_check.c, natively) ----------

FIXED = 1 << 30  # RDPMC ECX bit 30: fixed counter n is FIXED + n
X86_REASONS = {
    "no module": "module not loaded",
    "rdpmc_fixed": "rdpmc_fixed is not 1",
    "rdpmc": "the cpu PMU's rdpmc is not 2",
    "user_access": "user_access of this CPU is not 1",
    "cycle_index": "no cycle counter on this CPU",
    "perfmon": "no architectural perfmon",
}


@pytest.fixture
def x86(tmp_path):
    """(start, fake): lookup_check built natively against a FakeX86Driver and its fake
    /sys/bus/event_source/devices."""
    from userlib_helpers import FakeX86Driver

    if os.uname().machine != "x86_64":
        pytest.skip("the x86 RDPMC lookup runs natively on x86-64 only")
    fake = FakeX86Driver(tmp_path / "sys", max(CPUS) + 1)
    exe = tmp_path / "lookup_check"
    compile_c(NATIVE_CC, [CSRC / "lookup_check.c"], exe,
              [f'-DCYCLES_SYSFS_DIR="{fake.dir}"',
               f'-DCYCLES_EVENT_SOURCE_DIR="{fake.event_source}"'])
    started: list[Lookup] = []

    def start() -> Lookup:
        started.append(Lookup([str(exe)]))
        return started[-1]
    yield start, fake
    for proc in started:
        proc.close()


def rdpmc_operand(run: Lookup, what: str) -> int | None:
    """The ECX the read of `what` (core, insn, ref) gave RDPMC; None if it read nothing
    (an invalid reading without a RDPMC). This host has no user RDPMC, so the RDPMC
    faults, cycles.h's guard skips it and the invalid reading names the operand; where
    RDPMC works, the test cannot see it."""
    answer = run.ask(f"read {what}")
    if answer == "none":
        return None
    if answer.startswith("value="):
        pytest.skip(f"RDPMC works here ({answer}): the operand cannot be seen in a fault")
    match = re.fullmatch(r"fault rdpmc ecx=(\d+)", answer)
    assert match, answer  # a fault anywhere but at a RDPMC is a bug
    return int(match.group(1))


def test_x86_reads_the_published_fixed_counters(x86):
    """Cycles on fixed counter 1, 0xc0 and 0x300 on fixed 0 and 2, as the driver
    publishes them: perfmon_available() is pmu_version; each read is RDPMC of that
    operand (seen in the fault this PMU-less host gives)."""
    start, fake = x86
    run = start()
    assert run.ask("why") == "ok"
    assert run.ask("avail") == "5"
    for cpu in CPUS:
        assert run.index_on(cpu) == (FIXED + 1, FIXED + 0)
        assert run.ask("ref") == str(FIXED + 2)
        assert rdpmc_operand(run, "core") == 1073741825
        assert rdpmc_operand(run, "insn") == 1073741824
        assert rdpmc_operand(run, "ref") == 1073741826
    assert run.shared() == (FIXED + 1, FIXED + 0)


def test_x86_events_by_position(x86):
    """insn_retired() takes the entry at 0xc0's position in `events`, unhalted_ref() the
    one at 0x300's, whatever their order and whatever else is counted."""
    start, fake = x86
    fake.attr("events", "0x300,0x3c,0xc0")
    for cpu in CPUS:
        fake.place(cpu, 5, [FIXED + 2, 1, 4])
    run = start()
    assert run.index_on(CPUS[0]) == (5, 4)
    assert run.ask("ref") == str(FIXED + 2)
    assert rdpmc_operand(run, "core") == 5
    assert rdpmc_operand(run, "insn") == 4
    assert rdpmc_operand(run, "ref") == FIXED + 2


def test_x86_per_cpu_operands(x86):
    """Cycles on fixed counter 1 on one CPU and on general counter 5 on another: each
    CPU's reads use its own operand."""
    a, b = need_two_cpus()
    start, fake = x86
    fake.place(b, 5, [2, 3])
    run = start()
    assert run.shared() == (PER_CPU, PER_CPU)
    assert run.index_on(b) == (5, 2) and run.ask("ref") == "3"
    assert rdpmc_operand(run, "core") == 5
    assert rdpmc_operand(run, "insn") == 2
    assert rdpmc_operand(run, "ref") == 3
    assert run.index_on(a) == (FIXED + 1, FIXED + 0) and run.ask("ref") == str(FIXED + 2)
    assert rdpmc_operand(run, "core") == FIXED + 1
    assert rdpmc_operand(run, "ref") == FIXED + 2
    # Only the reference cycles differ (on general counter 3 on CPU b): per CPU too.
    fake.place(b, FIXED + 1, [FIXED + 0, 3])
    assert run.ask("refresh") == "0"
    assert run.shared() == (PER_CPU, PER_CPU)
    assert run.index_on(b) == (FIXED + 1, FIXED + 0) and run.ask("ref") == "3"
    assert rdpmc_operand(run, "ref") == 3
    assert run.index_on(a) == (FIXED + 1, FIXED + 0)
    assert rdpmc_operand(run, "ref") == FIXED + 2


def test_x86_without_reference_cycles(x86):
    """A CPU without fixed counter 2: `events` is 0xc0 alone, and unhalted_ref() returns
    0 without a RDPMC; the other two still read their counters."""
    start, fake = x86
    fake.attr("events", "0xc0")
    for cpu in CPUS:
        fake.place(cpu, FIXED + 1, [FIXED + 0])
    run = start()
    assert run.ask("avail") == "5"
    assert run.ask("ref") == str(NONE)
    assert rdpmc_operand(run, "ref") is None
    assert rdpmc_operand(run, "core") == FIXED + 1
    assert rdpmc_operand(run, "insn") == FIXED + 0


def test_x86_follows_the_generation(x86):
    """perf moved the cycles to general counter 5: seen at the next cycles_generation()."""
    start, fake = x86
    cpu = CPUS[0]
    run = start()
    assert run.index_on(cpu) == (FIXED + 1, FIXED + 0)
    new_gen = fake.place(cpu, 5, [FIXED + 0, FIXED + 2])
    assert run.ask(f"pin {cpu}") == "ok" and int(run.ask("gen")) == new_gen
    assert run.index_on(cpu) == (5, FIXED + 0)
    assert rdpmc_operand(run, "core") == 5


def test_x86_refuses(x86, simple_pmu):
    """perfmon_available() is 0, with the failed check named, in each case the driver's
    counters cannot be read; back to > 0 when that one thing is put right."""
    start, fake = x86
    cpu = CPUS[0]
    run = start()
    assert run.ask(f"pin {cpu}") == "ok"

    def refused(why: str) -> None:
        assert (run.ask("why"), run.ask("avail")) == (X86_REASONS[why], "0")

    def works() -> None:
        assert (run.ask("why"), run.ask("avail")) == ("ok", "5")
    works()
    fake.attr("rdpmc_fixed", 0)
    refused("rdpmc_fixed")
    (fake.dir / "rdpmc_fixed").unlink()  # where absent, it is not a condition
    works()
    fake.rdpmc("cpu", 1)
    refused("rdpmc")
    fake.rdpmc("cpu", None)  # no cpu PMU attribute: a kernel before 4.0
    works()
    fake.rdpmc("cpu_core", 2)
    fake.rdpmc("cpu_atom", 1)  # hybrid: both must be 2
    refused("rdpmc")
    fake.rdpmc("cpu_atom", 2)
    works()
    fake.rdpmc("cpu_core", 0)
    refused("rdpmc")
    fake.rdpmc("cpu_core", 2)
    fake.cpu_attr(cpu, "user_access", 0)
    refused("user_access")
    if len(CPUS) > 1:  # the other CPU is not affected
        assert run.ask(f"pin {CPUS[1]}") == "ok"
        works()
        assert run.ask(f"pin {cpu}") == "ok"
    (fake.dir / f"cpu{cpu}" / "user_access").unlink()  # an older driver: not a condition
    works()
    fake.cpu_attr(cpu, "user_access", 1)
    fake.place(cpu, -1, [-1, -1])
    refused("cycle_index")
    fake.place(cpu, FIXED + 1, [FIXED + 0, FIXED + 2])
    works()
    (fake.dir / "pmu_version").unlink()  # then CPUID leaf 0xA says
    cpuid = simple_pmu.native.cpuid
    version = cpuid(0xA)[0] & 0xFF if cpuid(0)[0] >= 0xA else 0
    if version:
        assert (run.ask("why"), run.ask("avail")) == ("ok", str(version))
    else:
        refused("perfmon")
    fake.attr("pmu_version", 5)
    shutil.rmtree(fake.dir)
    refused("no module")


def test_x86_unplaced_cpu_reads_nothing(x86):
    """Where the driver publishes no counter (every CPU unplaced, or the module not
    loaded), a reading is invalid and no RDPMC is made: nothing that is not the
    driver's is read in its place (2011 read fixed counters 1 and 0 there). One
    unplaced CPU among placed ones keeps the shared operands (no lookup per read) and
    perfmon_available() is 0 there."""
    start, fake = x86
    cpu = CPUS[0]
    for c in CPUS:
        fake.place(c, 5, [3, 4])
    fake.place(cpu, -1, [-1, -1])
    run = start()
    assert run.ask(f"pin {cpu}") == "ok"
    assert run.entry(cpu)["cycle"] == NONE and run.ask("avail") == "0"
    if len(CPUS) > 1:
        assert run.index_on(cpu) == (5, 3)
    for c in CPUS:
        fake.place(c, -1, [-1, -1])
    assert run.ask("refresh") == "0"
    assert run.index_on(cpu) == (NONE, NONE)
    for what in ("core", "insn", "ref"):
        assert rdpmc_operand(run, what) is None
    shutil.rmtree(fake.dir)
    assert run.ask("refresh") == "-1"
    for what in ("core", "insn", "ref"):
        assert rdpmc_operand(run, what) is None


# --- The perf mmap page reader, against a page in memory (c/page_check.c) ------------

def page_cases() -> list[str]:
    return ["basic", "lock_changes", "index_zero", "index_unknown", "path_choice", "width_40",
            "width_48", "width_64", "multiplexed", "window", "window_begin_failed",
            "window_fixed", "window_not_fixed"]


@pytest.fixture(scope="module", params=[NATIVE_CC, CROSS_CC], ids=["native", "arm64"])
def page_check(request, tmp_path_factory):
    """page_check built for this host or for arm64 (run under qemu-aarch64)."""
    cc = request.param
    need_cc(cc)
    exe = tmp_path_factory.mktemp(f"page-{cc}") / "page_check"
    compile_c(cc, [CSRC / "page_check.c"], exe)
    if cc == NATIVE_CC:
        return [str(exe)]
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        pytest.skip("qemu-aarch64 (Debian qemu-user) absent: built, not run")
    return [qemu, "-L", str(ARM64_SYSROOT), str(exe)]


def test_page_cases_listed(page_check):
    """The test list here is the program's: no case is left unrun."""
    res = subprocess.run([*page_check, "list"], capture_output=True, text=True, timeout=60)
    assert res.stdout.split() == page_cases()


@pytest.mark.parametrize("case", page_cases())
def test_page_reader(page_check, case):
    """cycles.h reads a perf mmap page as the kernel documents it: retries while `lock`
    changes, index 0 means no counter read, the counter sign-extended from pmc_width,
    multiplexing flagged; a window is valid only if no `lock` changed."""
    res = subprocess.run([*page_check, case], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (0, f"ok {case}\n"), res.stdout + res.stderr


# --- The guard: a fault at a module-path read is skipped, any other is the program's --

def test_guard_window_fault_is_invalid_not_fatal(lookup):
    """A module-path window whose reads fault (this host has no user RDPMC, qemu-user
    no EL0 PMU access) ends invalid and the process lives; a fault of the program's own
    inside the window reaches the program's handler; its handler is back afterwards."""
    start, fake, arm64 = lookup
    run = start()
    assert run.ask(f"pin {CPUS[0]}") == "ok"
    got = dict(p.split("=") for p in run.ask("window").split())
    assert got["begin"] == "0", got  # the fake driver publishes cycles on PMCCNTR / 31
    if got["end"] != "0" and got["reads"] != "0,0":
        pytest.skip(f"the counter read works here ({got}): no fault to catch")
    assert got == {"begin": "0", "reads": "0,0", "own": "1", "end": "0", "restored": "1"}
    assert run.ask("window") == "begin=0 reads=0,0 own=1 end=0 restored=1"  # again


# --- Module-path exactness: only what was checked is claimed ------------------------

def module_exact_here(arm64: bool) -> bool:
    """cycles_module_exact() as the lookup fixture's program sees it: arm64, where its
    perf_user_access sysctl (a file of the fixture) exists."""
    return arm64


def test_module_window_edges(lookup):
    """A module window with nothing read in it: begin takes the CPU, its generation and
    its indices together; pinned it ends valid (exact where module reads can be); not
    pinned it is never exact, since a move to another CPU and back would go unseen."""
    start, fake, arm64 = lookup
    run = start()
    cpu = CPUS[0]
    assert run.ask(f"pin {cpu}") == "ok"
    want = 1 | (2 if module_exact_here(arm64) else 0)  # CYCLES_VALID | CYCLES_EXACT
    # A window the thread was switched out in (the host is busy) is valid, not exact:
    # each is valid, and one of a few windows exact.
    tries = [run.pairs("emptywin") for _ in range(5)]
    for got in tries:
        assert {k: got[k] for k in ("begin", "cpu", "gen")} == {
            "begin": 0, "cpu": cpu, "gen": fake.generation(cpu)} and got["end"] & 1, got
    assert want in [got["end"] for got in tries], tries
    if len(CPUS) < 2:
        return
    assert run.ask("unpin") == "ok"
    got = run.pairs("emptywin")
    assert got["begin"] == 0, got
    assert got["end"] in (0, 1), got  # valid, or moved meanwhile: never exact
    assert got["gen"] == fake.generation(got["cpu"])


def test_module_exact_only_where_perf_user_access_exists(lookup, tmp_path):
    """cycles.h calls module windows exact where arm64 has the perf_user_access sysctl
    (perf revokes EL0 access when it moves a counter), as simple_pmu does; not by kernel
    version. Without it (5.10, or a kernel without the feature) a pinned window is
    valid, not exact."""
    start, fake, arm64 = lookup
    (tmp_path / "perf_user_access").unlink()
    run = start()
    assert run.ask(f"pin {CPUS[0]}") == "ok"
    assert run.pairs("emptywin")["end"] == 1  # CYCLES_VALID alone, on both


def test_module_window_widths(lookup):
    """A module window takes deltas modulo each counter's real width: arm64 PMCCNTR 64,
    an event counter the driver's event_width; x86 CPUID leaf 0xA's fixed or general
    width (48 where CPUID says nothing usable), never 64 (a wrapped 48-bit counter's
    delta would be off by 2^48)."""
    start, fake, arm64 = lookup
    run = start()
    assert run.ask(f"pin {CPUS[0]}") == "ok"
    got = run.pairs("widths")
    if arm64:
        assert got == {"cycles": 64, "insn": 32}, got  # FakeDriver: event_width 32
    else:
        assert got["cycles"] == got["insn"] and 1 <= got["cycles"] <= 48, got


def test_module_single_read_never_exact(lookup):
    """A single module-path reading is not checked against the generation (the cached
    index may be stale): valid at best, never CYCLES_EXACT."""
    start, _, arm64 = lookup
    run = start()
    assert run.ask(f"pin {CPUS[0]}") == "ok"
    answer = run.ask("read core")
    if not answer.startswith("value="):
        pytest.skip(f"the counter read faults here ({answer}): no flags to see")
    flags = int(answer.split("flags=")[1])
    assert flags == 1, answer  # CYCLES_VALID alone


def test_guard_keeps_a_handler_installed_after_it(lookup):
    """The program installs its own fault handler while a module window (the guard) is
    on: the window's end must not put the handler from before the window back over it."""
    start, _, _ = lookup
    run = start()
    assert run.ask(f"pin {CPUS[0]}") == "ok"
    assert run.pairs("ownlate") == {"begin": 0, "kept": 1}


@pytest.mark.parametrize("cc", [NATIVE_CC, CROSS_CC], ids=["native", "arm64"])
def test_guard_is_one_handler_across_translation_units(tmp_path, cc):
    """Two units of one program guard reads, the last to end not the first to begin:
    the program's own handler (installed before) is back afterwards and gets the
    program's own fault. A handler per unit left another unit's installed, saving itself
    as the handler to chain to: that fault then looped forever."""
    need_cc(cc)
    out = tmp_path / "guard_units"
    compile_c(cc, [CSRC / "guard_units.c", CSRC / "guard_unit_b.c"], out,
              ["-Wmissing-prototypes", "-pthread"])
    if cc == CROSS_CC:
        qemu = shutil.which("qemu-aarch64")
        if qemu is None:
            pytest.fail("qemu-aarch64 (Debian qemu-user) is not installed; ./devenv installs it")
        argv = [qemu, "-L", str(ARM64_SYSROOT), str(out)]
    else:
        argv = [str(out)]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the program's own fault never reached its handler (looped 30 s)")
    assert res.stdout.split() == ["still_guarded=1", "restored=1"], res.stdout + res.stderr
    assert res.returncode == 42, f"exit {res.returncode}: {res.stderr}"


@pytest.mark.parametrize("cc", [NATIVE_CC, CROSS_CC], ids=["native", "arm64"])
def test_scope_change_waits_for_an_open_perf_window(tmp_path, cc):
    """cycles_set_scope() while a perf-path window of the thread is open refuses (EBUSY)
    and changes nothing: re-choosing unmapped the page the window's end then read
    (SIGSEGV). A forked child's end of the parent's window says invalid (the child's
    copy of the page is gone) instead of crashing; after the end the scope changes.
    With the perf path's guard on, a faulting read neither kills nor passes: the window
    is invalid, a single read FAULTED; closing the state puts the handler back."""
    need_cc(cc)
    out = tmp_path / "window_scope"
    compile_c(cc, [CSRC / "window_scope.c"], out, ["-pthread"])
    if cc == CROSS_CC:
        qemu = shutil.which("qemu-aarch64")
        if qemu is None:
            pytest.fail("qemu-aarch64 (Debian qemu-user) is not installed; ./devenv installs it")
        argv = [qemu, "-L", str(ARM64_SYSROOT), str(out)]
    else:
        argv = [str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"exit {res.returncode}: {res.stdout}{res.stderr}"
    got = {k: v for line in res.stdout.split() for k, v in [line.split("=", 1)]}
    assert got == {"begin": "0", "set_scope_open": "-1", "errno_busy": "1",
                   "path_kept": "1", "child_end": "0", "child_exit": "0",
                   "end": "3", "second_end": "0", "set_scope_after": "1",
                   # The perf path's guard: a read that faults (here always; on a
                   # machine, once root turned user reads off) ends the window
                   # invalid and makes a single read FAULTED; nobody is killed.
                   "guarded_begin": "0", "guarded_read": "0", "guarded_end": "0",
                   "single_read": "-1", "faulted": "1", "handler_back": "1"}, res.stdout


def test_read2_reading_of_an_event_that_never_ran_is_no_reading(tmp_path):
    """cycles_perf_read() (the read(2) path): time running equal to time enabled is
    exact; below it, valid and CYCLES_MULTIPLEXED; 0 of a nonzero time enabled (the
    event never got on the PMU) is no reading at all, not a valid 0."""
    out = tmp_path / "perf_read_check"
    compile_c(NATIVE_CC, [CSRC / "perf_read_check.c"], out, ["-pthread"])
    res = subprocess.run([str(out)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    # rc, flags (VALID 1, EXACT 2, MULTIPLEXED 4), value
    assert res.stdout.splitlines() == ["0 3 5", "0 5 5", "-1 4 0", "0 3 0"]


# --- The fixed read on the module path: only where the module's cycles is on it ------

def test_module_fixed_window(lookup):
    """cycles_window_begin_fixed() on the module path: it begins only where the module's
    cycles counter on this CPU is the fixed register (arm64 PMCCNTR_EL0, published as 31;
    x86 fixed counter 1, 1 << 30 | 1); a window begun elsewhere, or whose CPU's generation
    changes before its end (the counter moved), ends invalid. A fixed read that faults
    (no user access here) is caught by the guard and the window ends invalid."""
    from userlib_helpers import FIXED

    start, fake, arm64 = lookup
    cpu = CPUS[0]
    fixed, general = (31, 2) if arm64 else (FIXED + 1, 31)
    fake.place(cpu, general, [5])
    run = start()
    assert run.ask(f"pin {cpu}") == "ok"
    assert run.pairs("fbegin") == {"begin": -1, "on_fixed": 0}
    assert run.pairs("fend") == {"end": 0}
    fake.place(cpu, fixed, [5])
    assert run.ask("gen") == str(fake.generation(cpu))  # the cache follows
    assert run.pairs("fbegin") == {"begin": 0, "on_fixed": 1}
    # Valid, not exact: between fbegin and fend the program sleeps reading its next
    # command, so another task may run on the CPU (cycles.h counts the switch).
    assert run.pairs("fend") == {"end": 1}
    # The counter moved (a new generation) between begin and end: invalid.
    assert run.pairs("fbegin")["begin"] == 0
    fake.bump(cpu)
    assert run.pairs("fend") == {"end": 0}
    # A fixed read in the window: here it faults (no user access), the guard skips it.
    assert run.pairs("fbegin")["begin"] == 0
    got = run.pairs("fread")
    if not got["faulted"]:
        pytest.skip(f"the counter read works here ({got}): no fault to catch")
    assert got == {"value": 0, "faulted": 1}
    assert run.pairs("fend") == {"end": 0}


FIXED_READ_SRC = """
#define _GNU_SOURCE 1
#include "cycles.h"
counter_t fixed_read(const struct cycles_window *w)
{
	return cycles_window_read_fixed(w, %s);
}
"""


def function_body(objdump: str, obj: Path, name: str) -> list[str]:
    """The instructions (mnemonic and operands) of one function of an object file."""
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(obj)], capture_output=True,
                          text=True, check=True).stdout
    body = text.split(f"<{name}>:\n", 1)[1].split("\n\n", 1)[0]
    return [" ".join(" ".join(ln.split("\t")[1:]).split()) for ln in body.splitlines()
            if "\t" in ln]


@pytest.mark.parametrize("cc,objdump", [(NATIVE_CC, "objdump"),
                                        (CROSS_CC, "aarch64-linux-gnu-objdump")],
                         ids=["native", "arm64"])
def test_fixed_read_is_the_bare_instruction(tmp_path, cc, objdump):
    """cycles_window_read_fixed() of cycles compiles to the read instruction alone: no
    load from the window, no branch (arm64: mrs PMCCNTR_EL0; x86: RDPMC of fixed
    counter 1 with its constant operand)."""
    need_cc(cc)
    if shutil.which(objdump) is None:
        pytest.skip(f"{objdump} absent")
    src = tmp_path / "fixed.c"
    src.write_text(FIXED_READ_SRC % "CYCLES_CORE")
    obj = tmp_path / "fixed.o"
    compile_c(cc, [src], obj, ["-c"])
    body = function_body(objdump, obj, "fixed_read")
    if cc == CROSS_CC:
        assert body == ["mrs x0, pmccntr_el0", "ret"], body
    else:
        assert body[:2] == ["mov $0x40000001,%ecx", "rdpmc"], body
        assert not any("(" in ins or ins.startswith("j") for ins in body), body


@pytest.mark.parametrize("cc,which", [(NATIVE_CC, "n"), (CROSS_CC, "n"),
                                      (CROSS_CC, "CYCLES_INSN"), (NATIVE_CC, "CYCLES_NR_COUNTERS")],
                         ids=["native-variable", "arm64-variable", "arm64-insn", "native-range"])
def test_fixed_read_refuses_what_has_no_fixed_register(tmp_path, cc, which):
    """The counter of a fixed read is a constant naming a counter with a fixed register
    here: a variable, arm64's instructions (no fixed register) or an out-of-range counter
    do not compile."""
    need_cc(cc)
    src = tmp_path / "bad.c"
    src.write_text(FIXED_READ_SRC.replace("const struct cycles_window *w",
                                          "const struct cycles_window *w, int n") % which)
    res = subprocess.run([cc, "-O2", "-I", str(INCLUDE), "-c", str(src), "-o",
                          str(tmp_path / "bad.o")], capture_output=True, text=True)
    assert res.returncode != 0, f"a fixed read of {which} compiled"
    assert "cycles_fixed_counter" in res.stderr, res.stderr
