/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Strict number parsing for sysfs writes and module parameters, shared by
 * both drivers: bad input is refused whole, never half-applied.
 */
#ifndef SIMPLE_PMU_PARSE_H
#define SIMPLE_PMU_PARSE_H

#include <linux/types.h>

/* Longest sysfs write accepted, without its trailing newline. */
#define SPMU_INPUT_MAX	64

int spmu_input_copy(char *dst, const char *buf, size_t count);
int spmu_parse_number(const char *s, unsigned int min, unsigned int max,
		      unsigned int *val);

#endif /* SIMPLE_PMU_PARSE_H */
