"""The JSON documents of `simple-pmu status|read|bench --json`: a versioned contract.

Every document is one object with "schema" (SCHEMA_VERSION: raised with any change of
the documents, an added field or reason code included, because the schema is exact: it
admits no unknown member, so every document validates against its own version's schema),
"command" and "version" (of this library). The JSON Schema is
schema/simple-pmu.schema.json in this package; docs/simple-pmu.1 (JSON OUTPUT)
describes the fields and lists the reason codes.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING

from simple_pmu import reasons
from simple_pmu.errors import Error

if TYPE_CHECKING:
    from simple_pmu.bench import BenchResult
    from simple_pmu.probe import Report

SCHEMA_VERSION = 2
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


def error_doc(command: str, error: Error) -> dict[str, object]:
    """What a command that failed prints with --json (on stdout; it exits non-zero)."""
    why = getattr(error, "reasons", ())
    return _head(command) | {
        "error": {"code": error.code, "text": str(error)},
        "reasons": [reasons.as_reason(r).to_dict() for r in why],
    }


def dumps(doc: dict[str, object]) -> str:
    return json.dumps(doc, indent=2)
