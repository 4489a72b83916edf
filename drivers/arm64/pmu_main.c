// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: give user space read access to the ARMv8 PMU cycle
 * counter (PMCCNTR_EL0) on every CPU, the way RDTSC is readable on x86.
 *
 * arm_pmu resets the PMU on hotplug and on CPU PM exit, so the state is
 * applied from a cpuhp state (which runs after arm_pmu's STARTING reset)
 * and again from a CPU PM notifier.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/bitfield.h>
#include <linux/cpu_pm.h>
#include <linux/cpuhotplug.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/preempt.h>
#include <asm/virt.h>

#include "drivers/arm64/pmu.h"
#include "drivers/common/sysfs_dev.h"

struct spmu_config spmu_config;
struct spmu_hw spmu_hw;

static enum cpuhp_state spmu_hp_state;

static int spmu_cpu_pm_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	switch (action) {
	case CPU_PM_EXIT:
	case CPU_PM_ENTER_FAILED:
		spmu_cpu_reapply();
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

static int __init spmu_init(void)
{
	int ret;

	ret = spmu_probe_hw();
	if (ret)
		return ret;

	/* Read-only user access: EN would let any process stop or reset counters. */
	spmu_config.pmuserenr = SPMU_PMUSERENR_RO;
	/* Count EL0 and EL1; a VHE kernel runs at EL2, so count that too. */
	spmu_config.pmccfiltr = is_kernel_in_hyp_mode() ? SPMU_PMCCFILTR_NSH : 0;

	ret = spmu_sysfs_register(spmu_arm64_groups);
	if (ret)
		return ret;

	/* Before cpuhp, so no CPU PM exit after an apply goes unnoticed. */
	ret = cpu_pm_register_notifier(&spmu_cpu_pm_nb);
	if (ret)
		goto err_sysfs;

	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "simple-pmu:online",
				spmu_cpu_online, spmu_cpu_offline);
	if (ret < 0)
		goto err_cpu_pm;
	spmu_hp_state = ret;

	pr_info("PMUv3 version %#x, %u event counters; cycle counter readable from user space on CPUs %*pbl\n",
		spmu_hw.pmuver, spmu_hw.num_counters,
		cpumask_pr_args(&spmu_active_cpus));
	return 0;

err_cpu_pm:
	cpu_pm_unregister_notifier(&spmu_cpu_pm_nb);
err_sysfs:
	spmu_sysfs_unregister();
	return ret;
}

static void __exit spmu_exit(void)
{
	/* Runs spmu_cpu_offline() on every online CPU: previous state back. */
	cpuhp_remove_state(spmu_hp_state);
	cpu_pm_unregister_notifier(&spmu_cpu_pm_nb);
	spmu_sysfs_unregister();
	pr_info("previous PMU state restored; unloaded\n");
}

module_init(spmu_init);
module_exit(spmu_exit);

MODULE_DESCRIPTION("User-space read access to the ARMv8 PMU cycle counter");
MODULE_LICENSE("GPL");
