// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: the per-CPU apply/restore pair, and keeping the state.
 *
 * Everything here runs on the CPU whose registers it touches, with
 * interrupts off: from the cpuhp machinery (load, unload, hotplug), the
 * CPU PM notifier (idle power-down, suspend: arm_pmu has just reset the
 * PMU), an IPI when the settings change, and a per-CPU timer.
 *
 * perf takes the PMU back at will: from 5.17 every armv8pmu_start() writes
 * PMUSERENR, and arm_pmu clears PMCR.E when it has no events left. The
 * timer puts PMUSERENR back at once. Counters, filters and types are only
 * re-applied while PMCR.E is clear: with E set perf is counting and may
 * own them, and writing them would corrupt its counts.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/ktime.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/smp.h>
#include <asm/barrier.h>

#include "compat.h"
#include "drivers/arm64/pmu.h"

/* What was there before us, put back when the CPU goes down or we unload. */
struct spmu_saved {
	u64 pmcr;
	u64 pmuserenr;
	u64 pmccfiltr;
	bool cycle_enabled;
	u32 ev_saved;		/* event counters whose state is below */
	u32 ev_enabled;		/* of those, the ones enabled before us */
	u64 evtyper[SPMU_MAX_EVENT_COUNTERS];	/* by counter index */
};

struct spmu_cpu {
	struct spmu_config cfg;		/* the config this CPU holds */
	struct spmu_saved saved;
	/* Read back after applying: unimplemented bits read as zero. */
	u64 pmuserenr;
	u64 pmccfiltr;
	u64 evtyper[SPMU_MAX_EVENT_COUNTERS];	/* by event, as cfg */
	struct hrtimer timer;
	/* Written on this CPU only, interrupts off; read anywhere. */
	struct spmu_interventions n;
};

static DEFINE_PER_CPU(struct spmu_cpu, spmu_cpus);

struct cpumask spmu_active_cpus;

/* The only PMCR_EL0 bits this driver changes. */
#define SPMU_PMCR_OURS	(SPMU_PMCR_E | SPMU_PMCR_LC)

/* What spmu_recover() found and did. */
#define SPMU_FOUND_LOST	BIT(0)
#define SPMU_REPAIRED	BIT(1)

/* Only this CPU writes, with interrupts off: no atomic needed. */
static void spmu_count(unsigned long *counter)
{
	WRITE_ONCE(*counter, *counter + 1);
}

static void spmu_save(struct spmu_saved *s)
{
	s->pmcr = spmu_read_pmcr();
	s->pmuserenr = spmu_read_pmuserenr();
	s->pmccfiltr = spmu_read_pmccfiltr();
	s->cycle_enabled = spmu_read_pmcntenset() & SPMU_PMCNTEN_CYCLE;
	s->ev_saved = 0;
	s->ev_enabled = 0;
}

/* Event counters are saved when first taken: the set can change later. */
static void spmu_save_counter(struct spmu_saved *s, unsigned int n)
{
	if (s->ev_saved & BIT(n))
		return;
	s->evtyper[n] = spmu_read_pmevtyper(n);
	if (spmu_read_pmcntenset() & BIT(n))
		s->ev_enabled |= BIT(n);
	s->ev_saved |= BIT(n);
}

static void spmu_restore_counter(struct spmu_saved *s, unsigned int n)
{
	if (s->ev_enabled & BIT(n))
		spmu_write_pmcntenset(BIT(n));
	else
		spmu_write_pmcntenclr(BIT(n));
	spmu_write_pmevtyper(n, s->evtyper[n]);
	s->ev_saved &= ~BIT(n);
	s->ev_enabled &= ~BIT(n);
}

/* Counters, filters and types: does the hardware still hold ours? */
static bool spmu_counters_intact(const struct spmu_cpu *c)
{
	unsigned int i;

	if (!(spmu_read_pmcr() & SPMU_PMCR_E) ||
	    (spmu_read_pmcntenset() & c->cfg.pmcnten) != c->cfg.pmcnten ||
	    spmu_read_pmccfiltr() != c->pmccfiltr)
		return false;
	for (i = 0; i < c->cfg.nr_events; i++)
		if (spmu_read_pmevtyper(c->cfg.idx[i]) != c->evtyper[i])
			return false;
	return true;
}

static void spmu_apply(struct spmu_cpu *c)
{
	const struct spmu_config *cfg = &c->cfg;
	unsigned int i, n;
	u64 pmcr;

	/* Counters a settings change dropped go back as we found them. */
	for (n = 0; n < SPMU_MAX_EVENT_COUNTERS; n++)
		if ((c->saved.ev_saved & BIT(n)) && !(cfg->pmcnten & BIT(n)))
			spmu_restore_counter(&c->saved, n);

	for (i = 0; i < cfg->nr_events; i++) {
		spmu_save_counter(&c->saved, cfg->idx[i]);
		spmu_write_pmevtyper(cfg->idx[i], cfg->evtyper[i]);
	}
	spmu_write_pmccfiltr(cfg->pmccfiltr);
	spmu_write_pmcntenset(cfg->pmcnten);
	/*
	 * Read-modify-write keeps perf's bits (D, X, DP, LP, ...). P and C
	 * would reset counters perf may hold: never write them as one.
	 */
	pmcr = spmu_read_pmcr() & ~(SPMU_PMCR_P | SPMU_PMCR_C);
	spmu_write_pmcr(pmcr | SPMU_PMCR_OURS);
	/* User access last, once the counters it reads are running. */
	spmu_write_pmuserenr(cfg->pmuserenr);
	isb();

	c->pmuserenr = spmu_read_pmuserenr();
	c->pmccfiltr = spmu_read_pmccfiltr();
	for (i = 0; i < cfg->nr_events; i++)
		c->evtyper[i] = spmu_read_pmevtyper(cfg->idx[i]);
}

static void spmu_restore(struct spmu_cpu *c)
{
	struct spmu_saved *s = &c->saved;
	bool intact = spmu_counters_intact(c);
	unsigned int n;
	u64 pmcr;

	/* Revoke user access first, before the counters stop. */
	spmu_write_pmuserenr(s->pmuserenr);
	/*
	 * perf counting (E set) on a PMU it has changed since: the counters
	 * are its now; putting old values back would corrupt its counts.
	 */
	pmcr = spmu_read_pmcr();
	if (!intact && (pmcr & SPMU_PMCR_E)) {
		isb();
		return;
	}
	pmcr &= ~(SPMU_PMCR_P | SPMU_PMCR_C | SPMU_PMCR_OURS);
	spmu_write_pmcr(pmcr | (s->pmcr & SPMU_PMCR_OURS));
	for (n = 0; n < SPMU_MAX_EVENT_COUNTERS; n++)
		if (s->ev_saved & BIT(n))
			spmu_restore_counter(s, n);
	if (!s->cycle_enabled)
		spmu_write_pmcntenclr(SPMU_PMCNTEN_CYCLE);
	spmu_write_pmccfiltr(s->pmccfiltr);
	isb();
}

/*
 * Put back what perf (or a PM reset) took. PMUSERENR is ours to keep
 * whenever we grant access; the rest only while perf is idle (E clear).
 */
static unsigned int spmu_recover(struct spmu_cpu *c)
{
	unsigned int ret = 0;
	u64 val;

	val = spmu_read_pmuserenr();
	if (c->cfg.own_pmuserenr && val != c->pmuserenr) {
		pr_debug("cpu%u: PMUSERENR %#llx, restoring %#llx\n",
			 smp_processor_id(), val, c->pmuserenr);
		spmu_write_pmuserenr(c->cfg.pmuserenr);
		isb();
		ret = SPMU_FOUND_LOST | SPMU_REPAIRED;
	}
	if (!spmu_counters_intact(c)) {
		ret |= SPMU_FOUND_LOST;
		if (!(spmu_read_pmcr() & SPMU_PMCR_E)) {
			pr_debug("cpu%u: counters lost and perf idle, re-applying\n",
				 smp_processor_id());
			spmu_apply(c);
			ret |= SPMU_REPAIRED;
		}
	}
	return ret;
}

static enum hrtimer_restart spmu_timer_fn(struct hrtimer *timer)
{
	struct spmu_cpu *c = container_of(timer, struct spmu_cpu, timer);

	if (spmu_recover(c) & SPMU_REPAIRED)
		spmu_count(&c->n.perf);
	hrtimer_forward_now(timer, ms_to_ktime(spmu_recheck_ms));
	return HRTIMER_RESTART;
}

/* cpuhp startup callback: runs on @cpu. */
int spmu_cpu_online(unsigned int cpu)
{
	struct spmu_cpu *c = per_cpu_ptr(&spmu_cpus, cpu);
	unsigned int pmuver = spmu_pmuver();
	unsigned long flags;

	/* The boot CPU has PMUv3 (checked at load); a mixed system may not. */
	if (!spmu_pmuver_is_v3(pmuver)) {
		pr_warn("CPU%u has no PMUv3; user access not enabled there\n",
			cpu);
		return 0;
	}
	/* Event counter indices were chosen from the loading CPU's N. */
	if (FIELD_GET(SPMU_PMCR_N, spmu_read_pmcr()) != spmu_hw.num_counters) {
		pr_warn("CPU%u has %lu event counters, not %u; user access not enabled there\n",
			cpu, FIELD_GET(SPMU_PMCR_N, spmu_read_pmcr()),
			spmu_hw.num_counters);
		return 0;
	}

	/* Keep the CPU PM notifier from seeing a half-applied state. */
	local_irq_save(flags);
	c->cfg = spmu_config;
	spmu_save(&c->saved);
	spmu_apply(c);
	cpumask_set_cpu(cpu, &spmu_active_cpus);
	if (!spmu_loading)
		spmu_count(&c->n.hotplug);
	local_irq_restore(flags);

	/*
	 * _HARD: expire in hardirq context even on PREEMPT_RT, which runs
	 * other timers in a thread; the recheck needs interrupts off.
	 */
	spmu_hrtimer_setup(&c->timer, spmu_timer_fn, CLOCK_MONOTONIC,
			   HRTIMER_MODE_REL_PINNED_HARD);
	hrtimer_start(&c->timer, ms_to_ktime(spmu_recheck_ms),
		      HRTIMER_MODE_REL_PINNED_HARD);
	return 0;
}

/* cpuhp teardown callback: runs on @cpu, on unplug and on unload. */
int spmu_cpu_offline(unsigned int cpu)
{
	struct spmu_cpu *c = per_cpu_ptr(&spmu_cpus, cpu);
	unsigned long flags;

	if (!cpumask_test_cpu(cpu, &spmu_active_cpus))
		return 0;
	hrtimer_cancel(&c->timer);
	local_irq_save(flags);
	cpumask_clear_cpu(cpu, &spmu_active_cpus);
	spmu_restore(c);
	local_irq_restore(flags);
	return 0;
}

/*
 * CPU PM exit, interrupts off. Counted only when the state was found lost
 * (the usual case on hardware that powers the PMU down).
 */
void spmu_cpu_pm_exit(void)
{
	struct spmu_cpu *c = this_cpu_ptr(&spmu_cpus);

	if (!cpumask_test_cpu(smp_processor_id(), &spmu_active_cpus))
		return;
	if (spmu_recover(c))
		spmu_count(&c->n.pm);
}

/* IPI from spmu_settings_set(): take the new config. */
void spmu_cpu_update(void *unused)
{
	struct spmu_cpu *c = this_cpu_ptr(&spmu_cpus);

	if (!cpumask_test_cpu(smp_processor_id(), &spmu_active_cpus))
		return;
	c->cfg = spmu_config;
	spmu_apply(c);
}

void spmu_cpu_interventions(unsigned int cpu, struct spmu_interventions *n)
{
	const struct spmu_cpu *c = per_cpu_ptr(&spmu_cpus, cpu);

	n->hotplug = READ_ONCE(c->n.hotplug);
	n->pm = READ_ONCE(c->n.pm);
	n->perf = READ_ONCE(c->n.perf);
}
