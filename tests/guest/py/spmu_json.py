"""Validate simple-pmu --json output against the package's JSON Schema (run by
tests/guest/*/[0-9]*-json.sh, with Debian's python3-jsonschema in the guest).

    python3 spmu_json.py FILE COMMAND [KEY=VALUE ...] [-- FILE COMMAND ...]

For each FILE (one document, e.g. `simple-pmu status --json > FILE`): valid, of the
expected COMMAND (COMMAND-error: a failure of it), and every KEY=VALUE holds (a dotted
path into the document, the value compared as JSON: backend='"driver"'). Prints a line
per document; exits 1 at the first that fails. One process for all documents: importing
jsonschema costs seconds under TCG.
"""

import json
import sys

import jsonschema
from simple_pmu import jsonout


def lookup(doc: object, path: str) -> object:
    for key in path.split("."):
        if isinstance(doc, list):
            doc = doc[int(key)]
        elif isinstance(doc, dict):
            doc = doc[key]
        else:
            raise KeyError(path)
    return doc


def main() -> int:
    groups: list[list[str]] = [[]]
    for arg in sys.argv[1:]:
        if arg == "--":
            groups.append([])
        else:
            groups[-1].append(arg)
    for path, command, *checks in groups:
        with open(path) as f:
            if check(f.read(), command, checks):
                return 1
    return 0


def check(text: str, command: str, checks: list[str]) -> int:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        print(f"FAIL: not JSON ({exc}): {text[:200]!r}")
        return 1
    try:
        jsonschema.Draft202012Validator(jsonout.schema()).validate(doc)
    except jsonschema.ValidationError as exc:
        print(f"FAIL: {command}: {exc.message} at {list(exc.absolute_path)}")
        return 1
    want_error = command.endswith("-error")
    if doc["command"] != command.removesuffix("-error") or ("error" in doc) != want_error:
        print(f"FAIL: want a {command} document, got {doc['command']} "
              f"{'error' if 'error' in doc else ''}")
        return 1
    for check in checks:
        path, _, value = check.partition("=")
        got = lookup(doc, path)
        if got != json.loads(value):
            print(f"FAIL: {command}: {path} is {got!r}, want {value}")
            return 1
    if want_error:
        summary = f"error {doc['error']['code']}"
    elif command == "status":
        summary = "measure uses " + str(doc["measure"]["backend"]) + "; " + ", ".join(
            f"{b['name']} {'yes' if b['usable'] else 'no'}" for b in doc["backends"])
    elif command == "read":
        summary = (f"{doc['backend']} scope={doc['scope']} rings={doc['rings']} "
                   f"widths={doc['widths']} ratio={doc['running_ratio']}")
    else:
        summary = f"{doc['backend']} ratio {doc['ratio']:.2f}"
    print(f"{command}: schema {doc['schema']} valid: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
