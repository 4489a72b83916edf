"""drivers/x86/cpuid_pmu.h in user space: CPUID leaf 0xA and 0x23 decoding on real dumps,
the kernel's fixed-counter rules, which counters an event may land on, and RDPMC index
arithmetic. tests/unit/drivers/c/cpuid_decode.c is compiled with the host gcc against the header and
prints what the header decodes; every value below comes from the header, none from Python.

The dumps (tests/unit/drivers/data/cpuid/*.txt) are lines copied verbatim from libcpuid's test data;
each file names the commit and path it came from. The expected values are the ones a reader
can check against the Intel SDM (CPUID leaf 0AH/23H) and the parts' documentation."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HARNESS = Path(__file__).parent / "c" / "cpuid_decode.c"
HEADER = REPO / "drivers" / "x86" / "cpuid_pmu.h"
DATA = Path(__file__).parent / "data" / "cpuid"

NEW_LINE = re.compile(r"^CPUID ([0-9A-F]{8}): ([0-9A-F]{8})-([0-9A-F]{8})-([0-9A-F]{8})-"
                      r"([0-9A-F]{8})(?: \[(.*)\])?$")
OLD_LINE = re.compile(r"^basic_cpuid\[(\d+)\]=([0-9a-f]{8}) ([0-9a-f]{8}) ([0-9a-f]{8}) "
                      r"([0-9a-f]{8})$")
SUBLEAF = re.compile(r"^SL ([0-9A-F]{2})$")


def parse_dump(path: Path) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    """{(leaf, subleaf): (eax, ebx, ecx, edx)} from one data file; comments skipped."""
    regs = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if m := NEW_LINE.match(line):
            leaf = int(m[1], 16)
            sl = SUBLEAF.match(m[6] or "")
            subleaf = int(sl[1], 16) if sl else 0
        elif m := OLD_LINE.match(line):
            leaf, subleaf = int(m[1]), 0
        else:
            raise AssertionError(f"{path.name}: not a dump line: {line!r}")
        key = (leaf, subleaf)
        assert key not in regs, f"{path.name}: leaf {leaf:#x}.{subleaf} twice"
        regs[key] = tuple(int(m[i], 16) for i in range(2, 6))
    return regs


def compile_harness(tmp_path_factory, source: Path) -> Path:
    """A harness of tests/unit/drivers/c built with the host gcc against the headers,
    warnings as errors (the headers must compile cleanly in user space too)."""
    gcc = shutil.which("gcc")
    assert gcc, f"host gcc is needed to compile {source.name}"
    exe = tmp_path_factory.mktemp(source.stem) / source.stem
    subprocess.run([gcc, "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror",
                    "-Wdeclaration-after-statement", "-Wmissing-prototypes",
                    "-I", str(REPO), "-o", str(exe), str(source)], check=True)
    return exe


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    return compile_harness(tmp_path_factory, HARNESS)


def run(harness: Path, *args: object) -> dict[str, str]:
    """The harness's "key=value" lines as a dict."""
    out = subprocess.run([str(harness), *(str(a) for a in args)], check=True,
                         capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def decode(harness: Path, name: str) -> dict[str, str]:
    regs = parse_dump(DATA / f"{name}.txt")
    zero = (0, 0, 0, 0)

    def r(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        return regs.get((leaf, subleaf), zero)

    args = [r(0)[0], *r(0xA), r(7, 1)[0], *r(0x23, 0)[:2], *r(0x23, 1)[:2], r(0x23, 3)[0],
            r(0x1A)[0]]
    return run(harness, "dump", *(hex(v) for v in args))


def events(out: dict[str, str], prefix: str = "") -> set[int]:
    return {i for i in range(12) if out[f"{prefix}event{i}"] == "1"}


# Architectural event numbers (SDM CPUID.0AH:EBX, CPUID.23H.03H:EAX).
CYC, INS, REF, LLC_REF, LLC_MISS, BR, BR_MISS, SLOTS, TD_BE, TD_BADSPEC, TD_FE, TD_RET = range(12)
ALL7 = {CYC, INS, REF, LLC_REF, LLC_MISS, BR, BR_MISS}

DUMPS = sorted(p.stem for p in DATA.glob("*.txt"))


@pytest.mark.parametrize("name", DUMPS)
def test_every_dump_cites_its_source_and_parses(name):
    text = (DATA / f"{name}.txt").read_text()
    assert re.search(r"^# Source: https://github\.com/anrieff/libcpuid/blob/[0-9a-f]{40}/tests/\S+$",
                     text, re.M), name
    regs = parse_dump(DATA / f"{name}.txt")
    assert (0, 0) in regs and (1, 0) in regs


def test_the_required_parts_are_all_there():
    assert {"nehalem-core-i7-920", "skylake-core-i7-6700k", "icelake-core-i7-1065g7",
            "sapphirerapids-xeon-w9-3475x", "alderlake-core-i9-12900k-pcore",
            "alderlake-core-i9-12900k-ecore", "amd-ryzen-5-3600"} <= set(DUMPS)


# name: version, GP count, GP width, EBX length, fixed count (EDX[4:0]), fixed width,
#       fixed mask (SDM), available events, AnyThread deprecated
LEAF_A = {
    # Nehalem: v3, 4 GP and 3 fixed counters of 48 bits; EBX bit 6 set (branch mispredicts
    # retired not architecturally available on this part).
    "nehalem-core-i7-920": (3, 4, 48, 7, 3, 48, 0x7, ALL7 - {BR_MISS}, "0"),
    # Skylake: v4, 4 GP per logical CPU with HT, 3 fixed.
    "skylake-core-i7-6700k": (4, 4, 48, 7, 3, 48, 0x7, ALL7, "0"),
    # Ice Lake: v5, 8 GP, fixed counter 3 (TOPDOWN.SLOTS) in EDX and ECX, AnyThread gone.
    "icelake-core-i7-1065g7": (5, 8, 48, 8, 4, 48, 0xF, ALL7 | {SLOTS}, "1"),
    "sapphirerapids-xeon-w9-3475x": (5, 8, 48, 8, 4, 48, 0xF, ALL7 | {SLOTS}, "1"),
    # Alder Lake: leaf 0xA reports what P- and E-cores share: 6 GP, 3 fixed, no SLOTS.
    "alderlake-core-i9-12900k-pcore": (5, 6, 48, 7, 3, 48, 0x7, ALL7, "1"),
    "alderlake-core-i9-12900k-ecore": (5, 6, 48, 7, 3, 48, 0x7, ALL7, "1"),
    "meteorlake-core-ultra-7-155h-pcore": (5, 8, 48, 7, 3, 48, 0x7, ALL7, "1"),
    "meteorlake-core-ultra-7-155h-ecore": (5, 8, 48, 7, 3, 48, 0x7, ALL7, "1"),
    # Arrow Lake: v6, EBX 13 bits long; bits 7 (SLOTS) and 9 (bad speculation) set.
    "arrowlake-core-ultra-7-265k-pcore": (6, 8, 48, 13, 3, 48, 0x7,
                                          ALL7 | {TD_BE, TD_FE, TD_RET}, "1"),
    "arrowlake-core-ultra-7-265k-ecore": (6, 8, 48, 13, 3, 48, 0x7,
                                          ALL7 | {TD_BE, TD_FE, TD_RET}, "1"),
}


@pytest.mark.parametrize("name", sorted(LEAF_A))
def test_leaf_a_decoded(harness, name):
    version, gp, gp_width, ebx_len, nfixed, fixed_width, fixed_mask, evs, anythread_dep = \
        LEAF_A[name]
    out = decode(harness, name)
    assert out["leaf_a"] == "1"
    assert (int(out["version"]), int(out["num_gp"]), int(out["gp_width"])) == \
        (version, gp, gp_width)
    assert out["gp_mask"] == hex((1 << gp) - 1)
    assert int(out["ebx_len"]) == ebx_len
    assert (int(out["num_fixed"]), int(out["fixed_width"])) == (nfixed, fixed_width)
    assert int(out["fixed_mask"], 16) == fixed_mask
    assert events(out) == evs
    assert out["anythread_deprecated"] == anythread_dep
    assert out["perf_arch_pmu"] == "1"


# The kernel's fixed counters (spmu_perf_fixed_mask): bare metal, guest, 5.10's rule.
PERF_FIXED = {
    "nehalem-core-i7-920": (0x7, 0x7, 0x7),
    "skylake-core-i7-6700k": (0x7, 0x7, 0x7),
    "icelake-core-i7-1065g7": (0xF, 0xF, 0xF),
    "sapphirerapids-xeon-w9-3475x": (0xF, 0xF, 0xF),
    "alderlake-core-i9-12900k-pcore": (0x7, 0x7, 0x7),
    "arrowlake-core-ultra-7-265k-ecore": (0x7, 0x7, 0x7),
}


@pytest.mark.parametrize("name", sorted(PERF_FIXED))
def test_kernel_fixed_counters_on_real_parts(harness, name):
    out = decode(harness, name)
    got = tuple(int(out[k], 16) for k in ("perf_fixed_bare", "perf_fixed_guest",
                                          "perf_fixed_bare_5_10"))
    assert got == PERF_FIXED[name]


def hand(harness, eax: int, ecx: int, edx: int) -> dict[str, str]:
    """Made-up leaf 0xA values (the dumps never hit these corners); max leaf 0xA."""
    return run(harness, "dump", "0xa", hex(eax), "0", hex(ecx), hex(edx),
               *["0"] * 7)


def test_kernel_assumes_three_fixed_for_v2_to_v4_on_bare_metal_only(harness):
    # Version 2 reporting no fixed counters (the quirk's case): 3 on bare metal, 0 in a guest.
    out = hand(harness, 0x07300202, 0, 0)
    assert out["fixed_mask"] == "0x0"
    assert (out["perf_fixed_bare"], out["perf_fixed_guest"]) == ("0x7", "0x0")
    # A guest told about 1 fixed counter gets 1 (max(EDX, 0)).
    out = hand(harness, 0x07300404, 0, 0x301)
    assert (out["perf_fixed_bare"], out["perf_fixed_guest"]) == ("0x7", "0x1")


def test_kernel_uses_ecx_alone_from_version_5(harness):
    # v5 with EDX[4:0] = 3 but ECX listing counters 0, 2 and 5: the SDM's mask is the union,
    # perf (5.12 on) takes ECX only; 5.10 ignores ECX and clamps to 4 counters.
    out = hand(harness, 0x08300805, 0b100101, 0x8603)
    assert out["fixed_mask"] == hex(0b100111)
    assert out["perf_fixed_bare"] == hex(0b100101)
    assert out["perf_fixed_guest"] == hex(0b100101)
    assert out["perf_fixed_bare_5_10"] == "0x7"
    out = hand(harness, 0x08300805, 0, 0x8606)
    assert out["perf_fixed_bare_5_10"] == "0xf"
    assert out["perf_fixed_bare"] == "0x0"


def test_version_1_has_no_fixed_counters(harness):
    out = hand(harness, 0x07280201, 0xF, 0x603)
    assert (out["num_fixed"], out["fixed_mask"], out["perf_fixed_bare"]) == ("0", "0x0", "0x0")


def test_events_past_ebx_length_are_not_available(harness):
    # EBX length 5: bits 5 and 6 are not enumerated, so not available even though EBX is 0.
    out = hand(harness, 0x05300404, 0, 0x603)
    assert events(out) == {CYC, INS, REF, LLC_REF, LLC_MISS}
    assert out["perf_arch_pmu"] == "0"  # perf wants at least 7 EBX bits


def test_alder_lake_p_and_e_cores_share_leaf_a_and_differ_by_core_type(harness):
    p = decode(harness, "alderlake-core-i9-12900k-pcore")
    e = decode(harness, "alderlake-core-i9-12900k-ecore")
    assert (p["core_type"], e["core_type"]) == ("0x40", "0x20")
    assert {k: v for k, v in p.items() if k != "core_type"} == \
        {k: v for k, v in e.items() if k != "core_type"}
    assert p["leaf_23"] == e["leaf_23"] == "0"


# name: sub-leaves, UnitMask2/EQ, GP mask, fixed mask, events (set = supported)
LEAF_23 = {
    # Meteor Lake: Redwood Cove P-core has SLOTS (fixed 3); Crestmont E-core does not.
    "meteorlake-core-ultra-7-155h-pcore": (0xB, ("0", "0"), 0xFF, 0xF,
                                           ALL7 | {SLOTS, TD_BE, TD_FE, TD_RET}),
    "meteorlake-core-ultra-7-155h-ecore": (0xB, ("0", "0"), 0xFF, 0x7, ALL7),
    # Arrow Lake: Lion Cove has 10 GP counters; Skymont fixed counters 4-6 (topdown, Atom).
    "arrowlake-core-ultra-7-265k-pcore": (0xB, ("1", "1"), 0x3FF, 0xF,
                                          ALL7 | {SLOTS, TD_BE, TD_FE, TD_RET}),
    "arrowlake-core-ultra-7-265k-ecore": (0xF, ("1", "1"), 0xFF, 0x77,
                                          ALL7 | {TD_BE, TD_BADSPEC, TD_FE, TD_RET}),
}


@pytest.mark.parametrize("name", sorted(LEAF_23))
def test_leaf_23_decoded_per_core_type(harness, name):
    subleaves, caps, gp_mask, fixed_mask, evs = LEAF_23[name]
    out = decode(harness, name)
    assert out["leaf_23"] == "1"
    assert int(out["ext_subleaves"], 16) == subleaves
    assert (out["ext_umask2"], out["ext_eq"]) == caps
    assert int(out["ext_gp_mask"], 16) == gp_mask
    assert int(out["ext_fixed_mask"], 16) == fixed_mask
    # Leaf 0x23 overrides leaf 0xA's shared view for this core type.
    assert int(out["merged_gp_mask"], 16) == gp_mask
    assert int(out["merged_num_gp"]) == gp_mask.bit_length()
    assert int(out["merged_fixed_mask"], 16) == fixed_mask
    assert events(out, "merged_") == evs


def test_leaf_23_ignored_without_its_cpuid_7_1_bit_or_below_max_leaf(harness):
    # Sapphire Rapids: max leaf 0x20, CPUID.(7,1):EAX[8] clear.
    assert decode(harness, "sapphirerapids-xeon-w9-3475x")["leaf_23"] == "0"
    # Max leaf 0x23 but bit 8 clear, or bit 8 set but max leaf 0x22.
    args = ["0x0", "0", "0", "0", "0xb", "0", "0xff", "0xf", "0xdff", "0"]
    assert run(harness, "dump", "0x23", *args[:4], "0xfeff", *args[4:])["leaf_23"] == "0"
    assert run(harness, "dump", "0x22", *args[:4], "0x100", *args[4:])["leaf_23"] == "0"
    assert run(harness, "dump", "0x23", *args[:4], "0x100", *args[4:])["leaf_23"] == "1"


def test_leaf_23_subleaves_not_listed_in_subleaf_0_are_ignored(harness):
    # Sub-leaf 0 lists only sub-leaf 3: sub-leaf 1's registers must not be used.
    out = run(harness, "dump", "0x23", "0x07300805", "0", "0x7", "0x8603", "0x100",
              "0x9", "0", "0xff", "0xf", "0x7f", "0")
    assert (out["ext_gp_mask"], out["ext_fixed_mask"]) == ("0x0", "0x0")
    assert (out["merged_gp_mask"], out["merged_fixed_mask"]) == ("0xff", "0x7")
    assert out["ext_events"] == "0x7f"


def test_amd_has_no_architectural_perfmon(harness):
    # Zen 2: max basic leaf 0x10, leaf 0xA all zero (reserved on AMD).
    regs = parse_dump(DATA / "amd-ryzen-5-3600.txt")
    assert regs[(0, 0)][1:] == (0x68747541, 0x444D4163, 0x69746E65)  # AuthenticAMD
    out = decode(harness, "amd-ryzen-5-3600")
    assert out["leaf_a"] == "1"
    assert (out["version"], out["num_gp"], out["fixed_mask"]) == ("0", "0", "0x0")
    assert events(out) == set()
    assert out["perf_arch_pmu"] == "0"
    # K8: max basic leaf 1, so leaf 0xA is not even looked at.
    out = decode(harness, "amd-athlon-64-3000")
    assert (out["leaf_a"], out["version"], out["perf_arch_pmu"]) == ("0", "0", "0")


GP8, F4, F3 = 0xFF, 0xF, 0x7
FIXED = 32  # perf's index of fixed counter 0 (INTEL_PMC_IDX_FIXED)


@pytest.mark.parametrize("config, gp, fixed, icl, want", [
    (0x00C0, GP8, F4, 1, 1 << FIXED | GP8),          # INST_RETIRED.ANY: fixed 0 or any GP
    (0x003C, GP8, F4, 1, 1 << FIXED + 1 | GP8),      # CPU_CLK_UNHALTED.CORE: fixed 1 or GP
    (0x0300, GP8, F4, 1, 1 << FIXED + 2),            # REF_TSC pseudo-encoding: fixed 2 only
    (0x0400, GP8, F4, 1, 1 << FIXED + 3),            # TOPDOWN.SLOTS: fixed 3 only
    (0x0400, GP8, F3, 1, 0),                         # no fixed 3 (E-core, pre-ICL): nowhere
    (0x0100, GP8, F4, 1, 1 << FIXED),                # PREC_DIST, Ice Lake on: fixed 0 only
    (0x0100, 0xF, F3, 0, 0xF),                       # before Ice Lake: a general counter
    (0x5300C0, GP8, F4, 1, 1 << FIXED | GP8),        # USR/OS/INT/EN bits do not matter
    (0x15300C0, GP8, F4, 1, GP8),                    # a cmask does: no fixed counter
    (0x8000C0, GP8, F4, 1, GP8),                     # and so does inv
    (0x0800C0, GP8, F4, 1, 1 << FIXED | GP8),        # pin control is not matched
    (0x00C0, GP8, 0x6, 1, GP8),                      # perf does not use fixed 0: GP only
    (0x01C2, 0x3F, F3, 1, 0x3F),                     # anything else: the general counters
])
def test_event_to_counter_expectations(harness, config, gp, fixed, icl, want):
    out = run(harness, "event", hex(config), hex(gp), hex(fixed), str(icl))
    assert int(out["counters"], 16) == want


@pytest.mark.parametrize("kind, i, want", [
    ("fixed", 0, 0x40000000), ("fixed", 1, 0x40000001), ("fixed", 2, 0x40000002),
    ("fixed", 3, 0x40000003), ("fixed", 6, 0x40000006),
    ("gp", 0, 0), ("gp", 7, 7), ("gp", 9, 9),
])
def test_rdpmc_index(harness, kind, i, want):
    assert int(run(harness, "rdpmc", kind, str(i))["index"], 16) == want
    back = run(harness, "rdpmc-decode", hex(want))["counter"]
    assert back == f"{kind}{i}"
    perf_idx = i + (FIXED if kind == "fixed" else 0)
    assert int(run(harness, "perfidx", str(perf_idx))["index"], 16) == want


@pytest.mark.parametrize("ecx", [
    0x20000000,        # PERF_METRICS (bit 29): not a counter
    0x40000010,        # fixed counter 16: past INTEL_PMC_MAX_FIXED
    32,                # general counter 32: past INTEL_PMC_MAX_GENERIC
    0x80000000,        # bit 31
    0x60000000,        # fixed and metrics at once
])
def test_rdpmc_decode_refuses_what_names_no_counter(harness, ecx):
    assert run(harness, "rdpmc-decode", hex(ecx))["counter"] == "none"


def test_header_has_no_kernel_only_types_in_user_space():
    # The header must compile without kernel headers: only plain C types outside __KERNEL__.
    text = HEADER.read_text()
    assert not re.search(r"\b(u8|u16|u32|u64|s32|s64|BIT|GENMASK)\b", text)
