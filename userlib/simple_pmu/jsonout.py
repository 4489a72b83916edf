"""The JSON documents of `simple-pmu status|read|mhz|bench --json`: a versioned contract.

Every document is one object with "schema", "command" and "version" (of this library).
Versioning: SCHEMA_VERSION is raised only by an incompatible change (a member removed or
renamed, its type or meaning changed). Additions (a member, a reason code, a command)
keep it, so a consumer checks "schema" (refusing a number it does not know) and ignores
the members and codes it does not know; "version" says which library wrote the
document. The JSON Schema, schema/simple-pmu.schema.json in this package, describes
exactly the documents of the library that ships it (it admits no unknown member, so the
library's own tests catch any drift): validate a document with the schema of the library
that wrote it. docs/simple-pmu.1 (JSON OUTPUT) describes the fields and the reason codes.
Every reason, everywhere, has one shape: {"code", "text", "remedy"} (Reason.to_dict).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING

from simple_pmu import reasons
from simple_pmu.errors import Error

if TYPE_CHECKING:
    from simple_pmu._probe import Report
    from simple_pmu.bench import BenchResult
    from simple_pmu.mhz import MhzResult

SCHEMA_VERSION = 3  # 3: reasons carry a remedy; backend.reason an object; mhz; read.exact
SCHEMA_FILE = "simple-pmu.schema.json"


def schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) every document validates against."""
    text = resources.files("simple_pmu").joinpath("schema", SCHEMA_FILE).read_text()
    loaded: dict[str, object] = json.loads(text)
    return loaded


def _head(command: str) -> dict[str, object]:
    from simple_pmu import __version__

    return {"schema": SCHEMA_VERSION, "command": command, "version": __version__}


def status_doc(report: Report) -> dict[str, object]:
    return _head("status") | report.to_dict()


def reading_doc(reading: dict[str, object]) -> dict[str, object]:
    return _head("read") | reading


def bench_doc(result: BenchResult) -> dict[str, object]:
    return _head("bench") | result.to_dict()


def mhz_doc(result: MhzResult) -> dict[str, object]:
    return _head("mhz") | {
        "clock": result.clock,
        "median_mhz": result.median_mhz,
        "median_timer_mhz": result.median_timer_mhz,
        "median_cycles_mhz": result.median_cycles_mhz,
        "cycle_backend": result.cycle_backend,
        "cycle_reason": (reasons.as_reason(result.cycle_reason).to_dict()
                         if result.cycle_reason else None),
        "runs": [vars(r) for r in result.runs],
    }


def error_doc(command: str, error: Error) -> dict[str, object]:
    """What a command that failed prints with --json (on stdout; it exits non-zero):
    the error as a reason (its remedy: the first reason's) and every reason."""
    why = [reasons.as_reason(r) for r in getattr(error, "reasons", ())]
    remedy = next((r.remedy for r in why if r.remedy),
                  getattr(error.args[0], "remedy", "") if error.args else "")
    items: list[dict[str, object]] = [dict(r.to_dict()) for r in why]
    owners = getattr(error, "backends", ())
    if len(owners) == len(items):  # grouped: each reason once, with its backends
        items = [item | {"backends": list(names)} for item, names in zip(items, owners,
                                                                         strict=True)]
    return _head(command) | {
        "error": reasons.Reason(error.code, str(error), remedy).to_dict(),
        "reasons": items,
    }


def dumps(doc: dict[str, object]) -> str:
    return json.dumps(doc, indent=2)
