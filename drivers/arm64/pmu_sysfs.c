// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: attributes of /sys/devices/system/simple-pmu/simple-pmu0.
 * Numbers are printed in decimal so any parser reads them.
 */

#include <linux/device.h>
#include <linux/sysfs.h>

#include "drivers/arm64/pmu.h"

static ssize_t pmu_version_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_hw.pmuver);
}
static DEVICE_ATTR_RO(pmu_version);

static ssize_t num_counters_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_hw.num_counters);
}
static DEVICE_ATTR_RO(num_counters);

static ssize_t user_access_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", spmu_config.pmuserenr);
}
static DEVICE_ATTR_RO(user_access);

/* CPUs where user access is currently applied, as a cpulist. */
static ssize_t cpus_show(struct device *dev,
			 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(&spmu_active_cpus));
}
static DEVICE_ATTR_RO(cpus);

static struct attribute *spmu_arm64_attrs[] = {
	&dev_attr_pmu_version.attr,
	&dev_attr_num_counters.attr,
	&dev_attr_user_access.attr,
	&dev_attr_cpus.attr,
	NULL
};

static const struct attribute_group spmu_arm64_group = {
	.attrs = spmu_arm64_attrs,
};

const struct attribute_group *spmu_arm64_groups[] = {
	&spmu_arm64_group,
	NULL
};
