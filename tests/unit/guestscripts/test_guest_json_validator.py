"""tests/guest/py/spmu_json.py, the validator the guests' *-json.sh scripts run, on the
host: it accepts a document the CLI really printed, and each of its checks fails on a
document that breaks it (schema, command, KEY=VALUE, not JSON)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
VALIDATOR = REPO / "tests/guest/py/spmu_json.py"
USERLIB = REPO / "userlib"


def run(tmp_path: Path, doc: object, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "doc.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return subprocess.run([sys.executable, str(VALIDATOR), str(path), *args],
                          capture_output=True, text=True, env={"PYTHONPATH": str(USERLIB)})


@pytest.fixture(scope="module")
def status_doc() -> dict:
    pytest.importorskip("jsonschema")
    proc = subprocess.run([sys.executable, "-m", "simple_pmu", "status", "--json"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(USERLIB)})
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.fail(f"simple-pmu status --json: {proc.returncode} {proc.stderr}")
    return json.loads(proc.stdout)


def test_accepts_what_the_cli_prints(tmp_path, status_doc):
    backend = json.dumps(status_doc["measure"]["backend"])
    proc = run(tmp_path, status_doc, "status", f"measure.backend={backend}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: schema 3 valid" in proc.stdout


@pytest.mark.parametrize("case", ["schema", "extra-member", "command", "value", "not-json"])
def test_each_check_can_fail(tmp_path, status_doc, case):
    doc: object = dict(status_doc)
    args = ["status"]
    if case == "schema":
        doc["schema"] = 4
    elif case == "extra-member":
        doc["unexpected"] = True
    elif case == "command":
        args = ["read"]
    elif case == "value":
        args.append('measure.backend="no-such-backend"')
    else:
        doc = "{not json"
    proc = run(tmp_path, doc, *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("FAIL"), proc.stdout
