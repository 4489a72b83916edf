/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the user-space harnesses of the x86 headers share: numbers from the
 * command line, decimal or 0x-hex, anything else exits 2.
 */
#ifndef SIMPLE_PMU_TEST_HARNESS_H
#define SIMPLE_PMU_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

static inline unsigned int num(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (!*s || *end || v > 0xffffffffUL) {
		fprintf(stderr, "bad number: %s\n", s);
		exit(2);
	}
	return (unsigned int)v;
}

#endif /* SIMPLE_PMU_TEST_HARNESS_H */
