"""Validate simple-pmu --json output read from stdin against the package's JSON Schema
(run by tests/guest/*/[0-9]*-json.sh, with Debian's python3-jsonschema in the guest).

    simple-pmu status --json | python3 spmu_json.py status [KEY=VALUE ...]

Exits 0 and prints a one-line summary when the document is valid, is of the expected
command (or, with "error", a failure of it) and has every KEY=VALUE given (a dotted path
into the document, the value compared as JSON: backend=\"driver\", scope=\"cpu\").
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
    command, *checks = sys.argv[1:]
    text = sys.stdin.read()
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
