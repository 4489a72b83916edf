// SPDX-License-Identifier: GPL-2.0-only
/* The second translation unit of guard_units.c. */
#define _GNU_SOURCE 1
#include "cycles.h"

void unit_b_begin(void);
int unit_b_end(void);

void unit_b_begin(void)
{
	cycles_guard_begin(&cycles_tls);
}

int unit_b_end(void)
{
	return cycles_guard_end(&cycles_tls);
}
