// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: what the CPU offers, the 2011 settings (ring,
 * rdpmc_fixed), and the perf events they turn into.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/bits.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/errno.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/string.h>
#include <asm/cpufeature.h>
#include <asm/processor.h>

#include "compat.h"
#include "drivers/x86/pmu.h"
#include "drivers/x86/pmu_regs.h"

/* Cycles, instructions (and reference cycles) in user space, held. */
struct spmu_settings spmu_settings = {
	.ring = SPMU_RING_USER,
	.rdpmc_fixed = 1,
};

struct spmu_hw spmu_hw;
/* Serialises settings changes and the events held. */
DEFINE_MUTEX(spmu_lock);

/*
 * CPUID.(7,1):EAX[8] enumerates leaf 0x23, whose sub-leaf 0 EBX[2] says
 * perf can block user RDPMC per counter (Panther Cove on, Linux 7.x).
 */
static bool spmu_user_disable_cap(unsigned int max)
{
	struct spmu_perfmon_ext x;
	struct spmu_cpuid_regs r;

	spmu_cpuid(7, 1, &r);
	if (!spmu_leaf_23_present(max, r.eax))
		return false;
	spmu_cpuid(SPMU_CPUID_LEAF_PERFMON_EXT, 0, &r);
	spmu_decode_cpuid_23(r.eax, r.ebx, 0, 0, 0, &x);
	return x.caps & SPMU_EXT_CAP_RDPMC_USER_DISABLE;
}

/* CPUID.(7,0):EDX[15]: the package mixes core types (Alder Lake on). */
#define SPMU_CPUID_7_EDX_HYBRID		BIT(15)

/**
 * spmu_cycles_token() - a disabled core-cycles event of the cpu PMU
 *
 * It takes no counter. perf fills in, when it makes an event, what the
 * driver needs to know of it: its max_period and whether a process that
 * maps it may RDPMC (from the rdpmc setting then).
 *
 * Return: the event, or an ERR_PTR (no PMU for PERF_TYPE_HARDWARE cycles).
 */
struct perf_event *spmu_cycles_token(void)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_HARDWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_HW_CPU_CYCLES,
		.disabled = 1,
	};
	struct perf_event *event;

	/* The CPU chosen stays online while the event is made. */
	cpus_read_lock();
	event = perf_event_create_kernel_counter(&attr,
						 cpumask_first(cpu_online_mask),
						 NULL, NULL, NULL);
	cpus_read_unlock();
	return event;
}

/*
 * perf's x86_pmu.max_period, which is not exported: perf gives it to every
 * counting event as its hw.sample_period (x86_setup_perfctr()). A sampling
 * event with that period is reloaded exactly when its counter wraps, with
 * a call to us; a longer one would be reloaded silently in between.
 *
 * Return: 0, or perf's errno.
 */
static int spmu_probe_max_period(u64 *period)
{
	struct perf_event *event = spmu_cycles_token();

	if (IS_ERR(event))
		return PTR_ERR(event);
	*period = event->hw.sample_period;
	perf_event_release_kernel(event);
	return *period ? 0 : -EINVAL;
}

/**
 * spmu_probe_hw() - what leaf 0xA (and 0x23) describe, into spmu_hw
 *
 * Read on the loading CPU: leaf 0xA is the same on every CPU, and on
 * hybrid parts it gives what both core types share, which is what the
 * plan may rely on everywhere.
 *
 * Return: 0, or -ENODEV when perf has no architectural PMU here (no
 * arch_perfmon, as on AMD and in every TCG guest).
 */
int spmu_probe_hw(void)
{
	unsigned int max = boot_cpu_data.cpuid_level;
	unsigned int maybe;
	struct spmu_perfmon *p = &spmu_hw.perfmon;
	struct spmu_cpuid_regs r;

	bool arch_perfmon = boot_cpu_has(X86_FEATURE_ARCH_PERFMON);
	int ret;

	memset(p, 0, sizeof(*p));
	if (arch_perfmon && spmu_leaf_present(max, SPMU_CPUID_LEAF_PERFMON)) {
		spmu_cpuid(SPMU_CPUID_LEAF_PERFMON, 0, &r);
		spmu_decode_cpuid_a(r.eax, r.ebx, r.ecx, r.edx, p);
	}
	if (spmu_x86_refusal(boot_cpu_data.x86_vendor == X86_VENDOR_INTEL,
			     arch_perfmon, max, p) != SPMU_X86_OK)
		return -ENODEV;

	spmu_hw.hypervisor = boot_cpu_has(X86_FEATURE_HYPERVISOR);
	spmu_cpuid(7, 0, &r);
	spmu_hw.hybrid = r.edx & SPMU_CPUID_7_EDX_HYBRID;
	spmu_hw.user_disable = SPMU_EVENTSEL_RDPMC_USER_DISABLE &&
			       spmu_user_disable_cap(max);
	spmu_perf_fixed_masks(p, spmu_hw.hypervisor, &spmu_hw.perf_fixed_mask,
			      &maybe);
	spmu_x86_plan_build(p, spmu_hw.perf_fixed_mask, maybe, &spmu_hw.plan);
	ret = spmu_probe_max_period(&spmu_hw.reload_period);
	if (ret)
		pr_err("perf gives no cycles event here (%d)\n", ret);
	return ret;
}

/* Every slot of the plan, counted at @ring, as pinned kernel events. */
void spmu_counter_set_build(unsigned int ring, struct spmu_counter_set *set)
{
	unsigned int i;

	set->nr = spmu_hw.plan.nr;
	for (i = 0; i < set->nr; i++)
		spmu_x86_attr_fill(&set->attr[i], &spmu_hw.plan.slot[i], ring,
				   spmu_hw.reload_period);
}

/**
 * spmu_settings_set() - count and hold what @st says, on every CPU
 * @st: settings within range
 *
 * Caller holds spmu_lock. The same settings again change nothing, unless
 * they should hold counters and none are held: then they are taken again.
 *
 * Return: 0, or the errno perf gave (the old settings stay then).
 */
int spmu_settings_set(const struct spmu_settings *st)
{
	static struct spmu_counter_set set;
	int ret = 0;

	lockdep_assert_held(&spmu_lock);
	if (st->ring == spmu_settings.ring &&
	    st->rdpmc_fixed == spmu_settings.rdpmc_fixed &&
	    (!st->rdpmc_fixed || spmu_counters_held()))
		return 0;
	spmu_counter_set_build(st->ring, &set);
	if (!st->rdpmc_fixed)
		spmu_counters_stop();
	else if (!spmu_settings.rdpmc_fixed || !spmu_counters_held())
		ret = spmu_counters_start(&set);
	else
		ret = spmu_counters_replace(&set);
	if (ret) {
		pr_err("perf refused the events (%d); previous settings kept\n",
		       ret);
		return ret;
	}
	spmu_settings = *st;
	return 0;
}
