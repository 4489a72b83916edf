// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: where perf placed our events, and user access to them.
 *
 * PMUSERENR_EL0 is the one register this driver writes, and only ever to
 * CR|ER (EL0 may read the cycle and event counters) or back to 0. perf
 * writes it too: from 5.17 every armv8pmu_start() sets it for the task
 * that runs, which is 0 unless that task uses perf's own user access, and
 * arm_pmu restarts the PMU after CPU hotplug and on every CPU PM exit.
 * So access is opened again from a CPU PM notifier (after arm_pmu's) and
 * a deferrable per-CPU timer (drivers/common/counters.c); until then, EL0
 * reads fault (SIGILL) rather than read a counter that may be someone
 * else's. Never while a KVM vCPU is loaded on the CPU: KVM then holds the
 * guest's PMUSERENR in the register and a shadow of the host's.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/cpu_pm.h>
#include <linux/notifier.h>
#include <linux/perf/arm_pmu.h>
#include <linux/perf_event.h>

#include "compat.h"
#include "drivers/arm64/pmu.h"

int spmu_arch_counter_index(struct perf_event *event)
{
	int n = spmu_armpmu_idx_to_counter(event->hw.idx);

	if (n < 0 || n > SPMU_CYCLE_COUNTER)
		return SPMU_NO_INDEX;
	/* A 64-bit event on a chained pair: no single mrs reads it. */
	if (n != SPMU_CYCLE_COUNTER && !spmu_hw.long_events &&
	    (event->hw.flags & ARMPMU_EVT_64BIT))
		return SPMU_NO_INDEX;
	return n;
}

/*
 * KVM's, not ours, while a vCPU is loaded. EN is never a value we write:
 * where the kernel does not export kvm_get_running_vcpu() (7.x), a
 * PMUSERENR with EN set is how KVM's (ER|CR|SW|EN under VHE) shows.
 */
static bool spmu_pmuserenr_foreign(u64 cur)
{
	return spmu_kvm_vcpu_loaded() || (cur & SPMU_PMUSERENR_EN);
}

bool spmu_arch_sync_access(struct spmu_pcpu *c, enum spmu_check_cause cause)
{
	bool want = READ_ONCE(spmu_user_access) && c->placed;
	u64 cur = spmu_read_pmuserenr();
	bool reopened;

	if (spmu_pmuserenr_foreign(cur)) {
		WRITE_ONCE(c->kvm_deferrals, c->kvm_deferrals + 1);
		return false;
	}
	if (!want) {
		spmu_arch_revoke(c);
		return false;
	}
	if (cur == SPMU_PMUSERENR_RO) {
		WRITE_ONCE(c->granted, true);
		return false;
	}
	reopened = c->granted;
	spmu_write_pmuserenr(SPMU_PMUSERENR_RO);
	WRITE_ONCE(c->granted, true);
	if (reopened)
		pr_debug("cpu%u: user access was revoked; reopened (cause %d)\n",
			 smp_processor_id(), cause);
	return reopened;
}

void spmu_arch_revoke(struct spmu_pcpu *c)
{
	if (!c->granted)
		return;
	spmu_write_pmuserenr(0);
	WRITE_ONCE(c->granted, false);
}

static int spmu_cpu_pm_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	switch (action) {
	case CPU_PM_EXIT:
	case CPU_PM_ENTER_FAILED:
		spmu_counters_check_this_cpu(SPMU_CHECK_PM_EXIT);
		break;
	}
	return NOTIFY_OK;
}

static struct notifier_block spmu_cpu_pm_nb = {
	.notifier_call = spmu_cpu_pm_notify,
	/* Below arm_pmu's 0: we run after it restarts the PMU on exit. */
	.priority = -1,
};

int spmu_access_init(void)
{
	return cpu_pm_register_notifier(&spmu_cpu_pm_nb);
}

void spmu_access_exit(void)
{
	cpu_pm_unregister_notifier(&spmu_cpu_pm_nb);
}
