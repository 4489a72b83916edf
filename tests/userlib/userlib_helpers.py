"""Paths and build commands shared by the userlib tests and their fixtures."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
USERLIB = REPO / "userlib"
INCLUDE = REPO / "include"
PY_INCLUDE = sysconfig.get_paths()["include"]
SCHEMA = USERLIB / "simple_pmu" / "schema" / "simple-pmu.schema.json"


def validate(doc: object) -> None:
    """doc against the shipped JSON Schema (jsonschema.ValidationError if it breaks it).
    jsonschema is a dev dependency: a missing one is an error, not a skip."""
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


def native_build_cmd(cc: str, out: Path, py_include: list[str]) -> list[str]:
    return [cc, "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
            "-Wno-missing-field-initializers", "-Werror", "-shared", "-fPIC",
            *(f"-I{d}" for d in py_include), f"-I{INCLUDE}",
            str(USERLIB / "simple_pmu" / "_native.c"), "-o", str(out)]


class FakeDriver:
    """A directory laid out as the arm64 driver's simple-pmu0 (drivers/common/sysfs_dev.c,
    drivers/arm64/pmu_sysfs.c): top-level attributes and one cpuN/ per CPU. Every value
    ends in a newline, as the driver's do. Placing a CPU gives it a new generation,
    unique across CPUs, as the driver does."""

    def __init__(self, root: Path, ncpus: int, events: str = "0x8", event_width: int = 32,
                 user_access: int = 1, pmu_version: int = 4, recheck_ms: int = 100) -> None:
        self.dir = root / "simple-pmu0"
        self.dir.mkdir(parents=True)
        self.next_generation = 1_000_000
        self.ncpus = ncpus
        for name, value in (("pmu_version", pmu_version), ("num_counters", 6),
                            ("event_width", event_width), ("user_access", user_access),
                            ("ring", 2), ("events", events), ("recheck_ms", recheck_ms),
                            ("cpus", f"0-{ncpus - 1}")):
            self.attr(name, value)
        nevents = 0 if events == "none" else len(events.split(","))
        for cpu in range(ncpus):
            (self.dir / f"cpu{cpu}").mkdir()
            for name in ("interventions", "kvm_deferrals", "checks"):
                self.cpu_attr(cpu, name, 0)
            self.place(cpu, 31, list(range(5, 5 - nevents, -1)))

    def attr(self, name: str, value: object) -> None:
        (self.dir / name).write_text(f"{value}\n")

    def cpu_attr(self, cpu: int, name: str, value: object) -> None:
        (self.dir / f"cpu{cpu}" / name).write_text(f"{value}\n")

    def place(self, cpu: int, cycle: int, events: list[int]) -> int:
        """Publish cpu's indices with a new generation; returns the generation."""
        self.cpu_attr(cpu, "cycle_index", cycle)
        self.cpu_attr(cpu, "event_index", " ".join(map(str, events)))
        return self.bump(cpu)

    def bump(self, cpu: int) -> int:
        """A new generation for cpu only (e.g. perf reloaded a 32-bit counter)."""
        self.next_generation += 1
        self.cpu_attr(cpu, "generation", self.next_generation)
        self.attr("generation", self.next_generation)
        return self.next_generation

    def generation(self, cpu: int) -> int:
        return int((self.dir / f"cpu{cpu}" / "generation").read_text())
