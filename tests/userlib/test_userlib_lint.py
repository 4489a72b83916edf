"""`invoke lint` type-checks the userlib with mypy --strict, and that check can fail."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from userlib_helpers import REPO, USERLIB


def lint_command() -> list[str]:
    """The mypy command of tasks.py's lint task that covers the userlib."""
    text = (REPO / "tasks.py").read_text()
    found = re.findall(r'c\.run\("(mypy [^"]*userlib[^"]*)"', text)
    assert len(found) == 1, f"lint runs no (or several) mypy over userlib: {found}"
    return found[0].split()


def _tree(tmp_path):
    """The lint's inputs alone: the root pyproject (mypy strict) and the package."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(USERLIB / "simple_pmu", tmp_path / "userlib" / "simple_pmu",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return tmp_path


def _mypy(tree):
    cmd = lint_command()
    return subprocess.run([sys.executable, "-m", *cmd, "--cache-dir", str(tree / ".cache")],
                          cwd=tree, capture_output=True, text=True, timeout=600)


def test_lint_mypy_clean_and_fails_on_a_type_error(tmp_path):
    tree = _tree(tmp_path)
    clean = _mypy(tree)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Success: no issues found" in clean.stdout
    # The extension is typed through its stub: were it Any, this would pass.
    bench = tree / "userlib" / "simple_pmu" / "bench.py"
    bench.write_text(bench.read_text() + "\n\ndef _broken() -> None:\n"
                     "    assert native is not None\n    ticks: str = native.tsc()\n"
                     "    print(ticks)\n")
    broken = _mypy(tree)
    assert broken.returncode == 1, broken.stdout
    assert re.search(r'bench\.py:\d+: error: Incompatible types in assignment \(expression '
                     r'has type "int", variable has type "str"\)', broken.stdout), broken.stdout
