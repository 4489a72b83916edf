"""`invoke bench`'s frequency comparison: Willy Tarreau's mhz tool (the seed) beside
`simple-pmu mhz`.

Both time a dependent-XOR loop with a clock, so whatever else the machine runs moves
both, by different amounts: no test can assert that they agree (issue 21). Here each
tool runs ROUNDS times (a round is the median of RUNS measurements, as each tool prints
it); the report gives each tool's median, min, max and spread (max - min over the
median), the gap between the medians, and a verdict only where the spreads allow one:

- no verdict with fewer than MIN_ROUNDS rounds, or where a tool's spread is wider than
  SPREAD_LIMIT (the machine was too busy to tell);
- otherwise agree where the medians are within AGREE of each other, disagree where the
  two ranges do not overlap (under this load: the tools may react to load differently),
  and no verdict where they overlap but the medians are further apart.

The seed tool lives beside the checkout (../shared/reference/seeds/mhz/mhz.c): without
it the comparison is listed as not run, with that reason. The decidable cross-check of
the method is in the arm64 guest under -icount (tests/guest/arm64/29-mhz-tool.sh), where
both tools time their loops on QEMU's virtual clock (and 29-python-mhz.sh sets the method
against the cycle counter).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pmubuild.common.errors import PipelineError
from pmubuild.common.seeds import SEEDS

SEED_MHZ = SEEDS / "mhz" / "mhz.c"
ROUNDS = 5
RUNS = 5
AGREE = 0.01  # medians this close agree (where the spreads allow a verdict)
SPREAD_LIMIT = 0.05  # a tool whose rounds spread wider than this gives no verdict
MIN_ROUNDS = 3  # fewer rounds show no spread at all


@dataclass(frozen=True)
class Tool:
    """One tool's rounds: the MHz each round printed and how long each round took."""

    name: str
    mhz: tuple[float, ...]
    wall_s: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.mhz)

    @property
    def spread(self) -> float:
        """(max - min) / median of the rounds' figures."""
        if self.median <= 0:
            raise PipelineError(f"{self.name}: a median of {self.median} MHz")
        return (max(self.mhz) - min(self.mhz)) / self.median

    def summary(self) -> dict[str, object]:
        return {"name": self.name, "rounds": list(self.mhz), "median": self.median,
                "min": min(self.mhz), "max": max(self.mhz), "spread": self.spread,
                "median_wall_s": statistics.median(self.wall_s)}


def verdict(seed: Tool, ours: Tool) -> tuple[str, str]:
    """(agree | disagree | no verdict, why) from the two tools' rounds."""
    gap = abs(ours.median - seed.median) / seed.median
    rounds = min(len(seed.mhz), len(ours.mhz))
    if rounds < MIN_ROUNDS:
        return "no verdict", (f"medians {gap:.2%} apart, but {rounds} round(s) show no "
                              f"spread (at least {MIN_ROUNDS} needed)")
    wide = [t for t in (seed, ours) if t.spread > SPREAD_LIMIT]
    if wide:
        return "no verdict", (f"medians {gap:.2%} apart, but " +
                              ", ".join(f"{t.name} spread {t.spread:.1%}" for t in wide) +
                              f" (> {SPREAD_LIMIT:.0%}): the machine was too busy to tell")
    if gap <= AGREE:
        return "agree", (f"medians {gap:.2%} apart (<= {AGREE:.0%}), spreads "
                         f"{seed.spread:.1%} and {ours.spread:.1%}")
    if max(seed.mhz) < min(ours.mhz) or max(ours.mhz) < min(seed.mhz):
        return "disagree", (f"medians {gap:.2%} apart and the ranges do not overlap under "
                            f"this load, spreads {seed.spread:.1%} and {ours.spread:.1%}")
    return "no verdict", (f"medians {gap:.2%} apart, but the ranges overlap "
                          f"(spreads {seed.spread:.1%} and {ours.spread:.1%})")


def parse_seed(stdout: str, runs: int) -> float:
    """`mhz -c RUNS` prints one figure a line: their median."""
    try:
        values = [float(v) for v in stdout.split()]
    except ValueError:
        raise PipelineError(f"the mhz tool printed something else than figures: "
                            f"{stdout[:200]!r}") from None
    if len(values) != runs:
        raise PipelineError(f"the mhz tool printed {len(values)} figures, not {runs}")
    return statistics.median(values)


def compile_seed(out_dir: Path) -> Path | None:
    """The seed mhz tool built as published (gcc -O2), or None without the seeds."""
    if not SEED_MHZ.is_file():
        return None
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise PipelineError("no C compiler (gcc) to build the mhz tool: ./devenv installs it")
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "mhz"
    proc = subprocess.run([cc, "-O2", "-o", str(exe), str(SEED_MHZ)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise PipelineError(f"compiling {SEED_MHZ} failed:\n{proc.stderr}")
    return exe


def _timed(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise PipelineError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout, wall


def run_rounds(seed_exe: Path, pythonpath: Path, rounds: int = ROUNDS,
               runs: int = RUNS) -> tuple[Tool, Tool]:
    """Both tools, alternating round by round, so that a busy spell hits both."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    ours_argv = [sys.executable, "-m", "simple_pmu", "mhz", "--runs", str(runs), "--json"]
    seed_mhz: list[float] = []
    seed_wall: list[float] = []
    our_mhz: list[float] = []
    our_wall: list[float] = []
    for _ in range(rounds):
        out, wall = _timed([str(seed_exe), "-c", str(runs)])
        seed_mhz.append(parse_seed(out, runs))
        seed_wall.append(wall)
        out, wall = _timed(ours_argv, env)
        our_mhz.append(float(json.loads(out)["median_mhz"]))
        our_wall.append(wall)
    return (Tool("mhz tool", tuple(seed_mhz), tuple(seed_wall)),
            Tool("simple-pmu mhz", tuple(our_mhz), tuple(our_wall)))


def compare(seed: Tool, ours: Tool, runs: int = RUNS) -> dict[str, object]:
    word, why = verdict(seed, ours)
    return {"available": True, "runs": runs, "tools": [seed.summary(), ours.summary()],
            "gap": abs(ours.median - seed.median) / seed.median, "verdict": word,
            "why": why}


def measure(out_dir: Path, pythonpath: Path, rounds: int = ROUNDS) -> dict[str, object]:
    """The comparison as a JSON object, or available false with the reason."""
    exe = compile_seed(out_dir)
    if exe is None:
        return {"available": False,
                "reason": f"the seed mhz tool is not beside the checkout ({SEED_MHZ})"}
    return compare(*run_rounds(exe, pythonpath, rounds))


def report(doc: dict[str, object]) -> list[str]:
    if not doc.get("available"):
        return [f"CPU frequency, mhz tool vs simple-pmu mhz: not run: {doc['reason']}"]
    tools = doc["tools"]
    assert isinstance(tools, list)
    lines = [f"CPU frequency, mhz tool vs simple-pmu mhz ({len(tools[0]['rounds'])} rounds "
             f"of {doc['runs']} runs each)",
             f"  {'tool':<15} {'median':>9} {'min':>9} {'max':>9} {'spread':>7} "
             f"{'wall/round':>10}"]
    for t in tools:
        lines.append(f"  {t['name']:<15} {t['median']:9.1f} {t['min']:9.1f} {t['max']:9.1f} "
                     f"{t['spread']:7.1%} {t['median_wall_s']:9.2f}s")
    lines.append(f"  verdict: {doc['verdict']}: {doc['why']}")
    return lines
