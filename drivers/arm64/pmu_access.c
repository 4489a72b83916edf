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
 * The register is named in the instruction (no PMSELR indirection, which
 * perf uses): one function per event counter, chosen from a table.
 */
#define SPMU_DEFINE_ZERO_EVCNTR(n)					\
static void spmu_zero_evcntr##n(void)					\
{									\
	write_sysreg(0, pmevcntr##n##_el0);				\
}

SPMU_DEFINE_ZERO_EVCNTR(0)
SPMU_DEFINE_ZERO_EVCNTR(1)
SPMU_DEFINE_ZERO_EVCNTR(2)
SPMU_DEFINE_ZERO_EVCNTR(3)
SPMU_DEFINE_ZERO_EVCNTR(4)
SPMU_DEFINE_ZERO_EVCNTR(5)
SPMU_DEFINE_ZERO_EVCNTR(6)
SPMU_DEFINE_ZERO_EVCNTR(7)
SPMU_DEFINE_ZERO_EVCNTR(8)
SPMU_DEFINE_ZERO_EVCNTR(9)
SPMU_DEFINE_ZERO_EVCNTR(10)
SPMU_DEFINE_ZERO_EVCNTR(11)
SPMU_DEFINE_ZERO_EVCNTR(12)
SPMU_DEFINE_ZERO_EVCNTR(13)
SPMU_DEFINE_ZERO_EVCNTR(14)
SPMU_DEFINE_ZERO_EVCNTR(15)
SPMU_DEFINE_ZERO_EVCNTR(16)
SPMU_DEFINE_ZERO_EVCNTR(17)
SPMU_DEFINE_ZERO_EVCNTR(18)
SPMU_DEFINE_ZERO_EVCNTR(19)
SPMU_DEFINE_ZERO_EVCNTR(20)
SPMU_DEFINE_ZERO_EVCNTR(21)
SPMU_DEFINE_ZERO_EVCNTR(22)
SPMU_DEFINE_ZERO_EVCNTR(23)
SPMU_DEFINE_ZERO_EVCNTR(24)
SPMU_DEFINE_ZERO_EVCNTR(25)
SPMU_DEFINE_ZERO_EVCNTR(26)
SPMU_DEFINE_ZERO_EVCNTR(27)
SPMU_DEFINE_ZERO_EVCNTR(28)
SPMU_DEFINE_ZERO_EVCNTR(29)
SPMU_DEFINE_ZERO_EVCNTR(30)

static void (*const spmu_zero_evcntr[SPMU_MAX_EVENT_COUNTERS])(void) = {
	spmu_zero_evcntr0, spmu_zero_evcntr1, spmu_zero_evcntr2,
	spmu_zero_evcntr3, spmu_zero_evcntr4, spmu_zero_evcntr5,
	spmu_zero_evcntr6, spmu_zero_evcntr7, spmu_zero_evcntr8,
	spmu_zero_evcntr9, spmu_zero_evcntr10, spmu_zero_evcntr11,
	spmu_zero_evcntr12, spmu_zero_evcntr13, spmu_zero_evcntr14,
	spmu_zero_evcntr15, spmu_zero_evcntr16, spmu_zero_evcntr17,
	spmu_zero_evcntr18, spmu_zero_evcntr19, spmu_zero_evcntr20,
	spmu_zero_evcntr21, spmu_zero_evcntr22, spmu_zero_evcntr23,
	spmu_zero_evcntr24, spmu_zero_evcntr25, spmu_zero_evcntr26,
	spmu_zero_evcntr27, spmu_zero_evcntr28, spmu_zero_evcntr29,
	spmu_zero_evcntr30,
};

/* Counter @n (0..30 PMEVCNTR<n>_EL0, 31 PMCCNTR_EL0) := 0. */
static void spmu_zero_counter(unsigned int n)
{
	if (n == SPMU_CYCLE_COUNTER)
		write_sysreg(0, pmccntr_el0);
	else if (n < ARRAY_SIZE(spmu_zero_evcntr))
		spmu_zero_evcntr[n]();
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
	return READ_ONCE(spmu_user_access) && spmu_cpu_placed(c);
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
	if (cur != SPMU_PMUSERENR_RO) {
		if (c->grant == SPMU_GRANT_HELD)
			c->grant = SPMU_GRANT_LOST;
		else if (c->grant == SPMU_GRANT_ADOPTED)
			c->grant = SPMU_GRANT_NONE;
	}
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
		if (spmu_task_perf_user_reads(current))
			return false;
		if (c->grant == SPMU_GRANT_NONE)
			c->grant = SPMU_GRANT_ADOPTED;
		else if (c->grant == SPMU_GRANT_LOST)
			c->grant = SPMU_GRANT_HELD;
		return false;
	}
	reopened = c->grant == SPMU_GRANT_LOST;
	spmu_write_pmuserenr(SPMU_PMUSERENR_RO);
	c->grant = SPMU_GRANT_HELD;
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
	bool ours = c->grant == SPMU_GRANT_HELD ||
		    c->grant == SPMU_GRANT_ADOPTED;

	if (ours && spmu_read_pmuserenr() == SPMU_PMUSERENR_RO) {
		if (spmu_task_perf_user_reads(current) &&
		    spmu_task_perf_user_reads(next))
			return;
		spmu_write_pmuserenr(0);
	}
	c->grant = SPMU_GRANT_NONE;
}

static int spmu_cpu_pm_notify(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	switch (action) {
	case CPU_PM_ENTER:
		spmu_counters_pm_enter_this_cpu();
		break;
	/* arm_pmu restarts and reloads its events on both. */
	case CPU_PM_EXIT:
	case CPU_PM_ENTER_FAILED:
		spmu_counters_check_this_cpu(SPMU_CHECK_PM_EXIT);
		break;
	}
	return NOTIFY_OK;
}

static struct notifier_block spmu_cpu_pm_nb = {
	.notifier_call = spmu_cpu_pm_notify,
	/*
	 * Below arm_pmu's 0: we run after it on entry (events updated) and on
	 * exit (PMU restarted). A notifier between that refuses the entry
	 * leaves us neither call (see simple-pmu(4), BUGS).
	 */
	.priority = -1,
};

int spmu_access_init(void)
{
	int ret = cpu_pm_register_notifier(&spmu_cpu_pm_nb);

	if (ret)
		pr_err("cannot register the CPU PM notifier (%d)\n", ret);
	return ret;
}

void spmu_access_exit(void)
{
	cpu_pm_unregister_notifier(&spmu_cpu_pm_nb);
}
