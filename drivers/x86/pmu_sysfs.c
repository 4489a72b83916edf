// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: attributes of /sys/devices/system/simple-pmu/simple-pmu0
 * (beside generation, cpus, recheck_ms and cpuN/, see drivers/common).
 * docs/ABI/sysfs-devices-system-simple-pmu describes each one.
 *
 * Writes: root only; one value, one optional trailing newline; anything
 * else is -EINVAL after one line saying why, and changes nothing.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/device.h>
#include <linux/mutex.h>
#include <linux/printk.h>
#include <linux/sysfs.h>

#include "drivers/common/parse.h"
#include "drivers/common/sysfs_dev.h"
#include "drivers/x86/pmu.h"

/* One read-only attribute per decoded CPUID field, in decimal. */
#define SPMU_PERFMON_ATTR(_name, _fmt, _value)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, _fmt "\n", _value);			\
}									\
static DEVICE_ATTR_RO(_name)

SPMU_PERFMON_ATTR(pmu_version, "%u", spmu_hw.perfmon.version);
SPMU_PERFMON_ATTR(num_gp, "%u", spmu_hw.perfmon.num_gp);
SPMU_PERFMON_ATTR(gp_width, "%u", spmu_hw.perfmon.gp_width);
SPMU_PERFMON_ATTR(num_fixed, "%u", spmu_hw.perfmon.num_fixed);
SPMU_PERFMON_ATTR(fixed_width, "%u", spmu_hw.perfmon.fixed_width);
SPMU_PERFMON_ATTR(fixed_mask, "%#x", spmu_hw.perfmon.fixed_mask);
SPMU_PERFMON_ATTR(perf_fixed_mask, "%#x", spmu_hw.perf_fixed_mask);
SPMU_PERFMON_ATTR(events_unavailable, "%#x", spmu_hw.perfmon.events_unavail);
SPMU_PERFMON_ATTR(hybrid, "%d", spmu_hw.hybrid);
SPMU_PERFMON_ATTR(rdpmc_always, "%d", spmu_rdpmc_always_everywhere());

/*
 * Who may read: the processes let in through /dev/simple-pmu, or every
 * process where the admin set rdpmc 2.
 */
static ssize_t access_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%s\n", spmu_rdpmc_always_everywhere() ?
			  "everyone" : "members");
}
static DEVICE_ATTR_RO(access);

/* Live mappings of /dev/simple-pmu. */
static ssize_t members_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_members_count());
}
static DEVICE_ATTR_RO(members);

/* The encodings of slots 1.., in cpuN/event_index order. */
static ssize_t events_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	unsigned int i;
	int len = 0;

	for (i = SPMU_SLOT_CYCLES + 1; i < spmu_hw.plan.nr; i++)
		len += sysfs_emit_at(buf, len, "%s%#x", len ? "," : "",
				     spmu_hw.plan.slot[i].encoding);
	return len + sysfs_emit_at(buf, len, "\n");
}
static DEVICE_ATTR_RO(events);

static ssize_t ring_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(spmu_settings.ring));
}

static ssize_t ring_store(struct device *dev, struct device_attribute *attr,
			  const char *buf, size_t count)
{
	struct spmu_settings st;
	unsigned int val;
	int ret;

	if (spmu_input_number(buf, count, SPMU_RING_KERNEL, SPMU_RING_ALL,
			      &val)) {
		pr_err("ring: valid are 1 (kernel), 2 (user), 3 (both)\n");
		return -EINVAL;
	}
	mutex_lock(&spmu_lock);
	st = spmu_settings;
	st.ring = val;
	ret = spmu_settings_set(&st);
	mutex_unlock(&spmu_lock);
	return ret ?: count;
}
static DEVICE_ATTR_RW(ring);

static ssize_t rdpmc_fixed_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(spmu_settings.rdpmc_fixed));
}

static ssize_t rdpmc_fixed_store(struct device *dev,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	struct spmu_settings st;
	unsigned int val;
	int ret;

	if (spmu_input_number(buf, count, 0, 1, &val)) {
		pr_err("rdpmc_fixed: valid are 0 (counters given back to perf) and 1 (held)\n");
		return -EINVAL;
	}
	mutex_lock(&spmu_lock);
	st = spmu_settings;
	st.rdpmc_fixed = val;
	ret = spmu_settings_set(&st);
	mutex_unlock(&spmu_lock);
	return ret ?: count;
}
static DEVICE_ATTR_RW(rdpmc_fixed);

static struct attribute *spmu_x86_attrs[] = {
	&dev_attr_pmu_version.attr,
	&dev_attr_num_gp.attr,
	&dev_attr_gp_width.attr,
	&dev_attr_num_fixed.attr,
	&dev_attr_fixed_width.attr,
	&dev_attr_fixed_mask.attr,
	&dev_attr_perf_fixed_mask.attr,
	&dev_attr_events_unavailable.attr,
	&dev_attr_hybrid.attr,
	&dev_attr_rdpmc_always.attr,
	&dev_attr_access.attr,
	&dev_attr_members.attr,
	&dev_attr_events.attr,
	&dev_attr_ring.attr,
	&dev_attr_rdpmc_fixed.attr,
	NULL
};

static const struct attribute_group spmu_x86_group = {
	.attrs = spmu_x86_attrs,
};

const struct attribute_group *spmu_x86_groups[] = {
	&spmu_common_group,
	&spmu_x86_group,
	NULL
};
