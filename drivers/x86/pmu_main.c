// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: user-space RDPMC of core cycles, instructions retired
 * and reference cycles on Intel CPUs with architectural perfmon, the
 * 2011 driver's interface on the counters of today's perf.
 *
 * The counters are perf's: on every CPU the driver holds pinned kernel
 * events (PERF_TYPE_HARDWARE, so hybrid E-cores get theirs from cpu_atom)
 * and publishes in sysfs which counter each one landed in, as the RDPMC
 * index. It writes no MSR and no CR4 bit: a process is let in to RDPMC
 * through /dev/simple-pmu as perf lets in a process that maps a perf event
 * (pmu_member.c); the cpu PMU's rdpmc attribute stays the admin's. See
 * docs/simple-pmu.4.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>

#include "drivers/common/parse.h"
#include "drivers/common/sysfs_dev.h"
#include "drivers/x86/pmu.h"

static struct spmu_num_param spmu_ring_param = {
	&spmu_settings.ring, SPMU_RING_KERNEL, SPMU_RING_ALL
};
module_param_cb(ring, &spmu_num_ops, &spmu_ring_param, 0);
__MODULE_PARM_TYPE(ring, "uint");
MODULE_PARM_DESC(ring,
		 "What is counted: 1 kernel, 2 user (default), 3 both; kernel counting is visible to every user");

static struct spmu_num_param spmu_rdpmc_fixed_param = {
	&spmu_settings.rdpmc_fixed, 0, 1
};
module_param_cb(rdpmc_fixed, &spmu_num_ops, &spmu_rdpmc_fixed_param, 0);
__MODULE_PARM_TYPE(rdpmc_fixed, "uint");
MODULE_PARM_DESC(rdpmc_fixed,
		 "Hold the counters from load: 1 (default), 0 not until rdpmc_fixed is written");

static struct spmu_num_param spmu_recheck_ms_param = {
	&spmu_recheck_ms, SPMU_RECHECK_MS_MIN, SPMU_RECHECK_MS_MAX
};
module_param_cb(recheck_ms, &spmu_num_ops, &spmu_recheck_ms_param, 0);
__MODULE_PARM_TYPE(recheck_ms, "uint");
MODULE_PARM_DESC(recheck_ms,
		 "Milliseconds between checks of where the counters are, 10..10000 (default 100)");

static int __init spmu_init(void)
{
	static struct spmu_counter_set set;
	int ret;

	if (spmu_probe_hw()) {
		pr_err("CPU has no architectural perfmon (CPUID leaf 0xA) that perf drives; not loading\n");
		return -ENODEV;
	}
	if (spmu_settings.ring & SPMU_RING_KERNEL)
		pr_notice("ring=%u: kernel activity is counted, and readable by every user\n",
			  spmu_settings.ring);

	mutex_lock(&spmu_lock);
	ret = 0;
	if (spmu_settings.rdpmc_fixed) {
		spmu_counter_set_build(spmu_settings.ring, &set);
		ret = spmu_counters_start(&set);
	}
	mutex_unlock(&spmu_lock);
	if (ret) {
		pr_err("perf did not give the events to any CPU (%d); is there a cpu PMU that counts them?\n",
		       ret);
		return ret;
	}

	/* After the counters: a sysfs write must find them held. */
	ret = spmu_sysfs_register(spmu_x86_groups, true);
	if (ret)
		goto out_counters;
	/* Last: a process let in finds the counters published. */
	ret = spmu_members_init();
	if (ret)
		goto out_sysfs;
	spmu_rdpmc_watch_start();

	pr_info("perfmon version %u, fixed counters %#x (perf drives at least %#x) of %u bits, %u general of %u bits%s; %u events taken through perf (sysfs events, cpus)\n",
		spmu_hw.perfmon.version, spmu_hw.perfmon.fixed_mask,
		spmu_hw.perf_fixed_mask, spmu_hw.perfmon.fixed_width,
		spmu_hw.perfmon.num_gp, spmu_hw.perfmon.gp_width,
		spmu_hw.hybrid ? ", hybrid" : "", spmu_hw.plan.nr);
	return 0;

out_sysfs:
	spmu_sysfs_unregister();
out_counters:
	spmu_counters_stop();
	return ret;
}

static void __exit spmu_exit(void)
{
	spmu_members_exit();
	spmu_rdpmc_watch_stop();
	/* First, so no sysfs write runs while the counters go. */
	spmu_sysfs_unregister();
	spmu_counters_stop();
	pr_info("counters given back to perf; unloaded\n");
}

module_init(spmu_init);
module_exit(spmu_exit);

MODULE_DESCRIPTION("User-space RDPMC of Intel cycle and instruction counters taken through perf");
MODULE_LICENSE("GPL");
