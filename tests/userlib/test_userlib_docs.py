"""docs/simple-pmu.1 renders cleanly and lists every reason probe() can give."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess

import pytest
from userlib_helpers import REPO, USERLIB

MAN = REPO / "docs" / "simple-pmu.1"


def load_reasons():
    """reasons.py alone: it needs only the standard library."""
    spec = importlib.util.spec_from_file_location("reasons", USERLIB / "simple_pmu" /
                                                  "reasons.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def normalise(text: str) -> str:
    text = re.sub(r".\x08", "", text)  # grotty's overstrike bold and underline
    for fancy, plain in (("\u2010", "-"), ("\u2212", "-"), ("\u2018", "'"), ("\u2019", "'"),
                         ("\u201c", '"'), ("\u201d", '"')):
        text = text.replace(fancy, plain)
    return " ".join(text.split())


@pytest.fixture(scope="module")
def rendered():
    if shutil.which("groff") is None:
        pytest.fail("groff is not installed (Debian groff-base; ./devenv installs it)")
    # A very long line length: no wrapping, so no hyphenation inside the messages.
    res = subprocess.run(["groff", "-mandoc", "-Tutf8", "-rLL=2000n", "-P-c", str(MAN)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return normalise(res.stdout)


def test_renders_without_warnings():
    # The page is mdoc: -mandoc picks its macro set (groff 1.23, Debian 13's, no longer
    # does that for -man).
    res = subprocess.run(["groff", "-mandoc", "-Tutf8", "-ww", "-z", str(MAN)],
                         capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_sections(rendered):
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS", "EXAMPLES",
                    "DIAGNOSTICS", "SECURITY CONSIDERATIONS", "SEE ALSO"):
        assert f" {section} " in f" {rendered} ", section
    assert "simple-pmu(4)" in rendered


def _literal_parts(template: str) -> list[str]:
    return [p.strip() for p in re.split(r"\{[^}]*\}", template) if p.strip()]


def test_every_reason_is_documented(rendered):
    reasons = load_reasons()
    templates = reasons.all_templates()
    assert len(templates) > 25
    for name, template in templates.items():
        for part in _literal_parts(template.text):
            assert normalise(part) in rendered, f"{name}: {part!r} not in DIAGNOSTICS"
        # Each reason's code stands beside it in DIAGNOSTICS, and is its name.
        assert template.code == name.lower()
        assert f"Code: {template.code}" in rendered, f"{name}: code not documented"


def test_every_schema_field_is_documented(rendered):
    """JSON OUTPUT names every property the schema defines."""
    import json

    schema = json.loads((USERLIB / "simple_pmu" / "schema" /
                         "simple-pmu.schema.json").read_text())
    for name, definition in schema["$defs"].items():
        for prop in definition.get("properties", {}):
            assert prop in rendered, f"{name}.{prop} not in the man page"


def test_every_errno_meaning_is_documented(rendered):
    reasons = load_reasons()
    for err, meaning in reasons.PERF_ERRNO_MEANINGS.items():
        name = reasons.errno_name(err)
        assert f" {name} " in rendered
        for part in _literal_parts(meaning):
            assert normalise(part) in rendered, f"{name}: {part!r}"
