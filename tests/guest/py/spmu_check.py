"""In-guest checks of simple_pmu (run by tests/guest/*/[0-9]*-python-*.sh).

Each subcommand prints what it saw and exits 0 when it holds, 1 when it does not.
"""

import json
import os
import subprocess
import sys

import simple_pmu


def fail(msg: str) -> None:
    print(f"FAIL: {msg}")
    sys.exit(1)


def driver():
    return simple_pmu.probe().get("driver")


def absent() -> None:
    """Before insmod: the driver backend is unusable, with the reason."""
    d = driver()
    print(f"driver usable={d.usable}: {d.reason}")
    if d.usable or "not loaded" not in d.reason:
        fail("want the driver reported unusable because the module is not loaded")


def present() -> None:
    d = driver()
    print(f"driver usable={d.usable} counters={d.counters} {d.reason or ''}")
    if not d.usable or "cycles" not in d.counters or "instructions" not in d.counters:
        fail("want the driver usable with cycles and instructions")


def exact() -> None:
    """measure() around the extension's known loop: 2 instructions per iteration plus one
    fixed overhead, the same on every run (QEMU -icount shift=0 counts exactly)."""
    overheads = set()
    for n in (1000, 100000):
        for _ in range(10):
            with simple_pmu.measure("driver") as m:
                simple_pmu.known_loop(n)
            if m.instructions is None or m.cycles is None:
                fail(f"no reading: {m}")
            overheads.add(m.instructions - simple_pmu.KNOWN_LOOP_INSNS_PER_ITER * n)
        print(f"n={n}: instructions={m.instructions} cycles={m.cycles} time_ns={m.time_ns}")
    if len(overheads) != 1:
        fail(f"overhead not constant: {sorted(overheads)}")
    c = overheads.pop()
    if not 0 < c < 10000:
        fail(f"implausible fixed overhead {c}")
    print(f"instructions = 2n + {c} on all 20 runs")


def unload_alive() -> None:
    """rmmod while this process holds a reader: the next probe says gone, no crash."""
    present()
    with simple_pmu.measure("driver") as m:
        simple_pmu.known_loop(1000)
    print(f"before rmmod: {m.instructions} instructions")
    rc = subprocess.run(["rmmod", "simple-pmu"]).returncode
    if rc != 0:
        fail(f"rmmod exit {rc}")
    report = simple_pmu.probe()
    d = report.get("driver")
    print(f"after rmmod: driver usable={d.usable}: {d.reason}")
    if d.usable or "not loaded" not in d.reason:
        fail("probe after rmmod does not report the module gone")
    with simple_pmu.measure() as m2:
        simple_pmu.known_loop(1000)
    print(f"measure() now uses {m2.backend}; pid {os.getpid()} alive")


def status_json() -> None:
    out = subprocess.run(["simple-pmu", "status", "--json"], capture_output=True, text=True)
    data = json.loads(out.stdout)
    names = [b["name"] for b in data["backends"]]
    print(f"status --json: rc={out.returncode} backends={names}")
    if not {"driver", "timer"} <= set(names):
        fail("status --json lacks the driver or timer backend")
    timer = next(b for b in data["backends"] if b["name"] == "timer")
    if not timer["usable"]:
        fail(f"timer backend unusable: {timer}")


if __name__ == "__main__":
    {"absent": absent, "present": present, "exact": exact, "unload-alive": unload_alive,
     "status-json": status_json}[sys.argv[1]]()
