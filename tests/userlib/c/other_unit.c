// SPDX-License-Identifier: GPL-2.0-only
/* A second user of cycles.h in the same program: static inline, no clashes. */
#define _GNU_SOURCE 1
#include "cycles.h"

int other_unit_perfmon(void);
const void *other_unit_thread_state(void);
const void *other_unit_module_cache(void);

int other_unit_perfmon(void)
{
	return perfmon_available();
}

/* This thread's state as this translation unit sees it. */
const void *other_unit_thread_state(void)
{
	return cycles_thread();
}

const void *other_unit_module_cache(void)
{
	return cycles_state();
}
