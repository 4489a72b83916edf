// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: for now, check for architectural perfmon and report
 * what CPUID leaf 0xA describes under
 * /sys/devices/system/simple-pmu/simple-pmu0. Counters are not enabled yet.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/device.h>
#include <linux/module.h>
#include <linux/sysfs.h>
#include <asm/cpufeature.h>
#include <asm/processor.h>

#include "drivers/common/sysfs_dev.h"
#include "drivers/x86/cpuid_pmu.h"
#include "drivers/x86/pmu_regs.h"

static struct spmu_perfmon spmu_perfmon;

/* Return: 0 if the CPU has architectural perfmon, else -ENODEV. */
static int spmu_probe_hw(void)
{
	struct spmu_cpuid_regs r;

	/* cpuid_level is the highest basic leaf, as the kernel saw it. */
	if (!boot_cpu_has(X86_FEATURE_ARCH_PERFMON) ||
	    boot_cpu_data.cpuid_level < SPMU_CPUID_LEAF_PERFMON)
		return -ENODEV;

	spmu_cpuid(SPMU_CPUID_LEAF_PERFMON, 0, &r);
	spmu_decode_cpuid_a(r.eax, r.ebx, r.ecx, r.edx, &spmu_perfmon);
	return spmu_perfmon.version ? 0 : -ENODEV;
}

/* One read-only attribute per decoded field, printed in decimal. */
#define SPMU_PERFMON_ATTR(_name, _field)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%u\n", spmu_perfmon._field);		\
}									\
static DEVICE_ATTR_RO(_name)

SPMU_PERFMON_ATTR(pmu_version, version);
SPMU_PERFMON_ATTR(num_gp, num_gp);
SPMU_PERFMON_ATTR(gp_width, gp_width);
SPMU_PERFMON_ATTR(num_fixed, num_fixed);
SPMU_PERFMON_ATTR(fixed_width, fixed_width);
SPMU_PERFMON_ATTR(fixed_mask, fixed_mask);
SPMU_PERFMON_ATTR(events_unavailable, events_unavail);

static struct attribute *spmu_x86_attrs[] = {
	&dev_attr_pmu_version.attr,
	&dev_attr_num_gp.attr,
	&dev_attr_gp_width.attr,
	&dev_attr_num_fixed.attr,
	&dev_attr_fixed_width.attr,
	&dev_attr_fixed_mask.attr,
	&dev_attr_events_unavailable.attr,
	NULL
};

static const struct attribute_group spmu_x86_group = {
	.attrs = spmu_x86_attrs,
};

/* No counters held yet: none of the common counter attributes. */
static const struct attribute_group *spmu_x86_groups[] = {
	&spmu_x86_group,
	NULL
};

static int __init spmu_init(void)
{
	int ret;

	if (spmu_probe_hw()) {
		pr_err("CPU has no architectural perfmon (CPUID leaf 0xA); not loading\n");
		return -ENODEV;
	}

	ret = spmu_sysfs_register(spmu_x86_groups, false);
	if (ret)
		return ret;

	pr_info("perfmon version %u, %u fixed counters of %u bits, %u general counters of %u bits; this version only reports them and does not enable counters\n",
		spmu_perfmon.version, spmu_perfmon.num_fixed,
		spmu_perfmon.fixed_width, spmu_perfmon.num_gp,
		spmu_perfmon.gp_width);
	return 0;
}

static void __exit spmu_exit(void)
{
	spmu_sysfs_unregister();
}

module_init(spmu_init);
module_exit(spmu_exit);

MODULE_DESCRIPTION("User-space access to the Intel fixed performance counters");
MODULE_LICENSE("GPL");
