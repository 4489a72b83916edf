// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: user-space read access to the ARMv8 PMU cycle counter
 * and a few event counters, the way RDTSC is readable on x86.
 *
 * The counters are perf's: on every CPU the driver holds pinned kernel
 * events (CPU_CYCLES and the configured events) and, once perf has placed
 * them, opens EL0 read access (PMUSERENR_EL0 = CR|ER) while a thread let
 * in through /dev/simple-pmu runs (or, with everyone=1, always),
 * publishing in sysfs which counter each one landed in. It never writes a
 * filter, an event type, PMCR or a counter an event holds (the unheld ones
 * it zeroes at each check while access is open): docs/simple-pmu.4.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/cpumask.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>

#include "compat.h"
#include "drivers/arm64/pmu.h"
#include "drivers/common/parse.h"
#include "drivers/common/sysfs_dev.h"

static struct spmu_num_param spmu_ring_param = {
	&spmu_settings.ring, SPMU_RING_KERNEL, SPMU_RING_ALL
};
module_param_cb(ring, &spmu_num_ops, &spmu_ring_param, 0);
__MODULE_PARM_TYPE(ring, "uint");
MODULE_PARM_DESC(ring,
		 "What is counted: 1 kernel, 2 user (default), 3 both; kernel counting is visible to every user");

static struct spmu_num_param spmu_user_access_param = {
	&spmu_user_access, 0, 1
};
module_param_cb(user_access, &spmu_num_ops, &spmu_user_access_param, 0);
__MODULE_PARM_TYPE(user_access, "uint");
MODULE_PARM_DESC(user_access,
		 "EL0 read access to the counters: 0 closed, 1 read-only (default)");

module_param_named(everyone, spmu_everyone, bool, 0444);
MODULE_PARM_DESC(everyone,
		 "Open EL0 reads to every user on every CPU, not only to threads let in through /dev/simple-pmu (default N): a side channel, see simple-pmu(4)");

static struct spmu_num_param spmu_recheck_ms_param = {
	&spmu_recheck_ms, SPMU_RECHECK_MS_MIN, SPMU_RECHECK_MS_MAX
};
module_param_cb(recheck_ms, &spmu_num_ops, &spmu_recheck_ms_param, 0);
__MODULE_PARM_TYPE(recheck_ms, "uint");
MODULE_PARM_DESC(recheck_ms,
		 "Milliseconds between checks that user access is still open, 10..10000 (default 100)");

static int spmu_events_set(const char *val, const struct kernel_param *kp)
{
	char in[SPMU_INPUT_MAX + 1];

	if (!val || spmu_input_copy(in, val, strlen(val)) ||
	    spmu_parse_events(in, &spmu_settings)) {
		pr_err("invalid events=%s: valid is none or up to %u comma-separated event numbers 0..0xffff\n",
		       val, SPMU_MAX_EVENTS);
		return -EINVAL;
	}
	return 0;
}

static int spmu_events_get(char *buf, const struct kernel_param *kp)
{
	unsigned int i;
	int len = 0;

	for (i = 0; i < spmu_settings.nr_events; i++)
		len += sysfs_emit_at(buf, len, "%s%#x", i ? "," : "",
				     spmu_settings.events[i]);
	if (!i)
		len = sysfs_emit(buf, "none");
	return len + sysfs_emit_at(buf, len, "\n");
}

static const struct kernel_param_ops spmu_events_ops = {
	.set = spmu_events_set,
	.get = spmu_events_get,
};
module_param_cb(events, &spmu_events_ops, NULL, 0);
__MODULE_PARM_TYPE(events, "charp");
MODULE_PARM_DESC(events,
		 "Events for event counters, comma-separated, or none (default 0x8, instructions retired)");

static int __init spmu_init(void)
{
	static struct spmu_counter_set set;
	int ret;

	ret = spmu_probe_hw();
	if (ret)
		return ret;
	ret = spmu_check_events(&spmu_settings);
	if (ret)
		return ret;
	if (spmu_settings.ring & SPMU_RING_KERNEL)
		pr_notice("ring=%u: kernel activity is counted, and readable by every user\n",
			  spmu_settings.ring);

	/* Before the events exist, so no CPU PM exit goes unnoticed. */
	ret = spmu_access_init();
	if (ret)
		return ret;

	mutex_lock(&spmu_lock);
	spmu_counter_set_build(&spmu_settings, &set);
	ret = spmu_counters_start(&set);
	mutex_unlock(&spmu_lock);
	if (ret) {
		pr_err("perf did not give the events to any CPU (%d); is there a PMU driver (CONFIG_HW_PERF_EVENTS, a PMU node in the device tree or ACPI)?\n",
		       ret);
		goto err_access;
	}
	if (!SPMU_PERF_REVOKES_USER_ACCESS)
		pr_notice("this kernel's perf does not withdraw user access when it moves or releases a counter: until the next check (recheck_ms), EL0 may read another event's counter there\n");

	/* Last: a sysfs write must find the counters held. */
	ret = spmu_sysfs_register(spmu_arm64_groups, true);
	if (ret)
		goto err_counters;
	ret = spmu_members_init();
	if (ret)
		goto err_sysfs;

	pr_info("PMUv3 version %#x, %u event counters of %u bits; cycles and %u events taken through perf; EL0 reads for %s\n",
		spmu_hw.pmuver, spmu_hw.num_counters, spmu_event_width(),
		spmu_settings.nr_events,
		spmu_everyone ? "every user (everyone=1)" :
				"threads let in through /dev/simple-pmu");
	return 0;

err_sysfs:
	spmu_sysfs_unregister();
err_counters:
	spmu_counters_stop();
err_access:
	spmu_access_exit();
	return ret;
}

static void __exit spmu_exit(void)
{
	/* Nobody is let in any more, and no thread's switch calls us. */
	spmu_members_exit();
	/* First, so no sysfs write runs while the counters go. */
	spmu_sysfs_unregister();
	/* Closes user access on every CPU, then releases the events. */
	spmu_counters_stop();
	spmu_access_exit();
	pr_info("user access closed, counters given back to perf; unloaded\n");
}

module_init(spmu_init);
module_exit(spmu_exit);

MODULE_DESCRIPTION("User-space read access to ARMv8 PMU counters taken through perf");
MODULE_LICENSE("GPL");
