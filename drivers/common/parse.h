/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Strict number parsing for sysfs writes and module parameters, shared by
 * both drivers: bad input is refused whole, never half-applied.
 */
#ifndef SIMPLE_PMU_PARSE_H
#define SIMPLE_PMU_PARSE_H

#include <linux/moduleparam.h>
#include <linux/types.h>

/* Longest sysfs write accepted, without its trailing newline. */
#define SPMU_INPUT_MAX	64

int spmu_input_copy(char *dst, const char *buf, size_t count);
int spmu_parse_number(const char *s, unsigned int min, unsigned int max,
		      unsigned int *val);
int spmu_input_number(const char *buf, size_t count, unsigned int min,
		      unsigned int max, unsigned int *val);

/* A numeric module parameter: where it lands and its valid range (kp->arg). */
struct spmu_num_param {
	unsigned int *val;
	unsigned int min;
	unsigned int max;
};

/* module_param_cb() ops for a struct spmu_num_param. */
extern const struct kernel_param_ops spmu_num_ops;

#endif /* SIMPLE_PMU_PARSE_H */
