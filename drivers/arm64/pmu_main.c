// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: give user space read access to the ARMv8 PMU cycle
 * counter (PMCCNTR_EL0) and a few event counters on every CPU, the way
 * RDTSC is readable on x86.
 *
 * arm_pmu resets the PMU on hotplug and on CPU PM exit, and perf takes
 * it over whenever it counts, so the state is applied from a cpuhp state
 * (which runs after arm_pmu's STARTING reset), again from a CPU PM
 * notifier, and checked by a per-CPU timer every recheck_ms.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/bitfield.h>
#include <linux/cpu_pm.h>
#include <linux/cpuhotplug.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/notifier.h>
#include <linux/preempt.h>

#include "drivers/arm64/pmu.h"
#include "drivers/common/parse.h"
#include "drivers/common/sysfs_dev.h"

/*
 * Taken as strings and parsed at init: a bad value then gets one line
 * naming the parameter and its valid range, not the kernel's generic one.
 */
static char *user_access = "1";
module_param_cb(user_access, &param_ops_charp, &user_access, 0);
__MODULE_PARM_TYPE(user_access, "uint");
MODULE_PARM_DESC(user_access,
		 "EL0 access to the counters: 0 off, 1 read-only (default), 2 read-write");

static char *ring = "3";
module_param_cb(ring, &param_ops_charp, &ring, 0);
__MODULE_PARM_TYPE(ring, "uint");
MODULE_PARM_DESC(ring, "What is counted: 1 kernel, 2 user, 3 both (default)");

static char *events = "0x8";
module_param(events, charp, 0);
MODULE_PARM_DESC(events,
		 "Event numbers for event counters, comma-separated, or none (default 0x8, instructions retired)");

static char *recheck_ms = "100";
module_param_cb(recheck_ms, &param_ops_charp, &recheck_ms, 0);
__MODULE_PARM_TYPE(recheck_ms, "uint");
MODULE_PARM_DESC(recheck_ms,
		 "Milliseconds between checks for state perf took, 10..10000 (default 100)");

struct spmu_hw spmu_hw;
unsigned int spmu_recheck_ms;
/* Set while cpuhp_setup_state() does the initial apply: not interventions. */
bool spmu_loading;

static enum cpuhp_state spmu_hp_state;

static int spmu_cpu_pm_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	switch (action) {
	case CPU_PM_EXIT:
	case CPU_PM_ENTER_FAILED:
		spmu_cpu_pm_exit();
		break;
	}
	return NOTIFY_OK;
}

static struct notifier_block spmu_cpu_pm_nb = {
	.notifier_call = spmu_cpu_pm_notify,
	/* Below arm_pmu's 0, so we run after its reset on CPU_PM_EXIT. */
	.priority = -1,
};

/* Return: 0 if this CPU has PMUv3 and spmu_hw is filled in, else -ENODEV. */
static int spmu_probe_hw(void)
{
	int ret = 0;

	/* Both registers from the same CPU. */
	preempt_disable();
	spmu_hw.pmuver = spmu_pmuver();
	if (spmu_pmuver_is_v3(spmu_hw.pmuver))
		spmu_hw.num_counters = FIELD_GET(SPMU_PMCR_N, spmu_read_pmcr());
	else
		ret = -ENODEV;
	preempt_enable();

	if (ret)
		pr_err("CPU has no PMUv3 (ID_AA64DFR0_EL1.PMUVer=%#x); not loading\n",
		       spmu_hw.pmuver);
	return ret;
}

/* Return: 0, or -EINVAL after one line naming the bad parameter. */
static int __init spmu_parse_params(struct spmu_settings *st)
{
	if (spmu_parse_number(user_access, SPMU_UA_OFF, SPMU_UA_RW,
			      &st->user_access)) {
		pr_err("invalid user_access=%s: valid are 0 (off), 1 (read-only), 2 (read-write)\n",
		       user_access);
		return -EINVAL;
	}
	if (spmu_parse_number(ring, SPMU_RING_KERNEL, SPMU_RING_ALL,
			      &st->ring)) {
		pr_err("invalid ring=%s: valid are 1 (kernel), 2 (user), 3 (both)\n",
		       ring);
		return -EINVAL;
	}
	if (spmu_parse_events(events, st)) {
		pr_err("invalid events=%s: valid is none or up to %u comma-separated event numbers 0..0xffff\n",
		       events, spmu_hw.num_counters);
		return -EINVAL;
	}
	if (spmu_parse_number(recheck_ms, SPMU_RECHECK_MS_MIN,
			      SPMU_RECHECK_MS_MAX, &spmu_recheck_ms)) {
		pr_err("invalid recheck_ms=%s: valid are %u..%u\n",
		       recheck_ms, SPMU_RECHECK_MS_MIN, SPMU_RECHECK_MS_MAX);
		return -EINVAL;
	}
	return 0;
}

static int __init spmu_init(void)
{
	int ret;

	ret = spmu_probe_hw();
	if (ret)
		return ret;
	ret = spmu_parse_params(&spmu_settings);
	if (ret)
		return ret;
	if (spmu_settings.user_access == SPMU_UA_RW)
		pr_warn("user_access=2: any process can stop or reset the PMU counters for everyone\n");
	spmu_config_build(&spmu_settings, &spmu_config);

	/* Before cpuhp, so no CPU PM exit after an apply goes unnoticed. */
	ret = cpu_pm_register_notifier(&spmu_cpu_pm_nb);
	if (ret)
		return ret;

	spmu_loading = true;
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "simple-pmu:online",
				spmu_cpu_online, spmu_cpu_offline);
	spmu_loading = false;
	if (ret < 0)
		goto err_cpu_pm;
	spmu_hp_state = ret;

	/* Last: a sysfs write must find every CPU set up. */
	ret = spmu_sysfs_register(spmu_arm64_groups);
	if (ret)
		goto err_cpuhp;

	pr_info("PMUv3 version %#x, %u event counters; counters readable from user space on CPUs %*pbl\n",
		spmu_hw.pmuver, spmu_hw.num_counters,
		cpumask_pr_args(&spmu_active_cpus));
	return 0;

err_cpuhp:
	cpuhp_remove_state(spmu_hp_state);
err_cpu_pm:
	cpu_pm_unregister_notifier(&spmu_cpu_pm_nb);
	return ret;
}

static void __exit spmu_exit(void)
{
	/* First, so no sysfs write runs while the CPUs are restored. */
	spmu_sysfs_unregister();
	/* Runs spmu_cpu_offline() on every online CPU: previous state back. */
	cpuhp_remove_state(spmu_hp_state);
	cpu_pm_unregister_notifier(&spmu_cpu_pm_nb);
	pr_info("previous PMU state restored; unloaded\n");
}

module_init(spmu_init);
module_exit(spmu_exit);

MODULE_DESCRIPTION("User-space read access to the ARMv8 PMU cycle and event counters");
MODULE_LICENSE("GPL");
