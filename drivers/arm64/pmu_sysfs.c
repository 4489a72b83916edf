// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: attributes of /sys/devices/system/simple-pmu/simple-pmu0.
 *
 * Every value ends in a newline. Numbers are decimal unless shown as 0x.
 *
 * pmu_version (ro)     ID_AA64DFR0_EL1.PMUVer of the loading CPU, decimal
 *                      (1: PMUv3, 4: v3p1, 5: v3p4, 6: v3p5, 7: v3p7, ...).
 * num_counters (ro)    PMCR_EL0.N: event counters the PMU has, decimal.
 * cpus (ro)            CPUs where the driver holds its state, as a cpulist
 *                      ("0-3,6").
 * cycle_counter (ro)   1 when the driver keeps PMCCNTR_EL0 enabled on the
 *                      CPUs in cpus, else 0.
 * user_access (rw)     EL0 access: 0 off (PMUSERENR_EL0 = 0, left to perf
 *                      afterwards), 1 read-only (CR|ER, the default), 2
 *                      read-write (EN|CR|ER: any process can then stop or
 *                      reset the counters for everyone; logged).
 * ring (rw)            What the cycle and our event counters count, a
 *                      bitmask: 1 kernel (EL1, and EL2 under a VHE kernel),
 *                      2 user (EL0), 3 both (default).
 * events (rw)          Events of our event counters: comma-separated event
 *                      numbers, written decimal or 0x-hex, each 0..0xffff,
 *                      at most num_counters. Written as "" or "none" for no
 *                      event counters; read back as 0x-hex ("0x8,0x11") or
 *                      "none".
 * event_counters (ro)  Where each event counts: space-separated IDX:0xEVENT
 *                      pairs, IDX the counter n of PMEVCNTR<n>_EL0 in
 *                      decimal, EVENT four hex digits ("5:0x0008 4:0x0011");
 *                      an empty line when there are none. Event i of events
 *                      is in counter num_counters - 1 - i.
 * recheck_ms (ro)      Period of the per-CPU check for state taken by perf.
 * interventions (ro)   One line per online CPU, "cpuN hotplug=H pm=P perf=F":
 *                      times the state was put back after the CPU came back
 *                      online (not counting the load), after a CPU PM exit
 *                      that found it lost, and after the periodic check
 *                      found PMUSERENR or our counters changed (perf). While
 *                      perf counts (PMCR_EL0.E set) only PMUSERENR is put
 *                      back; the counters wait until perf is idle.
 *
 * Writes: root only; one value, one optional trailing newline; anything
 * else (junk, sign, out of range, over 64 bytes) is -EINVAL and changes
 * nothing. A valid write applies at once on every online CPU, also over
 * counters perf may be using, and to CPUs that come online later.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/cpu.h>
#include <linux/device.h>
#include <linux/mutex.h>
#include <linux/printk.h>
#include <linux/sysfs.h>

#include "drivers/arm64/pmu.h"
#include "drivers/common/parse.h"

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

static ssize_t cpus_show(struct device *dev,
			 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(&spmu_active_cpus));
}
static DEVICE_ATTR_RO(cpus);

static ssize_t cycle_counter_show(struct device *dev,
				  struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", !cpumask_empty(&spmu_active_cpus));
}
static DEVICE_ATTR_RO(cycle_counter);

static ssize_t recheck_ms_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_recheck_ms);
}
static DEVICE_ATTR_RO(recheck_ms);

/* A sysfs write holding one number in [@min, @max]; else -EINVAL. */
static int spmu_input_number(const char *buf, size_t count, unsigned int min,
			     unsigned int max, unsigned int *val)
{
	char in[SPMU_INPUT_MAX + 1];

	if (spmu_input_copy(in, buf, count))
		return -EINVAL;
	return spmu_parse_number(in, min, max, val);
}

static ssize_t user_access_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(spmu_settings.user_access));
}

static ssize_t user_access_store(struct device *dev,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	struct spmu_settings st;
	unsigned int val;

	if (spmu_input_number(buf, count, SPMU_UA_OFF, SPMU_UA_RW, &val))
		return -EINVAL;
	if (val == SPMU_UA_RW)
		pr_warn("user_access=2: any process can stop or reset the PMU counters for everyone\n");

	mutex_lock(&spmu_lock);
	st = spmu_settings;
	st.user_access = val;
	spmu_settings_set(&st);
	mutex_unlock(&spmu_lock);
	return count;
}
static DEVICE_ATTR_RW(user_access);

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

	if (spmu_input_number(buf, count, SPMU_RING_KERNEL, SPMU_RING_ALL,
			      &val))
		return -EINVAL;

	mutex_lock(&spmu_lock);
	st = spmu_settings;
	st.ring = val;
	spmu_settings_set(&st);
	mutex_unlock(&spmu_lock);
	return count;
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

	if (spmu_input_copy(in, buf, count))
		return -EINVAL;

	mutex_lock(&spmu_lock);
	st = spmu_settings;
	ret = spmu_parse_events(in, &st);
	if (!ret)
		spmu_settings_set(&st);
	mutex_unlock(&spmu_lock);
	return ret ?: count;
}
static DEVICE_ATTR_RW(events);

static ssize_t event_counters_show(struct device *dev,
				   struct device_attribute *attr, char *buf)
{
	unsigned int i;
	int len = 0;

	/* spmu_config changes under spmu_lock too. */
	mutex_lock(&spmu_lock);
	for (i = 0; i < spmu_config.nr_events; i++)
		len += sysfs_emit_at(buf, len, "%s%u:0x%04x", i ? " " : "",
				     spmu_config.idx[i],
				     spmu_settings.events[i]);
	mutex_unlock(&spmu_lock);
	return len + sysfs_emit_at(buf, len, "\n");
}
static DEVICE_ATTR_RO(event_counters);

static ssize_t interventions_show(struct device *dev,
				  struct device_attribute *attr, char *buf)
{
	struct spmu_interventions n;
	unsigned int cpu;
	int len = 0;

	cpus_read_lock();
	for_each_online_cpu(cpu) {
		spmu_cpu_interventions(cpu, &n);
		len += sysfs_emit_at(buf, len, "cpu%u hotplug=%lu pm=%lu perf=%lu\n",
				     cpu, n.hotplug, n.pm, n.perf);
	}
	cpus_read_unlock();
	return len;
}
static DEVICE_ATTR_RO(interventions);

static struct attribute *spmu_arm64_attrs[] = {
	&dev_attr_pmu_version.attr,
	&dev_attr_num_counters.attr,
	&dev_attr_cpus.attr,
	&dev_attr_cycle_counter.attr,
	&dev_attr_user_access.attr,
	&dev_attr_ring.attr,
	&dev_attr_events.attr,
	&dev_attr_event_counters.attr,
	&dev_attr_recheck_ms.attr,
	&dev_attr_interventions.attr,
	NULL
};

static const struct attribute_group spmu_arm64_group = {
	.attrs = spmu_arm64_attrs,
};

const struct attribute_group *spmu_arm64_groups[] = {
	&spmu_arm64_group,
	NULL
};
