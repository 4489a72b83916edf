"""The simple-pmu command: status, read, mhz, bench (manual: docs/simple-pmu.1).

Exit status: 0 success; 1 the thing asked for cannot be done here (the message says
why); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from collections.abc import Sequence

from simple_pmu import __version__
from simple_pmu.bench import DEFAULT_CALLS, DEFAULT_REPEATS, GOAL_RATIO, bench
from simple_pmu.measure import CounterUnavailable, PinnedCpu, first_read, open_reader
from simple_pmu.mhz import CLOCKS, MhzResult, measure_mhz
from simple_pmu.native import native, native_error
from simple_pmu.probe import COUNTER_BACKENDS, Backend, Report, probe

EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE = 0, 1, 2
PROG = "simple-pmu"


class Unavailable(Exception):
    """What was asked cannot be done on this machine; exit 1 with the message."""


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Read CPU cycle and instruction counters; say why not.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    status = sub.add_parser("status", help="each counter backend: usable, or exactly why not")
    status.add_argument("--json", action="store_true", help="machine-readable report")

    read = sub.add_parser("read", help="one reading of each counter")
    read.add_argument("--backend", choices=COUNTER_BACKENDS,
                      help="insist on this backend (default: the best usable)")
    read.add_argument("--json", action="store_true", help="print a JSON object")

    mhz = sub.add_parser("mhz", help="CPU frequency by the dependent-XOR method")
    mhz.add_argument("--runs", type=_positive_int, default=1, metavar="N",
                     help="measurements after one calibration; the median is printed "
                     "(default: 1)")
    mhz.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                     help="time runs by thread CPU time (default) or CLOCK_MONOTONIC")
    mhz.add_argument("--json", action="store_true", help="print a JSON object")

    bench_p = sub.add_parser("bench", help="cost of a counter read vs time.perf_counter_ns()")
    bench_p.add_argument("--calls", type=_positive_int, default=DEFAULT_CALLS, metavar="N",
                         help=f"calls per timing (default: {DEFAULT_CALLS})")
    bench_p.add_argument("--repeats", type=_positive_int, default=DEFAULT_REPEATS,
                         metavar="N", help=f"timings, fastest kept (default: {DEFAULT_REPEATS})")
    return parser


def _wrap(text: str, indent: int, width: int) -> list[str]:
    return textwrap.wrap(text, width=max(40, width - indent), break_on_hyphens=False) or [""]


def format_status(report: Report, width: int = 100) -> str:
    cpu = report.cpu
    hv = f", hypervisor {cpu.hypervisor}" if cpu.hypervisor else ""
    lines = [f"{cpu.arch}: {cpu.vendor} {cpu.model}{hv}"]
    if report.native_error:
        lines.append(f"warning: {report.native_error}")
    lines.append("")
    name_w = max(len(b.name) for b in report.backends)
    lines.append(f"{'BACKEND':<{name_w}}  USABLE  DETAILS")
    pad = " " * (name_w + 10)
    for backend in report.backends:
        details = _details(backend)
        first, *rest = details
        wrapped = _wrap(first, len(pad), width)
        lines.append(f"{backend.name:<{name_w}}  {'yes' if backend.usable else 'no':<6}  "
                     f"{wrapped[0]}")
        lines += [pad + w for w in wrapped[1:]]
        for item in rest:
            for i, w in enumerate(_wrap(item, len(pad) + 2, width)):
                lines.append(pad + ("- " if i == 0 else "  ") + w)
    best = report.best("cycles")
    lines.append("")
    lines.append(f"measure() uses: {best.name}" if best else
                 "measure() uses: no counter backend (time only)")
    return "\n".join(lines)


def _details(backend: Backend) -> list[str]:
    head = backend.description
    if backend.usable and backend.counters:
        head += f"; reads {', '.join(backend.counters)}"
    items = [head, *backend.reasons, *backend.notes]
    facts = ", ".join(f"{k}={v}" for k, v in backend.facts.items())
    if facts:
        items.append(f"facts: {facts}")
    return items


def cmd_status(args: argparse.Namespace) -> int:
    report = probe()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(format_status(report, shutil.get_terminal_size((100, 24)).columns))
    return EXIT_OK


def cmd_read(args: argparse.Namespace) -> int:
    if native is None:
        raise Unavailable(native_error)
    report = probe()
    try:
        reader = open_reader(report, args.backend)
    except CounterUnavailable as exc:
        raise Unavailable(f"backend {exc}") from None
    if reader.backend is None:
        raise Unavailable(reader.reason)
    assert native is not None
    values: dict[str, object] = {"backend": reader.backend}
    try:
        with PinnedCpu(reader) as pinned:  # the driver: a CPU where probe() verified reads
            if pinned.cpu is not None:
                values["cpu"] = pinned.cpu
            if reader.generation is not None:  # the driver: what the values belong to
                values["generation"] = reader.generation()
            instructions, cycles = first_read(reader)
            values["cycles"] = cycles if reader.cycles else None
            values["instructions"] = instructions if reader.instructions else None
            values["timer"] = native.tsc()
    except CounterUnavailable as exc:
        raise Unavailable(f"backend {exc}") from None
    finally:
        reader.close()
    if args.json:
        print(json.dumps(values))
        return EXIT_OK
    for key, value in values.items():
        shown = "unavailable: " + (reader.reason or "not provided") if value is None else value
        print(f"{key:<13} {shown}")
    return EXIT_OK


def format_mhz(result: MhzResult) -> str:
    lines = []
    for run in result.runs:
        line = (f"count={run.count} t50={run.ns_short / 1e6:.3f}ms "
                f"t250={run.ns_long / 1e6:.3f}ms cpu_MHz={run.mhz:.3f} "
                f"timer_MHz={run.timer_mhz:.3f}")
        if run.cycles_mhz is not None:
            line += f" cycles_MHz={run.cycles_mhz:.3f} cycles/xor={run.cycles_per_xor:.4f}"
        lines.append(line)
    lines.append(f"median cpu_MHz={result.median_mhz:.3f} over {len(result.runs)} run(s), "
                 f"clock {result.clock}")
    if result.median_cycles_mhz is not None:
        lines.append(f"cycle counter ({result.cycle_backend}): median "
                     f"{result.median_cycles_mhz:.3f} MHz")
    else:
        lines.append("cycle counter: none usable ('simple-pmu status' says why)")
    return "\n".join(lines)


def cmd_mhz(args: argparse.Namespace) -> int:
    if native is None:
        raise Unavailable(native_error)
    result = measure_mhz(args.runs, args.clock)
    if args.json:
        print(json.dumps({
            "clock": result.clock,
            "median_mhz": result.median_mhz,
            "median_timer_mhz": result.median_timer_mhz,
            "median_cycles_mhz": result.median_cycles_mhz,
            "cycle_backend": result.cycle_backend,
            "cycle_reason": result.cycle_reason or None,
            "runs": [vars(r) for r in result.runs],
        }))
    else:
        print(format_mhz(result))
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    if native is None:
        raise Unavailable(native_error)
    result = bench(probe(), args.calls, args.repeats)
    name_w = max(len(result.read_name), len("time.perf_counter_ns()"))
    print(f"{result.read_name:<{name_w}}  {result.read_ns:7.1f} ns/call")
    print(f"{'time.perf_counter_ns()':<{name_w}}  {result.perf_counter_ns:7.1f} ns/call")
    print(f"{'loop alone':<{name_w}}  {result.loop_ns:7.1f} ns/iteration")
    print(f"ratio {result.ratio:.2f} (read / time.perf_counter_ns(), loop included; "
          f"goal <= {GOAL_RATIO}; fastest of {args.repeats} x {result.calls} calls)")
    return EXIT_OK


COMMANDS = {"status": cmd_status, "read": cmd_read, "mhz": cmd_mhz, "bench": cmd_bench}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except Unavailable as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
