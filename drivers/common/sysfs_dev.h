/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sysfs home shared by both drivers:
 * /sys/devices/system/simple-pmu/simple-pmu0/ (the 2011 path).
 */
#ifndef SIMPLE_PMU_SYSFS_DEV_H
#define SIMPLE_PMU_SYSFS_DEV_H

#include <linux/types.h>

struct attribute_group;

/* generation, cpus, recheck_ms: for each driver's groups array. */
extern const struct attribute_group spmu_common_group;

int spmu_sysfs_register(const struct attribute_group **groups, bool per_cpu);
void spmu_sysfs_unregister(void);

#endif /* SIMPLE_PMU_SYSFS_DEV_H */
