"""The simple-pmu command: status, read, mhz, bench (manual: docs/simple-pmu.1).

Exit status: 0 success; 1 the thing asked for cannot be done here (the message says
why; with --json also as a JSON error object on stdout); 2 bad arguments (the usage of
the command given); 141 standard output was closed early (as a command killed by
SIGPIPE: `simple-pmu status | head -1`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence

from simple_pmu import __version__, jsonout, reasons
from simple_pmu._extension import native, native_error
from simple_pmu._measure import COUNTER_BITS, PinnedCpu, Reader, first_read, open_reader
from simple_pmu._probe import COUNTER_BACKENDS, SCOPES, Backend, Report, probe
from simple_pmu.bench import DEFAULT_CALLS, DEFAULT_REPEATS, GOAL_RATIO, bench, paths_table
from simple_pmu.errors import CounterUnavailable, Error
from simple_pmu.mhz import CLOCKS, MhzResult, measure_mhz

EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE = 0, 1, 2
EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a command the signal killed
PROG = "simple-pmu"


def _unavailable(text: str, code: str = CounterUnavailable.code,
                 why: Sequence[str] = ()) -> CounterUnavailable:
    """What was asked cannot be done on this machine: exit 1 with the message."""
    return CounterUnavailable(text, code, why)


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
    # Each command's parser, so that an argument it does not know is reported with its
    # own usage (argparse leaves unknown arguments to the top-level parser).
    parser.set_defaults(subparsers=sub.choices)

    status = sub.add_parser("status", help="each counter backend: usable, or exactly why not")
    status.add_argument("--json", action="store_true", help="machine-readable report")

    read = sub.add_parser("read", help="one reading of each counter")
    read.add_argument("--backend", choices=COUNTER_BACKENDS,
                      help="insist on this backend (default: the best usable of the scope)")
    read.add_argument("--scope", choices=tuple(SCOPES),
                      help="thread (default, perf: this thread) or cpu (the module's "
                      "counters: every task on the CPU)")
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
    bench_p.add_argument("--json", action="store_true", help="print a JSON object")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub: dict[str, argparse.ArgumentParser] = args.subparsers
        sub[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


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
    lines.append("")
    for scope, call in (("thread", "measure()"), ("cpu", 'measure(scope="cpu")')):
        best = report.best("cycles", scope)
        lines.append(f"{call} uses: {best.name}" if best else
                     f"{call} uses: no counter backend (time only)")
    return "\n".join(lines)


def describe_counting(scope: str | None, rings: Sequence[str] | None) -> str:
    """What a count covers, in words: "this thread, user space"."""
    where = {"cpu": "every task on the CPU", "thread": "this thread"}.get(scope or "", "")
    if not where:
        return ""
    ring = "user and kernel" if rings and len(rings) > 1 else (rings[0] if rings else "")
    return f"{where}, {ring} space" if ring else f"{where}, rings not stated by the driver"


def _fact(value: object) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _details(backend: Backend) -> list[str]:
    head = backend.description
    if backend.usable and backend.counters:
        head += f"; reads {', '.join(backend.counters)}"
        counting = describe_counting(backend.scope, backend.rings)
        if counting:
            head += f" (counts {counting})"
    items = [head, *(reasons.as_reason(r).with_remedy() for r in backend.reasons),
             *(reasons.as_reason(n).with_remedy() for n in backend.notes)]
    facts = ", ".join(f"{k}={_fact(v)}" for k, v in backend.facts.items())
    if facts:
        items.append(f"facts: {facts}")
    return items


def cmd_status(args: argparse.Namespace) -> int:
    report = probe()
    if args.json:
        print(jsonout.dumps(jsonout.status_doc(report)))
    else:
        print(format_status(report, shutil.get_terminal_size((100, 24)).columns))
    return EXIT_OK


def reading(reader: Reader) -> dict[str, object]:
    """One reading of each counter of reader, with what the values are (the "read"
    document of the JSON contract without its head)."""
    assert native is not None
    values: dict[str, object] = {"backend": reader.backend, "cpu": None, "generation": None}
    group0 = reader.group.read() if reader.group is not None else None
    with PinnedCpu(reader) as pinned:  # the driver: a CPU where probe() verified reads
        values["cpu"] = pinned.cpu
        if reader.generation is not None:  # the driver: what the values belong to
            values["generation"] = reader.generation()
        instructions, cycles = first_read(reader)
        values["cycles"] = cycles if reader.cycles else None
        values["instructions"] = instructions if reader.instructions else None
        values["widths"] = {name: reader.widths.get(name, COUNTER_BITS) if present else None
                            for name, present in (("cycles", reader.cycles),
                                                  ("instructions", reader.instructions))}
        values["timer"] = native.tsc()
    notes: list[reasons.Reason] = []
    enabled = running = ratio = None
    if group0 is not None:  # perf: the group's times since it was opened
        enabled, running, ratio = group0.time_enabled, group0.time_running, group0.ratio
        if ratio is not None and ratio < 1:
            notes.append(reasons.PERF_MULTIPLEXED.format(
                percent=100 * ratio, running=running, enabled=enabled))
    values.update(scope=reader.scope, rings=None if reader.rings is None else list(reader.rings),
                  exact=reader.exact,
                  time_enabled_ns=enabled, time_running_ns=running, running_ratio=ratio,
                  reason=(reasons.as_reason(reader.reason).to_dict() if reader.reason
                          else None),
                  notes=[n.to_dict() for n in notes])
    return values


def cmd_read(args: argparse.Namespace) -> int:
    if native is None:
        raise _unavailable(native_error, reasons.NO_NATIVE.code)
    report = probe()
    reader = open_reader(report, args.backend, args.scope)
    if reader.backend is None:
        raise no_backend_error(report, reader.scope or "thread", reader.reason)
    try:
        values = reading(reader)
    finally:
        reader.close()
    if args.json:
        print(json.dumps(jsonout.reading_doc(values)))
        return EXIT_OK
    print(format_reading(values, reader.reason or ""))
    return EXIT_OK


def no_backend_error(report: Report, scope: str,
                     reason: reasons.Reason | None) -> CounterUnavailable:
    """read without a counter backend: each distinct reason once, with the backends of
    the scope that have it and its remedy; and, for the thread scope, whether the cpu
    scope would count."""
    grouped = report.grouped_reasons(scope)
    lines = [f"no counter backend usable for scope {scope}:"]
    seen: set[str] = set()  # a remedy shared by several reasons is given once
    for why, names in grouped:
        text = str(why) if why.remedy in seen else why.with_remedy()
        seen.add(why.remedy)
        lines.append(f"  {', '.join(names)}: {text}")
    if reason is not None and reason.remedy and not any(
            why.remedy == reason.remedy for why, _ in grouped):
        lines.append(f"  (fix: {reason.remedy})")
    error = CounterUnavailable("\n".join(lines), reasons.NO_COUNTER_BACKEND.code,
                               [why for why, _ in grouped])
    error.backends = tuple(names for _, names in grouped)
    return error


def format_reading(values: dict[str, object], reason: str) -> str:
    """The text form of a reading: counters as raw values with their width (only the
    difference of two readings means anything: a counter starts where perf or the
    hardware left it, e.g. near 2^64 on arm64 after perf used PMCCNTR_EL0)."""
    widths = values["widths"]
    assert isinstance(widths, dict)
    lines = [f"{'backend':<13} {values['backend']}"]
    if values["cpu"] is not None:
        lines.append(f"{'cpu':<13} {values['cpu']}")
    if values["generation"] is not None:
        lines.append(f"{'generation':<13} {values['generation']}")
    for name in ("cycles", "instructions"):
        value = values[name]
        shown = (f"{value} (raw {widths[name]}-bit counter value)" if value is not None
                 else "unavailable: " + (reason or "not provided"))
        lines.append(f"{name:<13} {shown}")
    lines.append(f"{'timer':<13} {values['timer']}")
    rings = values["rings"]
    scope = values["scope"]
    counting = describe_counting(scope if isinstance(scope, str) else None,
                                 rings if isinstance(rings, list) else None)
    lines.append(f"{'counts':<13} {counting}")
    if values["running_ratio"] is not None:
        lines.append(f"{'running':<13} {values['running_ratio']:.3f} of the time enabled "
                     f"(time_running {values['time_running_ns']} ns / time_enabled "
                     f"{values['time_enabled_ns']} ns)")
    notes = values["notes"]
    assert isinstance(notes, list)
    lines += [f"note: {n['text']}" for n in notes]
    lines.append("Counter values are raw: only the difference of two readings on the same "
                 "counter means anything (modulo 2^width).")
    return "\n".join(lines)


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
        raise _unavailable(native_error, reasons.NO_NATIVE.code)
    result = measure_mhz(args.runs, args.clock)
    if args.json:
        print(json.dumps(jsonout.mhz_doc(result)))
    else:
        print(format_mhz(result))
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    if native is None:
        raise _unavailable(native_error, reasons.NO_NATIVE.code)
    result = bench(probe(), args.calls, args.repeats)
    if args.json:
        print(json.dumps(jsonout.bench_doc(result)))
        return EXIT_OK
    name_w = max(len(result.read_name), len("time.perf_counter_ns()"))
    print(f"{result.read_name:<{name_w}}  {result.read_ns:7.1f} ns/call")
    print(f"{'time.perf_counter_ns()':<{name_w}}  {result.perf_counter_ns:7.1f} ns/call")
    print(f"{'loop alone':<{name_w}}  {result.loop_ns:7.1f} ns/iteration")
    print(f"ratio {result.ratio:.2f} (read / time.perf_counter_ns(), loop included; "
          f"goal <= {GOAL_RATIO}; fastest of {args.repeats} x {result.calls} calls)")
    print()
    print(f"Python read paths, {args.repeats} x {result.calls} calls, loop included:")
    for line in paths_table(result.paths):
        print(line)
    return EXIT_OK


COMMANDS = {"status": cmd_status, "read": cmd_read, "mhz": cmd_mhz, "bench": cmd_bench}


def run(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except Error as exc:
        if getattr(args, "json", False):
            print(json.dumps(jsonout.error_doc(args.command, exc)))
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ValueError) else EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """run(), and a reader that closed the pipe early ends the command quietly.

    As the Python documentation (signal: Note on SIGPIPE) recommends: catch
    BrokenPipeError, flushing inside the try so that a write still buffered fails here
    and not at exit, then point stdout at /dev/null so that the interpreter's own flush
    at exit does not fail again. SIGPIPE keeps Python's SIG_IGN."""
    if sys.stdout is None:  # started with descriptor 1 closed (`simple-pmu status >&-`)
        print(f"{PROG}: standard output is closed: nothing to write the result to",
              file=sys.stderr)
        return EXIT_UNAVAILABLE
    try:
        try:
            return run(argv)
        finally:
            sys.stdout.flush()  # also after argparse's SystemExit (--help | head -0)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_PIPE
    except OSError as exc:  # e.g. EBADF, ENOSPC: the output could not be written
        print(f"{PROG}: cannot write to standard output: {exc}", file=sys.stderr)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_UNAVAILABLE


if __name__ == "__main__":
    sys.exit(main())
