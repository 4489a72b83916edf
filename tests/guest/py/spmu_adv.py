"""simple_pmu.measure() under attack (tests/guest/arm64/46-adversarial.sh runs perfchurn
on the same CPU): python3 spmu_adv.py CPU SCOPE N RUNS. Pinned to CPU, RUNS blocks of
known_loop(N) with measure(scope=SCOPE). The reads are Python calls (perf backends) or
C calls made from Python (the driver's DriverSpan), and the interpreter's own work
between them (allocator state, the adaptive interpreter's re-specialisation) varies
between runs: seen 17507 and 17776 for known_loop(1000) on trixie on perf (before
WARMUP), 4483 and 4531 on the driver. So an ok, exact block must count at least 2N and
at most PY_SLACK above the smallest ok, exact block (a count of another thread, another
task or another counter is off by far more); the spread is printed. cycles.h's C reader
(advreader) is the one judged on identical counts. A block that is ok but not exact
(the driver before 5.17, or the thread was switched out in it) is counted ("advisory"),
not judged; one without counts is counted as flagged. Prints
"scope=S backend=B runs=R valid=V flagged=F advisory=A count=C spread=D"; "FAIL: ..."
and exit 1 on an ok block out of bounds; "SKIP: ..." and exit 3 when no block was ok
(the last reason printed).
ADV_AT_LEAST=1 (47-perf-own-tests.sh): an ok block must count at least 2N; blocks that
count more than the smallest are counted ("over=") instead of failing (the module's
CPU-wide count while other programs share the CPU counts theirs too)."""
import gc
import os
import sys
import time

import simple_pmu

PY_SLACK = 2000
# Blocks run first and not judged: the first ones cost thousands more (the first
# measure() probes; the interpreter specialises its bytecode after a few runs), seen
# 16802 then 9411 for known_loop(1000).
WARMUP = 30
WARMUP_OK_S = 60.0


def main() -> int:
    cpu, scope, n, runs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.sched_setaffinity(0, {cpu})
    at_least = bool(os.environ.get("ADV_AT_LEAST"))
    gc.disable()  # a collection inside a block would add thousands of instructions
    valid, flagged, advisory, backend, reason = 0, 0, 0, None, None
    counts = []
    for _ in range(WARMUP):
        with simple_pmu.measure(scope=scope):
            simple_pmu.known_loop(n)
    # The driver beside perfchurn: reads may not have worked in a while (the probe
    # refused it; measure() probes again at most once a second): warm up until a block
    # is ok, for WARMUP_OK_S at most, and say how long that took.
    started = time.monotonic()
    while scope == "cpu" and time.monotonic() - started < WARMUP_OK_S:
        with simple_pmu.measure(scope=scope) as m:
            simple_pmu.known_loop(n)
        if m.ok:
            break
    waited = f" waited={time.monotonic() - started:.1f}s" if scope == "cpu" else ""
    for i in range(runs):
        with simple_pmu.measure(scope=scope) as m:
            simple_pmu.known_loop(n)
        backend = m.backend
        if not m.ok:
            flagged += 1
            reason = m.reason
            continue
        if m.exact is False:
            advisory += 1
            continue
        valid += 1
        if m.instructions < 2 * n:
            print(f"FAIL: measure(scope={scope!r}) backend {m.backend}: run {i} is ok with "
                  f"{m.instructions} instructions for known_loop({n}), below 2n")
            return 1
        counts.append(m.instructions)
    if not valid and not advisory:
        print(f"SKIP: measure(scope={scope!r}) never ok here (backend {backend}): {reason}")
        return 3
    if counts and not at_least:
        low, high = min(counts), max(counts)
        if high > low + PY_SLACK:
            print(f"FAIL: measure(scope={scope!r}) backend {backend}: ok blocks counted "
                  f"{low} to {high} instructions for known_loop({n}), more than "
                  f"{PY_SLACK} apart")
            return 1
        print(f"scope={scope} backend={backend} runs={runs} valid={valid} flagged={flagged} "
              f"advisory={advisory} count={low} spread={high - low}{waited}")
        return 0
    if at_least and counts:
        low = min(counts)
        print(f"scope={scope} backend={backend} runs={runs} valid={valid} flagged={flagged} "
              f"count={low} over={sum(c > low for c in counts)}")
        return 0
    print(f"scope={scope} backend={backend} runs={runs} valid={valid} flagged={flagged} "
          f"advisory={advisory} count=None{waited}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
