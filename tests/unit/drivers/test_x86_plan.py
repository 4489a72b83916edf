"""drivers/x86/plan.h in user space: the 2011 ring setting as perf exclude bits, the events
each CPU gets on real CPUs (tests/unit/drivers/data/cpuid dumps), which counters perf may
give each, and which published RDPMC indices the driver accepts.
tests/unit/drivers/c/x86_plan.c prints what the header computes; no expected value is
computed in Python from the same rules."""

import errno
from pathlib import Path

import pytest

from .test_cpuid import DATA, compile_harness, parse_dump, run

HARNESS = Path(__file__).parent / "c" / "x86_plan.c"

CYCLES, INSTRUCTIONS, REF_CYCLES = 0, 1, 9  # enum perf_hw_id (uapi)
FIXED = 1 << 30  # RDPMC ECX bit 30
ANY_GP = (1 << 32) - 1


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    return compile_harness(tmp_path_factory, HARNESS)


def leaf_a(name: str) -> list[str]:
    return [hex(v) for v in parse_dump(DATA / f"{name}.txt")[0xA, 0]]


def plan(harness: Path, name: str, hypervisor: int = 0) -> list[tuple]:
    out = run(harness, "plan", *leaf_a(name), hypervisor)
    slots = [out[f"slot{i}"].split(",") for i in range(int(out["nr"]))]
    return [(int(h), int(e, 16), int(c, 16)) for h, e, c in slots]


@pytest.mark.parametrize(("ring", "want"), [
    (1, {"valid": "1", "exclude_kernel": "0", "exclude_user": "1"}),
    (2, {"valid": "1", "exclude_kernel": "1", "exclude_user": "0"}),
    (3, {"valid": "1", "exclude_kernel": "0", "exclude_user": "0"}),
    (0, {"valid": "0"}),
    (4, {"valid": "0"}),
    (7, {"valid": "0"}),
])
def test_ring_to_excludes(harness, ring, want):
    assert run(harness, "ring", ring) == want


@pytest.mark.parametrize("name", ["nehalem-core-i7-920", "skylake-core-i7-6700k",
                                  "icelake-core-i7-1065g7", "sapphirerapids-xeon-w9-3475x",
                                  "alderlake-core-i9-12900k-pcore",
                                  "alderlake-core-i9-12900k-ecore"])
def test_bare_metal_intel_gets_cycles_instructions_ref_cycles(harness, name):
    """Every one of these has fixed counters 0-2 and the three architectural events: core
    cycles on fixed 1 or any general counter, instructions on fixed 0 or any general counter,
    reference cycles on fixed 2 only (0x0300 is a fixed-only pseudo-encoding)."""
    assert plan(harness, name) == [
        (CYCLES, 0x3C, (1 << 33) | ANY_GP),
        (INSTRUCTIONS, 0xC0, (1 << 32) | ANY_GP),
        (REF_CYCLES, 0x300, 1 << 34),
    ]


def test_guest_without_fixed_counter_2_gets_no_ref_cycles(harness):
    """Nehalem reports 3 fixed counters; a hypervisor that reports 2 (EDX[4:0] = 2) gets no
    'at least 3' quirk from the kernel, so ref-cycles (fixed 2 only) would sit in ERROR."""
    eax, ebx, ecx, edx = (int(v, 16) for v in leaf_a("nehalem-core-i7-920"))
    edx = (edx & ~0x1F) | 2
    out = run(harness, "plan", hex(eax), hex(ebx), hex(ecx), hex(edx), 1)
    assert out["nr"] == "2"
    # The same leaf on bare metal: the kernel assumes 3 fixed counters for v2-4.
    assert run(harness, "plan", hex(eax), hex(ebx), hex(ecx), hex(edx), 0)["nr"] == "3"


def test_v5_fixed_counter_2_only_where_both_kernel_rules_have_it(harness):
    """Perfmon v5 with ECX lacking fixed 2: from 5.12 the kernel drives ECX's counters only,
    a 5.10 kernel EDX's contiguous ones, and no header tells the driver which it runs on. So
    ref-cycles (fixed 2 only) is planned only where both rules drive fixed 2, and an index
    perf gives on a counter either rule drives is accepted."""
    eax, ebx, ecx, edx = (int(v, 16) for v in leaf_a("sapphirerapids-xeon-w9-3475x"))
    assert eax & 0xFF >= 5
    assert run(harness, "plan", hex(eax), hex(ebx), hex(ecx), hex(edx), 0)["nr"] == "3"
    # ECX without fixed 2 (the 5.12 rule drops it); EDX without it (5.10's drops it).
    assert run(harness, "plan", hex(eax), hex(ebx), "0x3", hex(edx), 0)["nr"] == "2"
    assert run(harness, "plan", hex(eax), hex(ebx), hex(ecx), hex(edx & ~0x1F | 2), 1)["nr"] \
        == "2"
    # Instructions on fixed 0: named by EDX (5.10's rule) though ECX lacks it.
    assert run(harness, "index", hex(eax), hex(ebx), "0x6", hex(edx), 0, INSTRUCTIONS,
               hex(FIXED | 0)) == {"ok": "1"}



def test_ref_cycles_unavailable_in_ebx(harness):
    """EBX bit 2 set: reference cycles are not an architectural event here."""
    eax, ebx, ecx, edx = (int(v, 16) for v in leaf_a("skylake-core-i7-6700k"))
    out = run(harness, "plan", hex(eax), hex(ebx | 4), hex(ecx), hex(edx), 0)
    assert out["nr"] == "2"


@pytest.mark.parametrize(("hw_id", "ecx", "ok"), [
    (CYCLES, FIXED | 1, "1"),         # where perf puts it when fixed 1 is free
    (CYCLES, 3, "1"),                 # a general counter (NMI watchdog holds fixed 1)
    (CYCLES, 31, "1"),
    (CYCLES, FIXED | 0, "0"),         # fixed 0 counts instructions, not cycles
    (CYCLES, FIXED | 2, "0"),
    (INSTRUCTIONS, FIXED | 0, "1"),
    (INSTRUCTIONS, 0, "1"),
    (INSTRUCTIONS, FIXED | 1, "0"),
    (REF_CYCLES, FIXED | 2, "1"),
    (REF_CYCLES, 2, "0"),             # 0x0300 never goes to a general counter
    (CYCLES, 1 << 29, "0"),           # PERF_METRICS, not a counter
    (CYCLES, FIXED | 16, "0"),        # past the architectural maximum
    (CYCLES, 32, "0"),
    (CYCLES, FIXED | (1 << 29) | 1, "0"),
])
def test_published_index_accepted_only_where_the_event_can_be(harness, hw_id, ecx, ok):
    out = run(harness, "index", *leaf_a("skylake-core-i7-6700k"), 0, hw_id, hex(ecx))
    assert out == {"ok": ok}




@pytest.mark.parametrize(("ring", "excl_kernel", "excl_user"), [(1, 0, 1), (2, 1, 0), (3, 0, 0)])
@pytest.mark.parametrize("hw_id", [CYCLES, INSTRUCTIONS, REF_CYCLES])
def test_attr_fill(harness, hw_id, ring, excl_kernel, excl_user):
    """Every field the driver sets, from a buffer filled with 0xff first: PERF_TYPE_HARDWARE
    (type 0; the hybrid trap is PERF_TYPE_RAW, 4), pinned, guests and the hypervisor never
    counted, a sampling event with perf's max_period, nothing else set."""
    period = (1 << 47) - 1
    assert run(harness, "attr", hw_id, ring, period) == {
        "type": "0", "size_is_sizeof": "1", "config": str(hw_id), "pinned": "1",
        "exclude_kernel": str(excl_kernel), "exclude_user": str(excl_user),
        "exclude_hv": "1", "exclude_guest": "1", "exclude_host": "0", "disabled": "0",
        "freq": "0", "sample_period": str(period), "precise_ip": "0"}


@pytest.mark.parametrize(("hw_id", "ecx", "blocked", "want"), [
    (CYCLES, FIXED | 1, 0, FIXED | 1),
    (CYCLES, 5, 0, 5),
    (CYCLES, FIXED | 1, 1, -1),        # 7.x RDPMC_USER_DISABLE: RDPMC would read 0
    (INSTRUCTIONS, FIXED | 0, 0, FIXED | 0),
    (INSTRUCTIONS, FIXED | 1, 0, -1),
    (REF_CYCLES, FIXED | 2, 0, FIXED | 2),
    (REF_CYCLES, 0, 0, -1),
    (4, 0, 0, -1),                     # PERF_COUNT_HW_CACHE_REFERENCES: not the driver's
])
def test_published_index(harness, hw_id, ecx, blocked, want):
    out = run(harness, "published", *leaf_a("skylake-core-i7-6700k"), 0, hw_id, hex(ecx),
              blocked)
    assert out == {"index": str(want)}


OK, NOT_INTEL, NO_ARCH_PERFMON, NO_PERF_PMU, NO_FIXED = range(5)


@pytest.mark.parametrize(("name", "intel", "want"), [
    ("nehalem-core-i7-920", 1, OK),
    ("skylake-core-i7-6700k", 1, OK),
    ("alderlake-core-i9-12900k-ecore", 1, OK),
    ("sapphirerapids-xeon-w9-3475x", 1, OK),
    ("skylake-core-i7-6700k", 0, NOT_INTEL),   # a Zhaoxin part with Intel's leaf 0xA
    ("amd-ryzen-5-3600", 0, NOT_INTEL),
])
def test_refusal_on_real_dumps(harness, name, intel, want):
    regs = parse_dump(DATA / f"{name}.txt")
    a = regs.get((0xA, 0), (0, 0, 0, 0))
    assert run(harness, "refusal", intel, 1, regs[0, 0][0], *(hex(v) for v in a)) == \
        {"refusal": str(want)}


def test_refusal_rules(harness):
    a = [int(v, 16) for v in leaf_a("skylake-core-i7-6700k")]
    def refusal(intel=1, flag=1, max_leaf=0x16, eax=a[0], ebx=a[1], ecx=a[2], edx=a[3]):
        return int(run(harness, "refusal", intel, flag, max_leaf, eax, ebx, ecx, edx)["refusal"])
    assert refusal() == OK
    assert refusal(flag=0) == NO_ARCH_PERFMON          # the kernel did not set arch_perfmon
    assert refusal(max_leaf=9) == NO_ARCH_PERFMON      # leaf 0xA beyond the highest leaf
    assert refusal(eax=(a[0] & ~0xFF00) | 0x100) == NO_PERF_PMU   # 1 general counter
    assert refusal(eax=(a[0] & ~0xFF000000) | 0x6000000) == NO_PERF_PMU  # EBX length 6
    assert refusal(eax=(a[0] & ~0xFF) | 1) == NO_FIXED  # version 1


PAGE = 4096


@pytest.mark.parametrize(("args", "errno_name"), [
    ((PAGE, PAGE, 0, 0, 0), None),
    ((2 * PAGE, PAGE, 0, 0, 0), "EINVAL"),   # more than the one page
    ((PAGE, PAGE, 1, 0, 0), "EINVAL"),       # an offset
    ((PAGE, PAGE, 0, 1, 0), "EINVAL"),       # writable
    ((PAGE, PAGE, 0, 0, 1), "EINVAL"),       # executable
    ((16384, 16384, 0, 0, 0), None),         # the page size is the kernel's, not 4096
])
def test_mapping_that_lets_a_process_in(harness, args, errno_name):
    """The one mapping of /dev/simple-pmu pmu_member.c accepts: one page, offset 0,
    read-only; anything else is refused before perf is asked."""
    want = 0 if errno_name is None else -getattr(errno, errno_name)
    assert run(harness, "mapping", *args) == {"error": str(want)}


@pytest.mark.parametrize(("before", "after", "pce", "errno_name"), [
    (0, 1, 1, None),      # perf raised the mm's count, CR4.PCE set: RDPMC while mapped
    (3, 4, 1, None),      # a process with perf mmaps of its own already
    (0, 0, 0, "EPERM"),   # rdpmc 0 at open, or a counter perf blocks (7.x): perf gave nothing
    (2, 2, 1, "EPERM"),   # PCE set by other mappings, but this one got nothing
    (0, 1, 0, "EPERM"),   # counted, but rdpmc went to 0 since the open: PCE stays clear
    (0, 2, 1, "EPERM"),   # the count moved otherwise: not what perf_mmap() does
])
def test_grant_is_read_on_perfs_count_and_cr4(harness, before, after, pce, errno_name):
    want = 0 if errno_name is None else -getattr(errno, errno_name)
    assert run(harness, "grant", before, after, pce) == {"error": str(want)}


@pytest.mark.parametrize(("held", "always", "blocked", "unblocked", "retake", "everyone"), [
    (4, 4, 1, 0, 1, 1),   # rdpmc now 2 everywhere, events made blocked: take again
    (4, 4, 0, 1, 0, 1),   # made for rdpmc 2 already
    (4, 0, 0, 1, 1, 0),   # rdpmc no longer 2, events readable by perf-mapped processes
    (4, 0, 1, 0, 0, 0),   # made blocked for rdpmc 1: as perf wants
    (4, 2, 1, 1, 1, 0),   # rdpmc 2 seen on some CPUs only: not everyone yet
    (4, 2, 1, 0, 0, 0),   # ...and every event blocked, as perf wants below 2: wait
    (4, 4, 1, 1, 1, 1),   # rdpmc 2 everywhere, some events still blocked: take again
    (0, 0, 0, 0, 0, 0),   # no events held: nothing to take, nobody reads
])
def test_retake_when_perf_made_the_events_for_the_other_rdpmc(harness, held, always, blocked,
                                                              unblocked, retake, everyone):
    """Panther Cove (7.x): blocked events are unplaced, so the decision counts the CPUs
    that hold events, not the placed ones (with placed CPUs, blocked events under rdpmc 2
    were never taken back)."""
    assert run(harness, "retake", held, always, blocked, unblocked) == {
        "retake": str(retake), "everyone": str(everyone)}


@pytest.mark.parametrize(("user_disable", "everyone", "errno_name"), [
    (0, 0, None),     # perf lets a mapped process RDPMC the CPU-wide counters
    (0, 1, None),
    (1, 0, "EPERM"),  # 7.x Panther Cove: perf blocks them unless rdpmc 2 (the token still maps)
    (1, 1, None),     # rdpmc 2: open to everyone, a mapping changes nothing
])
def test_let_in_refused_where_perf_blocks_cpu_wide_counters(harness, user_disable, everyone,
                                                            errno_name):
    want = 0 if errno_name is None else -getattr(errno, errno_name)
    assert run(harness, "blocked", user_disable, everyone) == {"error": str(want)}


@pytest.mark.parametrize(("bad", "live", "renew"), [
    (0, 1, 0),   # a good token is shared by every open
    (1, 1, 1),   # made under rdpmc 0: make a new one
    (1, 2, 0),   # an older one is still held open: no third perf event
    (1, 0, 1),   # none yet
])
def test_one_token_shared_and_at_most_two_alive(harness, bad, live, renew):
    assert run(harness, "renew", bad, live) == {"renew": str(renew)}


MAPPED, NEVER, ALWAYS = 0, 1, 2  # enum spmu_x86_rdpmc_seen


@pytest.mark.parametrize(("pce", "mm_allowed", "last", "seen"), [
    (1, 0, MAPPED, ALWAYS),   # PCE without a mapping: rdpmc 2
    (1, 0, NEVER, ALWAYS),
    (0, 1, MAPPED, NEVER),    # a let-in process without PCE: rdpmc 0
    (0, 1, ALWAYS, NEVER),
    (1, 1, NEVER, MAPPED),    # a let-in process with PCE: 1 or 2, not 0
    (1, 1, ALWAYS, ALWAYS),
    (1, 1, MAPPED, MAPPED),
    (0, 0, ALWAYS, MAPPED),   # nobody let in, no PCE: 0 or 1, not 2
    (0, 0, NEVER, NEVER),
    (0, 0, MAPPED, MAPPED),
])
def test_rdpmc_setting_inferred_from_cr4_and_the_mm(harness, pce, mm_allowed, last, seen):
    assert run(harness, "seen", pce, mm_allowed, last) == {"seen": str(seen)}


def test_v5_index_on_a_counter_only_ecx_names(harness):
    """ECX (5.12 rule) names fixed 1, EDX (5.10 rule, hypervisor) only fixed 0:
    cycles at fixed 1 is perf's counter on a 5.12+ kernel, so accepted; instructions at
    fixed 0 with ECX lacking it and EDX giving no fixed counter: named by neither."""
    eax, ebx, _, edx = (int(v, 16) for v in leaf_a("sapphirerapids-xeon-w9-3475x"))
    assert run(harness, "index", hex(eax), hex(ebx), "0x2", hex(edx & ~0x1F | 1), 1,
               CYCLES, hex(FIXED | 1)) == {"ok": "1"}
    assert run(harness, "index", hex(eax), hex(ebx), "0x2", hex(edx & ~0x1F), 1,
               INSTRUCTIONS, hex(FIXED | 0)) == {"ok": "0"}
    assert run(harness, "index", hex(eax), hex(ebx), "0x2", hex(edx & ~0x1F), 1,
               CYCLES, hex(FIXED | 1)) == {"ok": "1"}
