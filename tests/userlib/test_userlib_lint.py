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


def test_lint_is_strict_and_covers_pmubuild(tmp_path):
    # Both packages are checked, and strictly: an unannotated function, which plain
    # mypy accepts, fails the lint's command.
    text = (REPO / "tasks.py").read_text()
    assert re.search(r'c\.run\("mypy pmubuild"', text), "lint runs no mypy over pmubuild"
    tree = _tree(tmp_path)
    mod = tree / "userlib" / "simple_pmu" / "timer.py"
    mod.write_text(mod.read_text() + "\n\ndef _untyped(x):\n    return x\n")
    broken = _mypy(tree)
    assert broken.returncode == 1, broken.stdout
    assert re.search(r"timer\.py:\d+: error: Function is missing a type annotation",
                     broken.stdout), broken.stdout
