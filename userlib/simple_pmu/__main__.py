"""python -m simple_pmu: the simple-pmu command."""

import sys

from simple_pmu.cli import main

sys.exit(main())
