"""README.md is for a user, docs/DEVELOPING.md for a developer (issue 26).

The README reads start to finish for someone who installs simple-pmu, lets users in and
reads the counters; the developer guide holds the tasks, the kernels, the debuggers, the
hardware and packaging tests, the tests and the layout. No section is in both, the
README points to the guide, and every relative link of either resolves."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
GUIDE = REPO / "docs" / "DEVELOPING.md"

# The README's ## sections, in the order a user needs them: install, let users in, read,
# what is exposed, status and security, uninstall; then the pointer for developers.
README_SECTIONS = [
    "Installing",
    "Who may read the counters",
    "Reading the counters",
    "What the module exposes",
    "Status",
    "Security",
    "Uninstalling",
    "Developing",
    "License",
    "Credits",
]

# ## titles both documents may carry: none (a short pointer goes in a sentence instead).
SHARED_TITLES: set[str] = set()

# Words that belong to a developer only; one in the README means developer material leaked
# back. Chosen because each names what only a checkout's test pipeline does: the QEMU guests
# (`invoke test-qemu`, `qemu-run`), the debug kernels (`test-debug`), the packaging test
# (`test-package`), the kernel matrix (`matrix`), and the checkout's pipeline and its test
# folders (`pmubuild/`, `templates/`, `tests/`). `pmubuild/` is allowed only as the
# installed DKMS tree, `/usr/src/simple-pmu-VERSION/pmubuild/` (debian/rules), which is
# what a user finds on disk. `invoke test-hw` and `invoke package` stay allowed: the
# README asks Intel owners to run the first and builds the packages with the second.
DEVELOPER_TERMS = {
    "invoke test-qemu": r"invoke test-qemu",
    "qemu-run": r"qemu-run",
    "test-debug": r"test-debug",
    "test-package": r"test-package",
    "matrix": r"(?i)matrix",
    "pmubuild/ (outside the installed DKMS tree)": r"(?<!/usr/src/simple-pmu-VERSION/)pmubuild/",
    "templates/": r"templates/",
    "tests/": r"(?<![\w/])tests/",
}

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
# [text](target), also as (<target>) or with a "title"; and a reference's [name]: target.
LINK = re.compile(r'\[([^\]]*)\]\(<?([^()\s<>]+)>?(?:\s+"[^"]*")?\)')
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s<>]+)>?", re.M)


def prose(path: Path) -> str:
    """The document without its fenced code blocks (a `# comment` there is no heading)."""
    return FENCE.sub("", path.read_text())


def headings(path: Path, level: int | None = None) -> list[str]:
    found = []
    for m in re.finditer(r"^(#{1,6}) +(.+?) *#* *$", prose(path), re.M):
        if level is None or len(m.group(1)) == level:
            found.append(m.group(2))
    return found


def slug(title: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, every character but
    letters, digits, '_', '-' and spaces dropped, spaces made '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for title in headings(path):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def links(path: Path) -> list[str]:
    text = prose(path)
    return [m.group(2) for m in LINK.finditer(text)] + REFERENCE.findall(text)


def test_the_documents_carry_headings():
    """The checks below mean something only if the headings are found at all."""
    assert len(headings(README, 2)) >= 8 and len(headings(GUIDE, 2)) >= 4
    assert "Layout" in headings(GUIDE, 2) and "Tasks" in headings(GUIDE, 2)
    # A setext heading (a line underlined with === or ---) is one headings() cannot see.
    for doc in (README, GUIDE):
        assert not re.search(r"^.*\S.*\n(?:=+|-+) *$", prose(doc), re.M), doc.name


def test_no_section_is_in_both_documents():
    readme_all = {t.lower() for t in headings(README)}
    guide_all = {t.lower() for t in headings(GUIDE)}
    readme_top = {t.lower() for t in headings(README, 2)}
    guide_top = {t.lower() for t in headings(GUIDE, 2)}
    shared = {t.lower() for t in SHARED_TITLES}
    assert (readme_all & guide_top) - shared == set(), "README repeats a guide's section"
    assert (guide_all & readme_top) - shared == set(), "the guide repeats a README section"
    # Subsections too (helper-56: a ### in both passed).
    assert (readme_all & guide_all) - shared == set(), "a heading is in both documents"


def test_the_readme_points_to_the_developer_guide():
    assert "docs/DEVELOPING.md" in {link.split("#")[0] for link in links(README)}


@pytest.mark.parametrize("doc", [README, GUIDE], ids=["README.md", "docs/DEVELOPING.md"])
def test_every_relative_link_resolves(doc):
    bad = []
    for target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{target}: no file {dest}")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert links(doc), f"{doc.name}: no links found"
    assert bad == []


def test_the_readme_sections_are_in_the_users_order():
    assert headings(README, 2) == README_SECTIONS


# The invoke tasks the README names: a user builds (build, package), tries (demo), runs
# the hardware test on Intel (test-hw), and reads the one test command CI runs (test).
# Every other task (lint, unit, kdir, render, verify, sign, bench, test-qemu...) is the
# guide's.
README_TASKS = {"build", "package", "demo", "test", "test-hw"}


def test_the_readme_names_only_a_users_tasks():
    assert set(re.findall(r"\binvoke ([\w-]+)", README.read_text())) == README_TASKS


@pytest.mark.parametrize("term", sorted(DEVELOPER_TERMS))
def test_no_developer_term_in_the_readme(term):
    hits = [line for line in README.read_text().splitlines()
            if re.search(DEVELOPER_TERMS[term], line)]
    assert hits == []


def test_the_readme_names_the_test_command_ci_runs_once():
    """.ci/run runs "the README's test command": the README names exactly that command,
    once (in its pointer for developers), and the task itself stays in the guide."""
    run = (REPO / ".ci" / "run").read_text()
    command = re.search(r"^exec (.+)$", run, re.M).group(1).strip()
    assert command == "./devenv invoke test"
    assert len(re.findall(re.escape(command) + r"(?![\w-])", README.read_text())) == 1
    assert "`invoke test`" in GUIDE.read_text()


@pytest.mark.parametrize("title,expected", [
    ("Under the kernel's debuggers", "under-the-kernels-debuggers"),
    ("Hardware test (x86, not run in CI)", "hardware-test-x86-not-run-in-ci"),
    ("C: cycles.h", "c-cyclesh"),
    ("Compat headers: probe the tree, not the version",
     "compat-headers-probe-the-tree-not-the-version"),
    ("The `simple-pmu` command", "the-simple-pmu-command"),
])
def test_slugs_are_githubs(title, expected):
    assert slug(title) == expected
