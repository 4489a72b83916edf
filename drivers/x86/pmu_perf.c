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
#include <linux/percpu.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
#include <asm/processor-flags.h>
#include <asm/special_insns.h>

#include "drivers/common/counters.h"
#include "drivers/x86/pmu.h"

/* This CPU's PCE was last seen set by rdpmc=2 rather than a perf mmap. */
static DEFINE_PER_CPU(bool, spmu_rdpmc_ok);

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
	unsigned int ecx = event->hw.event_base_rdpmc;
	unsigned int i;

	for (i = 0; i < spmu_hw.plan.nr; i++) {
		if (spmu_hw.plan.slot[i].hw_id == event->attr.config)
			return spmu_x86_index_ok(&spmu_hw.plan.slot[i], ecx) ?
			       ecx : SPMU_NO_INDEX;
	}
	return SPMU_NO_INDEX;
}

bool spmu_arch_sync_access(struct spmu_pcpu *c, enum spmu_check_cause cause)
{
	bool ok = spmu_rdpmc_always_here(this_cpu_read(spmu_rdpmc_ok));

	this_cpu_write(spmu_rdpmc_ok, ok);
	WRITE_ONCE(c->open, c->placed && ok && READ_ONCE(spmu_user_access));
	return false;
}

void spmu_arch_revoke(struct spmu_pcpu *c)
{
	WRITE_ONCE(c->open, false);
}

bool spmu_cpu_rdpmc_always(unsigned int cpu)
{
	return READ_ONCE(per_cpu(spmu_rdpmc_ok, cpu));
}

/* On every CPU holding our counters, as last checked. */
bool spmu_rdpmc_always_everywhere(void)
{
	const struct spmu_pcpu *c;
	unsigned int cpu;

	for_each_online_cpu(cpu) {
		c = spmu_counters_cpu(cpu);
		if (READ_ONCE(c->placed) && !spmu_cpu_rdpmc_always(cpu))
			return false;
	}
	return true;
}

/*
 * One line if user RDPMC is still off a few checks after load: not at
 * load itself, where the package's udev rule has not yet had the chance
 * to set rdpmc=2 (it runs on the module's add event).
 */
#define SPMU_RDPMC_NOTICE_DELAY		(3 * HZ)

static void spmu_rdpmc_notice_fn(struct work_struct *work)
{
	if (!spmu_rdpmc_always_everywhere())
		pr_notice("user RDPMC is not allowed: counters are held but reading them from user space faults until the cpu PMU's rdpmc attribute is 2 (echo 2 > /sys/bus/event_source/devices/cpu/rdpmc; cpu_core/rdpmc and cpu_atom/rdpmc on hybrid parts); sysfs rdpmc_always and cpuN/user_access follow it\n");
}

static DECLARE_DELAYED_WORK(spmu_rdpmc_notice, spmu_rdpmc_notice_fn);

void spmu_rdpmc_notice_start(void)
{
	schedule_delayed_work(&spmu_rdpmc_notice, SPMU_RDPMC_NOTICE_DELAY);
}

void spmu_rdpmc_notice_stop(void)
{
	cancel_delayed_work_sync(&spmu_rdpmc_notice);
}
