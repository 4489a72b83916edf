"""The JSON contract: documents of every kind validate against the shipped schema, and the
schema rejects what it must (a sentinel among facts, a code-less reason, a missing field).

Documents come from the real probe on this machine and from the fake arm64 driver of
test_userlib_driver_abi (a usable driver, a reading near 2^64), so that the usable shapes
are checked on a host without a PMU too. The guests validate the real ones
(tests/guest/*/[0-9]*-json.sh).
"""

from __future__ import annotations

import copy
import importlib
import itertools
import os

import jsonschema
import pytest
from test_userlib_driver_abi import arm64_cpu, fake, fake_reads, mods  # noqa: F401
from userlib_helpers import validate

CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture
def jsonout(simple_pmu):
    return importlib.import_module("simple_pmu.jsonout")


def test_schema_is_valid_and_shipped(jsonout):
    jsonschema.Draft202012Validator.check_schema(jsonout.schema())
    assert jsonout.schema()["$defs"]["status"]["properties"]["schema"] == {
        "const": jsonout.SCHEMA_VERSION, "description": "version of this contract"}


def test_status_here(simple_pmu, jsonout):
    doc = jsonout.status_doc(simple_pmu.probe())
    validate(doc)
    reasons = importlib.import_module("simple_pmu.reasons")
    known = reasons.all_codes()
    for backend in doc["backends"]:
        for item in backend["reasons"] + backend["notes"]:
            assert item["code"] in known, item


def test_status_with_a_usable_arm64_driver(fake, mods, fake_reads, jsonout):  # noqa: F811
    """The driver usable on every CPU (fake sysfs, fake reads): scope cpu, rings user."""
    backend = mods["probe"].probe_driver(arm64_cpu(mods))
    assert backend.usable, backend.reasons
    report = mods["probe"].Report(arm64_cpu(mods), (backend, *(
        mods["probe"].Backend(n, n, False, (mods["reasons"].NO_TSC.format(),))
        for n in ("perf-rdpmc", "perf-read", "timer"))))
    doc = jsonout.status_doc(report)
    validate(doc)
    driver = doc["backends"][0]
    assert (driver["scope"], driver["rings"]) == ("cpu", ["user"])
    assert driver["facts"]["verified_cpus"] == CPUS == driver["cpus"]
    # measure() counts the thread (perf, unusable here); the driver only when asked.
    assert doc["measure"]["backend"] is None
    assert doc["measure"]["reason"]["code"] == "no_counter_backend"
    assert doc["measure"]["reason"]["text"].endswith("every task on the CPU with driver")
    fake.attr("ring", 3)
    assert mods["probe"].probe_driver(arm64_cpu(mods)).rings == ("user", "kernel")


def test_reading_near_2_to_the_64(fake, mods, fake_reads, simple_pmu, jsonout,  # noqa: F811
                                  monkeypatch):
    """`read` of the arm64 driver: a raw PMCCNTR value near 2^64 with its width."""
    cli = importlib.import_module("simple_pmu.cli")
    native = simple_pmu.native
    monkeypatch.setattr(native, "ARCH", "aarch64")
    monkeypatch.setattr(native, "guard", lambda: None)
    monkeypatch.setattr(native, "driver_indices", lambda: (CPUS[0], 31, 5))
    monkeypatch.setattr(native, "driver_generation", lambda: 77)
    near = itertools.count(18446744071596359266, 1000)  # seen in a guest after perf
    monkeypatch.setattr(native, "driver_cycles", lambda: next(near))
    backend = mods["probe"].probe_driver(arm64_cpu(mods))
    report = mods["probe"].Report(arm64_cpu(mods), (backend,))
    reader = mods["measure"].open_reader(report, "driver")
    values = cli.reading(reader)
    doc = jsonout.reading_doc(values)
    validate(doc)
    assert 18446744071596359266 < doc["cycles"] < 2**64
    assert doc["widths"] == {"cycles": 64, "instructions": 32}
    assert (doc["scope"], doc["rings"], doc["generation"]) == ("cpu", ["user"], 77)
    assert doc["running_ratio"] is None
    text = cli.format_reading(values, "")
    assert f"cycles        {doc['cycles']} (raw 64-bit counter value)" in text
    assert "only the difference of two readings" in text


def test_error_document(simple_pmu, jsonout):
    errors = importlib.import_module("simple_pmu.errors")
    reasons = importlib.import_module("simple_pmu.reasons")
    why = (reasons.DRIVER_NOT_LOADED.format(path="/x"),)
    doc = jsonout.error_doc("read", errors.CounterUnavailable("driver: gone", why[0].code, why))
    validate(doc)
    assert doc["error"] == {"code": "driver_not_loaded", "text": "driver: gone",
                            "remedy": why[0].remedy}
    assert doc["error"]["remedy"].startswith("as root: modprobe simple-pmu")


@pytest.mark.parametrize("breakage", [
    "sentinel_fact", "codeless_reason", "missing_scope", "wrong_schema", "negative_count",
    "unknown_fact"])
def test_schema_rejects(simple_pmu, jsonout, breakage):
    """The validation above can fail: each breakage of a real document is refused."""
    doc = copy.deepcopy(jsonout.status_doc(simple_pmu.probe()))
    driver = doc["backends"][0]
    if breakage == "sentinel_fact":
        driver["facts"]["verified_cpus"] = "none"
    elif breakage == "codeless_reason":
        driver["notes"].append("a note without a code")
    elif breakage == "missing_scope":
        del driver["scope"]
    elif breakage == "wrong_schema":
        doc["schema"] = jsonout.SCHEMA_VERSION + 1
    elif breakage == "negative_count":
        doc = jsonout.reading_doc({"backend": "perf-read", "cpu": None, "generation": None,
                                   "cycles": -1, "instructions": None,
                                   "widths": {"cycles": 64, "instructions": None},
                                   "timer": 1, "scope": "thread", "rings": ["user"],
                                   "time_enabled_ns": 1, "time_running_ns": 1,
                                   "running_ratio": 1.0, "reason": None, "notes": []})
    elif breakage == "unknown_fact":
        driver["facts"]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_reason_codes():
    """Every reason has a code, its constant's name, all distinct; a Reason is its text."""
    reasons = importlib.import_module("simple_pmu.reasons")
    templates = reasons.all_templates()
    codes = [t.code for t in templates.values()]
    assert len(codes) == len(set(codes)) > 40
    for name, template in templates.items():
        assert template.code == name.lower()
    reason = reasons.DRIVER_NOT_LOADED.format(path="/p")
    assert reason == "simple-pmu module not loaded: /p does not exist"
    assert reason.code == "driver_not_loaded"
    assert reason.extended(" (more)").code == "driver_not_loaded"
    assert "; ".join([reason, reason]).count("/p") == 2


def test_fake_reads_advance(fake_reads):  # noqa: F811
    """(The fixture's reads count, or the usable-driver documents above would be vacuous.)"""
    first = fake_reads.driver_cycles()
    assert fake_reads.driver_cycles() > first
