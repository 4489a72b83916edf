// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: the arch hooks of the perf-owned counters
 * (drivers/common/counters.c), and whether user RDPMC is allowed.
 *
 * User RDPMC is CR4.PCE, which the kernel rewrites on every switch to
 * another mm (cr4_update_pce_mm()): it stays set only if the cpu PMU's
 * rdpmc attribute is 2, or for a process perf lets in (one that mapped a
 * perf event, or /dev/simple-pmu: pmu_member.c). The driver never writes
 * CR4 (from 6.19 its helpers are KVM's alone, and a raw write leaves the
 * shadow stale); it only looks, to tell whether rdpmc 2 opens RDPMC to
 * every process (sysfs access, rdpmc_always).
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
#include <asm/processor-flags.h>
#include <asm/special_insns.h>

#include "compat.h"
#include "drivers/common/counters.h"
#include "drivers/x86/plan.h"
#include "drivers/x86/pmu.h"

/* What this CPU's checks saw rdpmc allow (enum spmu_x86_rdpmc_seen). */
static DEFINE_PER_CPU(int, spmu_rdpmc_seen);
/*
 * Events of ours with and without perf's per-counter user RDPMC block
 * (7.x), which perf decides when it activates an event.
 */
static DEFINE_PER_CPU(bool, spmu_user_blocked);
static DEFINE_PER_CPU(bool, spmu_user_unblocked);

/*
 * What rdpmc allows, from this CPU's CR4.PCE and the loaded mm, interrupts
 * off (spmu_x86_rdpmc_seen()). In lazy TLB mode the loaded mm is
 * active_mm, or init_mm after leave_mm(), which has no perf mapping.
 */
static enum spmu_x86_rdpmc_seen spmu_rdpmc_look(enum spmu_x86_rdpmc_seen last)
{
	struct mm_struct *mm = current->active_mm;

	return spmu_x86_rdpmc_seen(native_read_cr4() & X86_CR4_PCE,
				   mm && atomic_read(&mm->context.perf_rdpmc_allowed),
				   last);
}

/*
 * CR4.PCE for the calling process: any CPU it runs on has its mm loaded,
 * and the kernel sets PCE from that mm at every switch to it.
 */
bool spmu_pce_here(void)
{
	return native_read_cr4() & X86_CR4_PCE;
}

/*
 * RDPMC's ECX for the counter perf gave @event (bit 30: fixed counter),
 * if it is one the event may occupy at all; SPMU_NO_INDEX otherwise.
 */
int spmu_arch_counter_index(struct perf_event *event)
{
	return spmu_x86_published_index(&spmu_hw.plan, event->attr.config,
					event->hw.event_base_rdpmc,
					event->hw.config &
					SPMU_EVENTSEL_RDPMC_USER_DISABLE);
}

/* Note which of this CPU's events perf blocked for user RDPMC. */
static void spmu_note_user_blocks(const struct spmu_pcpu *c)
{
	bool blocked = false, unblocked = false;
	unsigned int i;

	for (i = 0; spmu_hw.user_disable && i < spmu_hw.plan.nr; i++) {
		if (!c->event[i])
			continue;
		if (c->event[i]->hw.config & SPMU_EVENTSEL_RDPMC_USER_DISABLE)
			blocked = true;
		else
			unblocked = true;
	}
	this_cpu_write(spmu_user_blocked, blocked);
	this_cpu_write(spmu_user_unblocked, unblocked);
}

bool spmu_arch_sync_access(struct spmu_pcpu *c, enum spmu_check_cause cause)
{
	enum spmu_x86_rdpmc_seen seen =
		spmu_rdpmc_look(this_cpu_read(spmu_rdpmc_seen));

	this_cpu_write(spmu_rdpmc_seen, seen);
	spmu_note_user_blocks(c);
	/* Readable by let-in processes, unless rdpmc 0 was seen. */
	WRITE_ONCE(c->open, spmu_cpu_placed(c) && seen != SPMU_RDPMC_NEVER &&
		   READ_ONCE(spmu_user_access));
	return false;
}

void spmu_arch_revoke(struct spmu_pcpu *c, struct task_struct *next)
{
	WRITE_ONCE(c->open, false);
	/* The events go: nothing of ours is here any more. */
	this_cpu_write(spmu_user_blocked, false);
	this_cpu_write(spmu_user_unblocked, false);
	this_cpu_write(spmu_rdpmc_seen, SPMU_RDPMC_MAPPED);
}

bool spmu_cpu_rdpmc_always(unsigned int cpu)
{
	return READ_ONCE(per_cpu(spmu_rdpmc_seen, cpu)) == SPMU_RDPMC_ALWAYS;
}

/* CPUs holding our events (placed or not), and of those with rdpmc 2 seen. */
static void spmu_rdpmc_census(unsigned int *held, unsigned int *always)
{
	unsigned int cpu;

	*held = 0;
	*always = 0;
	for_each_online_cpu(cpu) {
		if (!spmu_cpu_held(spmu_counters_cpu(cpu)))
			continue;
		(*held)++;
		if (spmu_cpu_rdpmc_always(cpu))
			(*always)++;
	}
}

/*
 * rdpmc 2 on every CPU holding our events, and at least one, as last
 * checked. Counted on the CPUs holding events, not on the placed ones:
 * perf's per-counter block (7.x) leaves events unplaced.
 */
bool spmu_rdpmc_always_everywhere(void)
{
	unsigned int held, always;

	spmu_rdpmc_census(&held, &always);
	return spmu_x86_everyone(held, always);
}

/*
 * On kernels where perf blocks user RDPMC per counter (7.x, Panther Cove
 * on), every few seconds: take the events again when the rdpmc setting no
 * longer matches how perf made them, blocked while rdpmc is 2 or readable
 * by perf-mapped processes while it is not. Deferrable: an idle machine
 * is not woken for it; elsewhere there is nothing to watch.
 */
#define SPMU_RDPMC_WATCH_DELAY		(3 * HZ)

static bool spmu_any_cpu(bool __percpu *flag)
{
	unsigned int cpu;

	for_each_online_cpu(cpu) {
		if (READ_ONCE(*per_cpu_ptr(flag, cpu)))
			return true;
	}
	return false;
}

static void spmu_rdpmc_watch_fn(struct work_struct *work);
static DECLARE_DEFERRABLE_WORK(spmu_rdpmc_watch, spmu_rdpmc_watch_fn);

static void spmu_rdpmc_watch_fn(struct work_struct *work)
{
	static struct spmu_counter_set set;
	unsigned int held, always;

	mutex_lock(&spmu_lock);
	spmu_rdpmc_census(&held, &always);
	if (spmu_settings.rdpmc_fixed &&
	    spmu_x86_retake(held, always, spmu_any_cpu(&spmu_user_blocked),
			    spmu_any_cpu(&spmu_user_unblocked))) {
		pr_info("rdpmc is %s2 now: taking the events again, which perf made for the other setting\n",
			always == held ? "" : "not ");
		spmu_counter_set_build(spmu_settings.ring, &set);
		if (spmu_counters_replace(&set))
			pr_err("could not take the events again; write 0 then 1 to rdpmc_fixed\n");
	}
	mutex_unlock(&spmu_lock);
	schedule_delayed_work(&spmu_rdpmc_watch, SPMU_RDPMC_WATCH_DELAY);
}

void spmu_rdpmc_watch_start(void)
{
	if (spmu_hw.user_disable)
		schedule_delayed_work(&spmu_rdpmc_watch,
				      SPMU_RDPMC_WATCH_DELAY);
}

void spmu_rdpmc_watch_stop(void)
{
	cancel_delayed_work_sync(&spmu_rdpmc_watch);
}
