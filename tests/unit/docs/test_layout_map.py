"""docs/DEVELOPING.md's Layout names every folder of the repository, and only those.

The rule: a folder is every directory git tracks a file in, at any depth, with its parents
(drivers/ holds no file of its own but is a folder). Taken from `git ls-files`, not the
disk, so that build output, caches, .venv and egg-info never count. Each folder is one
list line of the section: "- `path/` what it holds"."""

import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "DEVELOPING.md"
ENTRY = re.compile(r"^- `([^`]+)/` \S")

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(),
    reason="needs git and a git checkout (the folders are the tracked ones)")


def tracked_folders() -> set[str]:
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                           text=True, check=True).stdout.split("\0")
    folders = set()
    for f in filter(None, files):
        folders |= {str(p) for p in PurePosixPath(f).parents if str(p) != "."}
    return folders


def layout_section() -> list[str]:
    text = GUIDE.read_text()
    assert "\n## Layout\n" in text, f"{GUIDE}: no '## Layout' section"
    return text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0].splitlines()


def mapped_folders() -> list[str]:
    return [m.group(1) for line in layout_section() if (m := ENTRY.match(line))]


def test_every_list_line_of_the_section_is_one_folder():
    """A list line not in the `path/` form would name a folder this test cannot see."""
    bad = [line for line in layout_section() if line.startswith("-") and not ENTRY.match(line)]
    assert bad == []


def test_the_map_names_every_tracked_folder_once():
    mapped = mapped_folders()
    assert len(mapped) == len(set(mapped)), "named twice: " + " ".join(
        sorted({f for f in mapped if mapped.count(f) > 1}))
    missing = sorted(tracked_folders() - set(mapped))
    assert missing == [], "docs/DEVELOPING.md's Layout does not name: " + " ".join(missing)


def test_the_map_names_no_folder_that_does_not_exist():
    stale = sorted(set(mapped_folders()) - tracked_folders())
    assert stale == [], "docs/DEVELOPING.md's Layout names untracked folders: " + " ".join(stale)


def test_the_map_is_in_path_order():
    mapped = mapped_folders()
    assert mapped == sorted(mapped)


def test_tracked_folders_count_parents_without_files_of_their_own():
    """drivers/ has no file of its own: `dirname | sort -u` alone would miss it."""
    folders = tracked_folders()
    assert {"drivers", "drivers/x86", "tests/unit/drivers/data/cpuid"} <= folders
    assert "tests/unit/drivers/data" in folders
