"""The 2011 demo tcyc.c from the seed documents, restored from its transmission damage.

The seed copy lost the names of its three system #includes and gained a line-count
trailer ("} 64 |"). Only that damage is repaired; anything else differing is refused.
The seeds live beside the checkout (shared/reference/seeds), not in it: a plain clone has
none, and the checks that need them say SKIP with absent_reason(). SIMPLE_PMU_SEEDS names
another directory (a path that does not exist shows what a plain clone does).
"""

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEEDS = Path(os.environ.get("SIMPLE_PMU_SEEDS") or REPO.parent / "shared" / "reference" / "seeds")
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


def absent_reason() -> str | None:
    """Why the 2011 tcyc.c cannot be had (the seeds are not there), or None: it can."""
    if TCYC.is_file():
        return None
    if not SEEDS.is_dir():
        return f"the seed documents are not beside the checkout ({SEEDS} does not exist)"
    return f"the seed documents at {SEEDS} hold no simple-pmu-2011/tcyc.c"


def restored_tcyc(includes: list[str] | None = None) -> str | None:
    """tcyc.c ready to compile, or None when the seeds are not beside the checkout
    (absent_reason() says why). A damaged seed raises ValueError: that is a failure."""
    if absent_reason():
        return None
    return restore_seed(TCYC.read_text(), includes or LOST_INCLUDES)
