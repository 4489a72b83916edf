// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu: strict number parsing for sysfs writes and module parameters.
 *
 * kstrto*() alone is too lenient for a user interface: it takes a leading
 * '+', a trailing newline anywhere it is given one, and octal for a leading
 * zero. Here a number is decimal or 0x-hex digits and nothing else.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/ctype.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "drivers/common/parse.h"

/**
 * spmu_input_copy() - take a sysfs write as a C string
 * @dst: at least SPMU_INPUT_MAX + 1 bytes
 * @buf: what user space wrote (not NUL-terminated for our purposes)
 * @count: its length
 *
 * One trailing newline, as echo adds, is dropped.
 *
 * Return: 0, or -EINVAL if the input is longer than SPMU_INPUT_MAX or
 * holds a NUL byte.
 */
int spmu_input_copy(char *dst, const char *buf, size_t count)
{
	if (count && buf[count - 1] == '\n')
		count--;
	if (count > SPMU_INPUT_MAX || memchr(buf, '\0', count))
		return -EINVAL;
	memcpy(dst, buf, count);
	dst[count] = '\0';
	return 0;
}

/**
 * spmu_parse_number() - parse a whole string as one number in a range
 * @s: decimal ("12") or hexadecimal ("0xc"), no sign, no spaces, no newline
 * @min: smallest valid value
 * @max: largest valid value
 * @val: set only on success
 *
 * Return: 0, or -EINVAL for anything else, including out of range.
 */
int spmu_parse_number(const char *s, unsigned int min, unsigned int max,
		      unsigned int *val)
{
	unsigned int v;

	if (!isdigit(s[0]) || strchr(s, '\n'))
		return -EINVAL;
	/* "010" would be octal to kstrtouint(): refuse the surprise. */
	if (s[0] == '0' && s[1] && tolower(s[1]) != 'x')
		return -EINVAL;
	if (kstrtouint(s, 0, &v) || v < min || v > max)
		return -EINVAL;
	*val = v;
	return 0;
}

/* A sysfs write holding one number in [@min, @max]; else -EINVAL. */
int spmu_input_number(const char *buf, size_t count, unsigned int min,
		      unsigned int max, unsigned int *val)
{
	char in[SPMU_INPUT_MAX + 1];

	if (spmu_input_copy(in, buf, count))
		return -EINVAL;
	return spmu_parse_number(in, min, max, val);
}

/*
 * Numeric module parameters are checked as they are set, with one line
 * naming the bad one (val is NULL for a bare "ring" on the insmod line).
 */
static int spmu_num_set(const char *val, const struct kernel_param *kp)
{
	const struct spmu_num_param *p = kp->arg;

	if (!val || spmu_input_number(val, strlen(val), p->min, p->max,
				      p->val)) {
		pr_err("invalid %s=%s: valid are %u..%u\n", kp->name, val,
		       p->min, p->max);
		return -EINVAL;
	}
	return 0;
}

static int spmu_num_get(char *buf, const struct kernel_param *kp)
{
	const struct spmu_num_param *p = kp->arg;

	return sysfs_emit(buf, "%u\n", *p->val);
}

const struct kernel_param_ops spmu_num_ops = {
	.set = spmu_num_set,
	.get = spmu_num_get,
};
