// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: the per-CPU apply/restore pair.
 *
 * Runs on the CPU whose registers it touches: from the cpuhp machinery
 * (load, unload, hotplug) and from the CPU PM notifier (idle power-down,
 * suspend), where arm_pmu has just reset the PMU.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/irqflags.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/smp.h>
#include <asm/barrier.h>

#include "drivers/arm64/pmu.h"

/* What was there before us, put back when the CPU goes down or we unload. */
struct spmu_saved {
	u64 pmcr;
	u64 pmuserenr;
	u64 pmccfiltr;
	bool cycle_enabled;
};

static DEFINE_PER_CPU(struct spmu_saved, spmu_saved);

struct cpumask spmu_active_cpus;

/* The only PMCR_EL0 bits this driver changes. */
#define SPMU_PMCR_OURS	(SPMU_PMCR_E | SPMU_PMCR_LC)

static void spmu_save(struct spmu_saved *s)
{
	s->pmcr = spmu_read_pmcr();
	s->pmuserenr = spmu_read_pmuserenr();
	s->pmccfiltr = spmu_read_pmccfiltr();
	s->cycle_enabled = spmu_read_pmcntenset() & SPMU_PMCNTEN_CYCLE;
}

static void spmu_apply(void)
{
	u64 pmcr;

	spmu_write_pmccfiltr(spmu_config.pmccfiltr);
	spmu_write_pmcntenset(SPMU_PMCNTEN_CYCLE);
	/*
	 * Read-modify-write keeps perf's bits (D, X, DP, LP, ...). P and C
	 * would reset counters perf may hold: never write them as one.
	 */
	pmcr = spmu_read_pmcr() & ~(SPMU_PMCR_P | SPMU_PMCR_C);
	spmu_write_pmcr(pmcr | SPMU_PMCR_OURS);
	/* User access last, once the counter it reads is running. */
	spmu_write_pmuserenr(spmu_config.pmuserenr);
	isb();
}

static void spmu_restore(const struct spmu_saved *s)
{
	u64 pmcr;

	/* Revoke user access first, before the counter stops. */
	spmu_write_pmuserenr(s->pmuserenr);
	pmcr = spmu_read_pmcr() & ~(SPMU_PMCR_P | SPMU_PMCR_C | SPMU_PMCR_OURS);
	spmu_write_pmcr(pmcr | (s->pmcr & SPMU_PMCR_OURS));
	if (!s->cycle_enabled)
		spmu_write_pmcntenclr(SPMU_PMCNTEN_CYCLE);
	spmu_write_pmccfiltr(s->pmccfiltr);
	isb();
}

/* cpuhp startup callback: runs on @cpu. */
int spmu_cpu_online(unsigned int cpu)
{
	unsigned long flags;

	/* The boot CPU has PMUv3 (checked at load); a mixed system may not. */
	if (!spmu_pmuver_is_v3(spmu_pmuver())) {
		pr_warn("CPU%u has no PMUv3; user access not enabled there\n",
			cpu);
		return 0;
	}

	/* Keep the CPU PM notifier from seeing a half-applied state. */
	local_irq_save(flags);
	spmu_save(this_cpu_ptr(&spmu_saved));
	spmu_apply();
	cpumask_set_cpu(cpu, &spmu_active_cpus);
	local_irq_restore(flags);
	return 0;
}

/* cpuhp teardown callback: runs on @cpu, on unplug and on unload. */
int spmu_cpu_offline(unsigned int cpu)
{
	unsigned long flags;

	local_irq_save(flags);
	if (cpumask_test_and_clear_cpu(cpu, &spmu_active_cpus))
		spmu_restore(this_cpu_ptr(&spmu_saved));
	local_irq_restore(flags);
	return 0;
}

/* Called with interrupts off on the CPU leaving a low-power state. */
void spmu_cpu_reapply(void)
{
	if (cpumask_test_cpu(smp_processor_id(), &spmu_active_cpus))
		spmu_apply();
}
