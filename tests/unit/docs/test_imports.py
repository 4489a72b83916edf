"""pmubuild's shape: every module imports alone, no import circle, packages in the layers
pmubuild/__init__.py lists, kbuild standing alone as DKMS ships it, and what debian/rules
installs into /usr/src being exactly the kbuild package.

The import graph comes from the source (ast), not from running it: every import counts,
also one inside a function (run only later, or never in a test) or a `try:` block (the
DKMS scripts' `from kbuildfiles import` fallback, which names a sibling file)."""

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pmubuild.kbuild import compat as compat_mod

from ..kbuild.test_compat import make_tree

REPO = Path(__file__).resolve().parents[3]
PKG = REPO / "pmubuild"
KBUILD = PKG / "kbuild"


# dkms.conf runs the scripts so on users' machines.
SYSTEM_PYTHON = "/usr/bin/python3"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}
PACKAGES = {m for m, p in MODULES.items() if p.name == "__init__.py"}


def package_of(mod: str) -> str:
    """The package a module belongs to: pmubuild.trees for pmubuild.trees.apt (and for
    pmubuild.trees itself); pmubuild.commands for the root's modules."""
    parts = mod.split(".")
    return mod if len(parts) == 2 else ".".join(parts[:2]) if len(parts) > 2 else mod


def resolve(mod: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The pmubuild modules one import statement in module `mod` loads."""
    path = MODULES[mod]
    here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.level:
        base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
        target = f"{base}.{node.module}" if node.module else base
    elif node.module and node.module.split(".")[0] != "pmubuild":
        # A plain script's sibling import (`from kbuildfiles import ...`): sys.path[0] is
        # the script's folder, so it names the file beside it.
        sibling = f"{here}.{node.module}"
        return {sibling} if sibling in MODULES else set()
    else:
        target = node.module or ""
    found = set()
    for a in node.names:
        if f"{target}.{a.name}" in MODULES:  # from pmubuild.trees import cache
            found.add(f"{target}.{a.name}")
        elif target in MODULES:  # from pmubuild.trees.apt import PrivateApt
            found.add(target)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for mod, path in MODULES.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in resolve(mod, node) - {mod}:
                    edges.setdefault(target, node.lineno)
        graph[mod] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, {})):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    arrows = [f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
    return " -> ".join([*arrows, cycle[-1]])


def layers() -> list[str]:
    """The order of pmubuild/__init__.py's map: its lines `name  what it holds`."""
    doc = ast.get_docstring(ast.parse((PKG / "__init__.py").read_text())) or ""
    return [f"pmubuild.{m.group(1)}" for line in doc.splitlines()
            if (m := re.match(r"^(\w+) {2,}\S", line))]


# --- (a) every module imports in a fresh process -------------------------------------------


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_every_module_imports_alone(mod):
    """Each in its own interpreter: a module that works only because another one was
    imported first (a circle, a missing import) fails here. The checkout first on the path,
    as `python -m pytest` and tasks.py have it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", f"import {mod}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# --- (b) no import circle, and the layers ---------------------------------------------------


def test_the_graph_sees_every_kind_of_import():
    """If the walk missed lazy, try-block, relative or sibling imports, the circle test
    below would pass on a graph with arrows missing."""
    g = import_graph()
    assert "pmubuild.modbuild.build" in g["pmubuild.hw.hwtest"]  # in a function
    assert "pmubuild.hw.hwtest_steps" in g["pmubuild.hw.run"]  # in a function
    assert "pmubuild.kbuild.kbuildfiles" in g["pmubuild.kbuild.compat"]  # try + relative
    assert "pmubuild.trees.cache" in g["pmubuild.trees.apt"]  # from pmubuild.trees import
    assert "pmubuild.common.errors" in g["pmubuild.trees.apt"]  # from pmubuild.x.y import
    assert len(g) == len(MODULES) and sum(map(len, g.values())) > 130


def test_a_circle_is_found_and_named():
    g = {"a": {"b": 3}, "b": {"c": 7}, "c": {"a": 9}, "d": {"a": 1}}
    cycle = find_cycle(g)
    assert cycle == ["a", "b", "c", "a"]
    assert describe(cycle, g) == "a (line 3) -> b (line 7) -> c (line 9) -> a"
    assert find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_no_import_circle():
    g = import_graph()
    cycle = find_cycle(g)
    assert cycle is None, "import circle: " + describe(cycle, g)


def test_the_layers_name_every_package_once():
    """Every package and every module at pmubuild's top (commands only): a loose
    pmubuild/helpers.py would belong to no layer."""
    order = layers()
    assert len(order) == len(set(order))
    assert set(order) == (PACKAGES - {"pmubuild"}) | {"pmubuild.commands"}
    assert set(order) == {package_of(m) for m in MODULES} - {"pmubuild"}


def test_no_package_imports_one_below_it_in_the_layers():
    """pmubuild/__init__.py lists the packages from the bottom up: each imports only those
    listed before it (the map a reader sees is the order the code keeps)."""
    order = layers()
    rank = {p: i for i, p in enumerate(order)}
    g = import_graph()
    up = [f"{a}:{line} imports {b}" for a, edges in g.items() for b, line in edges.items()
          if "pmubuild" not in (a, b) and package_of(a) != package_of(b)
          and rank[package_of(b)] > rank[package_of(a)]]
    assert up == []


# --- (c) kbuild ships alone ------------------------------------------------------------------


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if m.startswith("pmubuild.kbuild.")))
def test_kbuild_imports_nothing_of_pmubuild_outside_itself(mod):
    """DKMS runs these from /usr/src without the rest of pmubuild (and without kbuild's
    __init__.py): only the standard library, jinja2, elftools and each other. A sibling as
    `from .x import` inside a `try:` whose handler does `from x import` (a plain script has
    no package for the first); never `pmubuild.kbuild.x`, there is no pmubuild there."""
    tree = ast.parse(MODULES[mod].read_text())
    with_fallback = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                     for n in t.body if isinstance(n, ast.ImportFrom) and n.level
                     and any(isinstance(f, ast.ImportFrom) and not f.level
                             and f.module == n.module for h in t.handlers for f in h.body)}
    outside = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                assert node.level == 1 and node.module, f"{mod}:{node.lineno}: not a sibling"
                if id(node) not in with_fallback:
                    outside.append(f"{mod}:{node.lineno} .{node.module} without the fallback")
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if f"pmubuild.kbuild.{name}" in MODULES:  # the fallback's sibling
                continue
            if top in sys.stdlib_module_names or top in ("jinja2", "elftools"):
                continue
            outside.append(f"{mod}:{node.lineno} {name}")
    assert outside == []


# --- (d) debian/rules ships exactly kbuild --------------------------------------------------


def rules_dkms_install() -> tuple[list[str], str]:
    """The `install -m 644 SOURCES... DEST` command of debian/rules' DKMS tree (continued
    lines joined): its sources and its destination."""
    text = (REPO / "debian" / "rules").read_text().replace("\\\n", " ")
    cmds = [line.split() for line in text.splitlines()
            if line.strip().startswith("install -m 644") and "$(DKMS_SRC)/pmubuild" in line]
    assert len(cmds) == 1, "debian/rules: not one install -m 644 ... $(DKMS_SRC)/pmubuild/"
    args = cmds[0][3:]
    return args[:-1], args[-1]


def kbuild_shipped_files() -> set[str]:
    return {p.name for p in KBUILD.iterdir()
            if p.is_file() and p.suffix in (".py", ".j2") and p.name != "__init__.py"}


def test_rules_install_exactly_the_kbuild_package_flat():
    sources, dest = rules_dkms_install()
    assert dest.rstrip("/") == "$(DKMS_SRC)/pmubuild"
    assert all(Path(s).parent == Path("pmubuild/kbuild") for s in sources), sources
    assert sorted(Path(s).name for s in sources) == sorted(kbuild_shipped_files())
    assert kbuild_shipped_files() == {"compat.py", "modverify.py", "kbuildfiles.py",
                                      "compat.h.j2"}
    # Nothing else of debian/rules puts pmubuild into a package (`cp -r ... pmubuild`).
    text = (REPO / "debian" / "rules").read_text().replace("\\\n", " ")
    others = [line.strip() for line in text.splitlines() if "pmubuild" in line
              and not line.lstrip().startswith("#")
              and line.strip() != "install -d $(DKMS_SRC)/pmubuild"
              and line.split()[3:] != [*sources, dest]]
    assert others == []


def test_the_dkms_tree_runs_its_scripts_as_dkms_conf_does(tmp_path):
    """/usr/src/simple-pmu-V laid out from debian/rules' install line: compat.py renders a
    tree's compat.h from the template beside it and modverify.py answers, both run as
    plain scripts from the tree's top as dkms.conf's MAKE[0] runs them (a script's
    relative import always fails, so this is the `from kbuildfiles import` fallback), by
    Debian's /usr/bin/python3 with its own python3-jinja2 and python3-pyelftools only (-E:
    no PYTHON* variables; -s: no user site; not -I, whose -P would drop the script's own
    folder that the fallback needs) and no pmubuild importable."""
    probe = subprocess.run([SYSTEM_PYTHON, "-E", "-s", "-c", "import jinja2, elftools"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode == 0, (
        f"{SYSTEM_PYTHON} lacks python3-jinja2 or python3-pyelftools (./devenv installs "
        f"them): {probe.stderr.strip()}")
    src = tmp_path / "usr" / "src" / "simple-pmu-0.1"
    (src / "pmubuild").mkdir(parents=True)
    sources, _ = rules_dkms_install()
    for s in sources:
        (src / "pmubuild" / Path(s).name).write_bytes((REPO / s).read_bytes())
    kdir = make_tree(tmp_path / "kdir", "amd64")
    alone = subprocess.run([SYSTEM_PYTHON, "-E", "-s", "-c",
                            "import importlib.util; print(importlib.util.find_spec('pmubuild'))"],
                           cwd=src / "pmubuild", capture_output=True, text=True)
    assert alone.stdout.strip() == "None", alone.stdout + alone.stderr
    out = tmp_path / "compat.h"
    compat = subprocess.run([SYSTEM_PYTHON, "-E", "-s", "pmubuild/compat.py", "--kdir",
                             str(kdir), "--out", str(out)], cwd=src, capture_output=True,
                            text=True, timeout=120)
    assert compat.returncode == 0, compat.stderr
    assert out.read_text() == compat_mod.render(*compat_mod.probe_all(kdir))
    usage = subprocess.run([SYSTEM_PYTHON, "-E", "-s", "pmubuild/modverify.py", "--help"],
                           cwd=src, capture_output=True, text=True, timeout=120)
    assert usage.returncode == 0 and "--kdir" in usage.stdout, usage.stderr


# --- REPO and module names after the move --------------------------------------------------


# `REPO = ` or `REPO: Path = `.
@pytest.mark.parametrize("mod", sorted(m for m, p in MODULES.items()
                                       if re.search(r"^REPO(?:: [^=]+)? = ", p.read_text(), re.M)))
def test_every_modules_repo_is_the_checkout(mod):
    """A REPO one level off points into pmubuild/ and fails quietly (nothing to copy,
    checkpatch over no file, seeds not found): each must hold tasks.py and Kbuild."""
    repo = importlib.import_module(mod).REPO
    assert repo == REPO and (repo / "tasks.py").is_file() and (repo / "Kbuild").is_file()
