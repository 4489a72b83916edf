// SPDX-License-Identifier: GPL-2.0-only
/* A second user of cycles.h in the same program: static inline, no clashes. */
#define _GNU_SOURCE 1
#include "cycles.h"

int other_unit_perfmon(void);

int other_unit_perfmon(void)
{
	return perfmon_available();
}
