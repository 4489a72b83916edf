// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: attributes of /sys/devices/system/simple-pmu/simple-pmu0
 * (beside generation, cpus, recheck_ms and cpuN/, see drivers/common).
 * docs/ABI/sysfs-devices-system-simple-pmu describes each one.
 *
 * Writes: root only; one value, one optional trailing newline; anything
 * else is -EINVAL after one line saying why, and changes nothing.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/device.h>
#include <linux/minmax.h>
#include <linux/mutex.h>
#include <linux/printk.h>
#include <linux/sysfs.h>

#include "drivers/arm64/pmu.h"
#include "drivers/common/parse.h"
#include "drivers/common/sysfs_dev.h"

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

static ssize_t event_width_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_event_width());
}
static DEVICE_ATTR_RO(event_width);

static ssize_t user_access_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(spmu_user_access));
}

static ssize_t user_access_store(struct device *dev,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	unsigned int val;

	if (spmu_input_number(buf, count, 0, 1, &val)) {
		pr_err("user_access: valid are 0 (closed) and 1 (read-only)\n");
		return -EINVAL;
	}
	mutex_lock(&spmu_lock);
	spmu_user_access_set(val);
	mutex_unlock(&spmu_lock);
	return count;
}
static DEVICE_ATTR_RW(user_access);

static ssize_t access_show(struct device *dev,
			   struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", spmu_everyone ? "everyone" : "members");
}
static DEVICE_ATTR_RO(access);

static ssize_t members_show(struct device *dev,
			    struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_members_count());
}
static DEVICE_ATTR_RO(members);

static ssize_t ring_show(struct device *dev,
			 struct device_attribute *attr, char *buf)
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

static ssize_t events_show(struct device *dev,
			   struct device_attribute *attr, char *buf)
{
	unsigned int i;
	int len = 0;

	mutex_lock(&spmu_lock);
	for (i = 0; i < spmu_settings.nr_events; i++)
		len += sysfs_emit_at(buf, len, "%s%#x", i ? "," : "",
				     spmu_settings.events[i]);
	mutex_unlock(&spmu_lock);
	if (!i)
		len = sysfs_emit(buf, "none");
	return len + sysfs_emit_at(buf, len, "\n");
}

static ssize_t events_store(struct device *dev, struct device_attribute *attr,
			    const char *buf, size_t count)
{
	char in[SPMU_INPUT_MAX + 1];
	struct spmu_settings st;
	int ret;

	if (spmu_input_copy(in, buf, count)) {
		pr_err("events: longer than %u bytes\n", SPMU_INPUT_MAX);
		return -EINVAL;
	}
	mutex_lock(&spmu_lock);
	st = spmu_settings;
	ret = spmu_parse_events(in, &st);
	if (ret)
		pr_err("events: valid is none or up to %u comma-separated event numbers\n",
		       min_t(unsigned int, spmu_hw.num_counters, SPMU_MAX_EVENTS));
	else
		ret = spmu_check_events(&st);
	if (!ret)
		ret = spmu_settings_set(&st);
	mutex_unlock(&spmu_lock);
	return ret ?: count;
}
static DEVICE_ATTR_RW(events);

static struct attribute *spmu_arm64_attrs[] = {
	&dev_attr_pmu_version.attr,
	&dev_attr_num_counters.attr,
	&dev_attr_event_width.attr,
	&dev_attr_user_access.attr,
	&dev_attr_access.attr,
	&dev_attr_members.attr,
	&dev_attr_ring.attr,
	&dev_attr_events.attr,
	NULL
};

static const struct attribute_group spmu_arm64_group = {
	.attrs = spmu_arm64_attrs,
};

const struct attribute_group *spmu_arm64_groups[] = {
	&spmu_common_group,
	&spmu_arm64_group,
	NULL
};
