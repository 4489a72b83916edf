// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: the arch hooks of the perf-owned counters
 * (drivers/common/counters.c), and whether user RDPMC is allowed.
 *
 * User RDPMC is CR4.PCE, which the kernel rewrites on every switch to
 * another mm (cr4_update_pce_mm()): it stays set only if the cpu PMU's
 * rdpmc attribute is 2, or for a task that mmapped a perf event. The
 * driver never writes CR4 (from 6.19 its helpers are KVM's alone, and a
 * raw write leaves the shadow stale); it only looks, to tell user space
 * and the log when reads would fault.
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
#include "drivers/x86/pmu.h"

/* This CPU's PCE was last seen set by rdpmc=2 rather than a perf mmap. */
static DEFINE_PER_CPU(bool, spmu_rdpmc_ok);
/*
 * Events of ours with and without perf's per-counter user RDPMC block
 * (7.x), which perf decides once, when it creates an event.
 */
static DEFINE_PER_CPU(bool, spmu_user_blocked);
static DEFINE_PER_CPU(bool, spmu_user_unblocked);

/*
 * CR4.PCE of this CPU, interrupts off. Set while the loaded mm has no
 * perf mmap (perf_rdpmc_allowed 0) only under rdpmc=2; set while it has
 * one tells nothing, and the last answer stands. In lazy TLB mode the
 * loaded mm is active_mm, or init_mm after leave_mm(), which has no perf
 * mmap either.
 */
static bool spmu_rdpmc_always_here(bool last)
{
	struct mm_struct *mm = current->active_mm;

	if (!(native_read_cr4() & X86_CR4_PCE))
		return false;
	if (mm && atomic_read(&mm->context.perf_rdpmc_allowed))
		return last;
	return true;
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
	bool ok = spmu_rdpmc_always_here(this_cpu_read(spmu_rdpmc_ok));

	this_cpu_write(spmu_rdpmc_ok, ok);
	spmu_note_user_blocks(c);
	WRITE_ONCE(c->open, c->placed && ok && READ_ONCE(spmu_user_access));
	return false;
}

void spmu_arch_revoke(struct spmu_pcpu *c, struct task_struct *next)
{
	WRITE_ONCE(c->open, false);
	/* The events go: nothing of ours is here any more. */
	this_cpu_write(spmu_user_blocked, false);
	this_cpu_write(spmu_user_unblocked, false);
	this_cpu_write(spmu_rdpmc_ok, false);
}

bool spmu_cpu_rdpmc_always(unsigned int cpu)
{
	return READ_ONCE(per_cpu(spmu_rdpmc_ok, cpu));
}

/* On every CPU holding our counters, and at least one, as last checked. */
bool spmu_rdpmc_always_everywhere(void)
{
	const struct spmu_pcpu *c;
	unsigned int cpu, n = 0;

	for_each_online_cpu(cpu) {
		c = spmu_counters_cpu(cpu);
		if (!READ_ONCE(c->placed))
			continue;
		if (!spmu_cpu_rdpmc_always(cpu))
			return false;
		n++;
	}
	return n > 0;
}

/*
 * Every few seconds from a few after load (not at load, where the
 * package's udev rule has not yet had the chance to set rdpmc=2 on the
 * module's add event): say once if user RDPMC is not allowed, and on
 * kernels where perf blocks user RDPMC per counter (7.x) take the events
 * again when the rdpmc setting no longer matches how perf made them:
 * blocked while rdpmc is 2, or readable by perf-mmap tasks while it is not.
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
static DECLARE_DELAYED_WORK(spmu_rdpmc_watch, spmu_rdpmc_watch_fn);
static bool spmu_rdpmc_noticed;

static void spmu_rdpmc_watch_fn(struct work_struct *work)
{
	static struct spmu_counter_set set;
	bool always, stale;

	mutex_lock(&spmu_lock);
	always = spmu_rdpmc_always_everywhere();
	if (!always && spmu_settings.rdpmc_fixed && !spmu_rdpmc_noticed) {
		spmu_rdpmc_noticed = true;
		pr_notice("user RDPMC is not allowed: counters are held but reading them from user space faults until the cpu PMU's rdpmc attribute is 2 (cpu_core and cpu_atom on hybrid parts); see rdpmc_always and cpuN/user_access\n");
	}
	stale = always ? spmu_any_cpu(&spmu_user_blocked) :
			 spmu_any_cpu(&spmu_user_unblocked);
	if (spmu_settings.rdpmc_fixed && stale) {
		pr_info("rdpmc is %s2 now: taking the events again, which perf made for the other setting\n",
			always ? "" : "not ");
		spmu_counter_set_build(spmu_settings.ring, &set);
		if (spmu_counters_replace(&set))
			pr_err("could not take the events again; write 0 then 1 to rdpmc_fixed\n");
	}
	mutex_unlock(&spmu_lock);
	schedule_delayed_work(&spmu_rdpmc_watch, SPMU_RDPMC_WATCH_DELAY);
}

void spmu_rdpmc_watch_start(void)
{
	schedule_delayed_work(&spmu_rdpmc_watch, SPMU_RDPMC_WATCH_DELAY);
}

void spmu_rdpmc_watch_stop(void)
{
	cancel_delayed_work_sync(&spmu_rdpmc_watch);
}
