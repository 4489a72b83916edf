"""The 2011 demo tcyc.c from the seed documents, restored from its transmission damage.

The seed copy lost the names of its three system #includes and gained a line-count
trailer ("} 64 |"). Only that damage is repaired; anything else differing is refused.
The seeds live beside the checkout (shared/reference/seeds), not in it.
"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO.parent / "shared" / "reference" / "seeds"
TCYC = SEEDS / "simple-pmu-2011" / "tcyc.c"
# What tcyc.c needs (printf, exit) plus a third, as the original had three.
LOST_INCLUDES = ["<stdio.h>", "<stdlib.h>", "<unistd.h>"]


def restore_seed(text: str, includes: list[str]) -> str:
    """Put back the lost #include names and drop the trailer; refuse anything else."""
    bare = re.findall(r"(?m)^#include[ \t]*$", text)
    if len(bare) != len(includes):
        raise ValueError(f"seed tcyc.c has {len(bare)} bare #include lines, "
                         f"expected {len(includes)}")
    names = iter(includes)
    text = re.sub(r"(?m)^#include[ \t]*$", lambda _m: f"#include {next(names)}", text)
    text, trailers = re.subn(r"[ \t]+\d+ \|[ \t]*\n?\Z", "\n", text)
    if trailers > 1:
        raise ValueError("seed tcyc.c: more than one line-count trailer")
    return text


def restored_tcyc(includes: list[str] | None = None) -> str | None:
    """tcyc.c ready to compile, or None when the seeds are not beside the checkout."""
    if not TCYC.is_file():
        return None
    return restore_seed(TCYC.read_text(), includes or LOST_INCLUDES)
