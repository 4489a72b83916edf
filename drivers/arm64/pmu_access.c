// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: where perf placed our events, and user access to them.
 *
 * Access is open on a CPU while a let-in thread runs there (pmu_member.c),
 * or always with everyone=1. The driver writes PMUSERENR_EL0, only ever to
 * CR|ER (EL0 may read the cycle and event counters) or back to 0, never
 * clearing perf's own EL0 grant (5.17+, spmu_arch_revoke()); and it zeroes
 * the counters no perf event holds, at each check while access is open. perf
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

#include <linux/bitfield.h>
#include <linux/cpu_pm.h>
#include <linux/notifier.h>
#include <linux/perf/arm_pmu.h>
#include <linux/perf_event.h>

#include "compat.h"
#include "drivers/arm64/pmu.h"

/*
 * KVM's, not ours, while a vCPU is loaded. EN is never a value we write:
 * where the kernel does not export kvm_get_running_vcpu() (7.x), a
 * PMUSERENR with EN set is how KVM's (ER|CR|SW|EN under VHE, 7.2's
 * arch/arm64/kvm/hyp/include/hyp/switch.h) shows. UEN is perf's own grant
 * to a perf_user_access task on PMUv3p9, with its per-counter filter.
 */
static bool spmu_pmuserenr_foreign(u64 cur)
{
	return spmu_kvm_vcpu_loaded(spmu_member_ops()) ||
	       (cur & (SPMU_PMUSERENR_EN | SPMU_PMUSERENR_UEN));
}

/*
 * On this CPU, as armv8pmu_enable_user_access() does before it grants:
 * zero every counter perf is not using, so what a released event left
 * there (another task's count) is not readable at EL0. perf reprograms a
 * counter whenever it takes one, so this disturbs no count. used_mask
 * changes only on this CPU with interrupts off, as we run.
 */
static void spmu_zero_unused_counters(struct spmu_pcpu *c)
{
	struct perf_event *ev = c->event[SPMU_SLOT_CYCLES];
	struct pmu_hw_events *hw;
	unsigned int n, nr;

	if (!ev)
		return;
	hw = this_cpu_ptr(to_arm_pmu(ev->pmu)->hw_events);
	nr = FIELD_GET(SPMU_PMCR_N, spmu_read_pmcr());
	for (n = 0; n < nr; n++)
		if (!test_bit(spmu_counter_to_armpmu_idx(n), hw->used_mask))
			spmu_zero_counter(n);
	if (!test_bit(spmu_counter_to_armpmu_idx(SPMU_CYCLE_COUNTER),
		      hw->used_mask))
		spmu_zero_counter(SPMU_CYCLE_COUNTER);
}

/* On this CPU: a 64-bit event on an event counter needs PMUv3p5 here. */
static bool spmu_this_cpu_long_events(void)
{
	return FIELD_GET(SPMU_DFR0_PMUVER, spmu_read_id_aa64dfr0()) >=
	       SPMU_DFR0_PMUVER_V3P5;
}

int spmu_arch_counter_index(struct perf_event *event)
{
	int n = spmu_armpmu_idx_to_counter(event->hw.idx);

	if (n < 0 || n > SPMU_CYCLE_COUNTER)
		return SPMU_NO_INDEX;
	/*
	 * A 64-bit event on a chained pair (a CPU below PMUv3p5, which may
	 * come online after load): hw.idx is the high half, and no single
	 * mrs reads the pair.
	 */
	if (n != SPMU_CYCLE_COUNTER && (event->hw.flags & ARMPMU_EVT_64BIT) &&
	    !spmu_this_cpu_long_events())
		return SPMU_NO_INDEX;
	return n;
}

/* Our events are placed and the admin has not closed access. */
static bool spmu_access_ready(struct spmu_pcpu *c)
{
	return READ_ONCE(spmu_user_access) && c->placed;
}

/* Whom access is for: everyone, or the let-in thread running here. */
static bool spmu_access_wanted(void)
{
	return spmu_everyone || spmu_member_running_here();
}

bool spmu_arch_sync_access(struct spmu_pcpu *c, enum spmu_check_cause cause)
{
	bool ready = spmu_access_ready(c);
	u64 cur = spmu_read_pmuserenr();
	bool reopened;

	if (spmu_pmuserenr_foreign(cur)) {
		WRITE_ONCE(c->kvm_deferrals, c->kvm_deferrals + 1);
		WRITE_ONCE(c->open, false);
		return false;
	}
	/* Someone else wrote it since: not ours to take back. */
	if (c->granted && cur != SPMU_PMUSERENR_RO)
		WRITE_ONCE(c->granted, false);
	/* Open for whom it is for (sysfs cpus), even while none of them runs. */
	WRITE_ONCE(c->open, ready);
	if (!ready || !spmu_access_wanted()) {
		spmu_arch_revoke(c, current);
		return false;
	}
	/*
	 * At every check, not only when granting: before 5.17 perf never takes
	 * access back when another user releases a counter, so what it left
	 * there would stay readable (tests/guest/arm64/41-no-residue.sh).
	 */
	spmu_zero_unused_counters(c);
	/*
	 * Readable already: perf's grant to a task with EL0-read events of its
	 * own, or a value left from before (a context perf swapped): ours to
	 * close when this thread leaves, unless it is perf's for current.
	 */
	if (cur == SPMU_PMUSERENR_RO) {
		if (!spmu_task_perf_user_reads(current))
			WRITE_ONCE(c->granted, true);
		return false;
	}
	reopened = c->was_granted;
	spmu_write_pmuserenr(SPMU_PMUSERENR_RO);
	WRITE_ONCE(c->granted, true);
	c->was_granted = true;
	if (reopened)
		pr_debug("cpu%u: user access was revoked; reopened (cause %d)\n",
			 smp_processor_id(), cause);
	return reopened;
}

/*
 * Close what we opened, if it still reads as we left it, as @next (the
 * task running here, or about to) comes in. perf grants a task with
 * EL0-read events of its own the same CR|ER at its sched-in, after this
 * (and clears it for one without); only when perf swaps equal contexts
 * between current and @next does it write nothing, and then the value is
 * perf's for @next as much as ours: clearing it would kill that task's
 * next read (perf's own self-monitoring programs, at a user_access
 * write). Left then, still ours to close later.
 */
void spmu_arch_revoke(struct spmu_pcpu *c, struct task_struct *next)
{
	if (c->granted && spmu_read_pmuserenr() == SPMU_PMUSERENR_RO) {
		if (spmu_task_perf_user_reads(current) &&
		    spmu_task_perf_user_reads(next))
			return;
		spmu_write_pmuserenr(0);
	}
	WRITE_ONCE(c->granted, false);
	c->was_granted = false;
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
