// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu: the lifecycle of the perf kernel counters both drivers hold.
 *
 * As kernel/watchdog_perf.c: one perf_event_attr per slot built once, a
 * pinned per-CPU kernel counter created from the CPU-online callback
 * (CPUHP_AP_ONLINE_DYN, which also runs for every online CPU at load) and
 * released from its teardown. No PMU register is written here; perf owns
 * the hardware and we own only our events.
 *
 * Where perf placed an event is read on the owning CPU with interrupts
 * off, right after creation and then from a deferrable per-CPU timer:
 * perf may move a pinned event when it reschedules (another pinned
 * CPU-wide event enabled before ours in its list) and gives no callback.
 * Each change gets a new generation number, unique across CPUs and module
 * loads, so user space can tell that two readings do not belong together.
 *
 * A pinned event perf cannot schedule goes to ERROR and stays there; the
 * timer notices and a work item asks perf to enable it again
 * (perf_event_enable() clears ERROR), as a user would: once a second for
 * ten seconds, then twice as long each time, up to 64 seconds apart.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/err.h>
#include <linux/irqflags.h>
#include <linux/irq_work.h>
#include <linux/jiffies.h>
#include <linux/minmax.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>

#include "compat.h"
#include "drivers/common/counters.h"

unsigned int spmu_recheck_ms = 100;
unsigned int spmu_user_access = 1;

static DEFINE_PER_CPU(struct spmu_pcpu, spmu_pcpus);
static struct spmu_counter_set spmu_set;
static struct spmu_counter_set spmu_prev_set;
static enum cpuhp_state spmu_hp_state;
static bool spmu_started;
static atomic_long_t spmu_generation;

/*
 * Tries to have perf schedule an ERROR event: once a second at first, then
 * twice as long each time, up to a minute apart.
 */
#define SPMU_REVIVE_FAST_TRIES	10
#define SPMU_REVIVE_MAX		(64 * HZ)

/*
 * While spmu_counters_start() runs the callbacks: the slots perf gave at
 * least one CPU, and the first error it returned.
 */
static DECLARE_BITMAP(spmu_start_created, SPMU_MAX_SLOTS);
static long spmu_start_err;

static void spmu_new_generation(struct spmu_pcpu *c)
{
	/* Pairs with the show routine's acquire: index[] is visible first. */
	smp_store_release(&c->generation,
			  atomic_long_inc_return(&spmu_generation));
}

/*
 * Our 32-bit counters are sampling events with a period of half their
 * range: perf then calls us each time it reloads one (non-sampling
 * events are reloaded silently), and a delta across that reload would be
 * off by 2^31. A new generation tells user space so. The PMU interrupt
 * ends by restarting the PMU, which (from 5.17) withdraws user access:
 * the irq_work runs after that and opens it again at once, rather than
 * leave this CPU's readers faulting until the next timer check.
 */
static void spmu_overflow(struct perf_event *event,
			  struct perf_sample_data *data, struct pt_regs *regs)
{
	struct spmu_pcpu *c = this_cpu_ptr(&spmu_pcpus);

	spmu_new_generation(c);
	irq_work_queue(&c->overflow_work);
}

static void spmu_overflow_work_fn(struct irq_work *work)
{
	spmu_counters_check_this_cpu(SPMU_CHECK_OVERFLOW);
}

/* This CPU, interrupts off: publish where each event counts now. */
static void spmu_update_placement(struct spmu_pcpu *c)
{
	enum spmu_cpu_state was = c->state, now;
	bool was_placed = was == SPMU_CPU_PLACED;
	bool placed = spmu_set.nr > 0, error = false, changed = false;
	unsigned long conflicts = 0;
	struct perf_event *event;
	unsigned int i;
	int idx;

	for (i = 0; i < spmu_set.nr; i++) {
		idx = SPMU_NO_INDEX;
		event = c->event[i];
		/*
		 * state and hw.idx change only on this CPU with interrupts
		 * off (perf's sched in/out of this CPU's context), which is
		 * where and how we read them.
		 */
		if (event && READ_ONCE(event->state) == PERF_EVENT_STATE_ACTIVE)
			idx = spmu_arch_counter_index(event);
		if (event && READ_ONCE(event->state) == PERF_EVENT_STATE_ERROR)
			error = true;
		if (idx == SPMU_NO_INDEX)
			placed = false;
		if (idx != c->index[i]) {
			/* Moved or lost while held: someone else got the counter. */
			if (was != SPMU_CPU_OFFLINE &&
			    c->index[i] != SPMU_NO_INDEX)
				conflicts++;
			WRITE_ONCE(c->index[i], idx);
			changed = true;
		}
	}
	if (error && was != SPMU_CPU_ERROR)
		conflicts++;
	if (conflicts)
		WRITE_ONCE(c->conflicts, c->conflicts + conflicts);
	/* An event in ERROR counts nowhere: its slot is unplaced too. */
	if (error)
		now = SPMU_CPU_ERROR;
	else
		now = placed ? SPMU_CPU_PLACED : SPMU_CPU_UNPLACED;
	if (changed || placed != was_placed)
		spmu_new_generation(c);
	WRITE_ONCE(c->state, now);
}

/*
 * Reopened access gets a new generation: whoever closed it restarted the
 * PMU, maybe reloading our counters. So does a CPU PM exit that reloaded
 * one with a new period (see spmu_counters_pm_enter_this_cpu()).
 */
static void spmu_check(struct spmu_pcpu *c, enum spmu_check_cause cause)
{
	bool reopened;

	if (cause == SPMU_CHECK_TIMER)
		WRITE_ONCE(c->checks, c->checks + 1);
	spmu_update_placement(c);
	reopened = spmu_arch_sync_access(c, cause);
	if (reopened)
		WRITE_ONCE(c->interventions, c->interventions + 1);
	if (reopened || (cause == SPMU_CHECK_PM_EXIT && c->pm_reload))
		spmu_new_generation(c);
	if (cause == SPMU_CHECK_PM_EXIT)
		c->pm_reload = false;
	/*
	 * Only the timer queues revive work, which paces the tries; the PM
	 * exit and overflow paths run far more often.
	 */
	if (c->state != SPMU_CPU_ERROR) {
		c->revive_delay = HZ;
		c->revive_tries = 0;
	} else if (cause == SPMU_CHECK_TIMER &&
		   time_after(jiffies, c->revive_after)) {
		/* Each try reschedules the CPU's perf context: back off. */
		c->revive_after = jiffies + c->revive_delay;
		if (++c->revive_tries >= SPMU_REVIVE_FAST_TRIES)
			c->revive_delay = min_t(unsigned long,
						2 * c->revive_delay,
						SPMU_REVIVE_MAX);
		schedule_work_on(smp_processor_id(), &c->revive_work);
	}
}

/* On the CPU concerned: ask perf to schedule our ERROR events again. */
static void spmu_revive_work_fn(struct work_struct *work)
{
	struct spmu_pcpu *c = container_of(work, struct spmu_pcpu, revive_work);
	unsigned int i;

	for (i = 0; i < spmu_set.nr; i++) {
		if (c->event[i] &&
		    READ_ONCE(c->event[i]->state) == PERF_EVENT_STATE_ERROR)
			perf_event_enable(c->event[i]);
	}
	spmu_counters_check_this_cpu(SPMU_CHECK_REVIVE);
}

/**
 * spmu_counters_check_this_cpu() - look at this CPU's events and access
 * @cause: what prompted the look (the CPU PM notifier, a settings change)
 *
 * Any context; a no-op on a CPU that has no events of ours.
 */
void spmu_counters_check_this_cpu(enum spmu_check_cause cause)
{
	struct spmu_pcpu *c;
	unsigned long flags;

	local_irq_save(flags);
	c = this_cpu_ptr(&spmu_pcpus);
	if (spmu_cpu_held(c))
		spmu_check(c, cause);
	local_irq_restore(flags);
}

/**
 * spmu_counters_pm_enter_this_cpu() - this CPU enters a CPU PM state
 *
 * Interrupts off, after arm_pmu's notifier stopped and updated our events
 * (armpmu_stop()), which also cleared their overflow flags. A sampling
 * event (our 32-bit counters) that wrapped since its last reload has lost
 * its overflow call: at the exit arm_pmu reloads it with a new period
 * (armpmu_event_set_period() with period_left <= 0), a jump of 2^31 - 1
 * that nothing else reports. Our 64-bit counters never get there.
 */
void spmu_counters_pm_enter_this_cpu(void)
{
	struct spmu_pcpu *c = this_cpu_ptr(&spmu_pcpus);
	unsigned int i;

	if (!spmu_cpu_held(c))
		return;
	for (i = 0; i < spmu_set.nr; i++)
		if (c->event[i] &&
		    local64_read(&c->event[i]->hw.period_left) <= 0)
			c->pm_reload = true;
}

/**
 * spmu_counters_leave_this_cpu() - a let-in thread leaves this CPU
 * @next: the task that runs here next
 *
 * Interrupts off (a sched-out notifier, or the thread itself). Access
 * closes; the CPU stays open (sysfs cpus) for the next let-in thread.
 */
void spmu_counters_leave_this_cpu(struct task_struct *next)
{
	struct spmu_pcpu *c = this_cpu_ptr(&spmu_pcpus);

	if (spmu_cpu_held(c))
		spmu_arch_revoke(c, next);
}

/* Deferrable: it never wakes an idle CPU, where nobody reads counters. */
static void spmu_timer_fn(struct timer_list *t)
{
	struct spmu_pcpu *c = container_of(t, struct spmu_pcpu, timer);

	spmu_counters_check_this_cpu(SPMU_CHECK_TIMER);
	if (spmu_cpu_held(c))
		mod_timer(t, jiffies + msecs_to_jiffies(spmu_recheck_ms));
}

/* cpuhp startup callback: runs on @cpu, in process context. */
static int spmu_cpu_online(unsigned int cpu)
{
	struct spmu_pcpu *c = per_cpu_ptr(&spmu_pcpus, cpu);
	struct perf_event_attr *attr;
	struct perf_event *event;
	unsigned long flags;
	unsigned int i;

	init_irq_work(&c->overflow_work, spmu_overflow_work_fn);
	INIT_WORK(&c->revive_work, spmu_revive_work_fn);
	c->revive_after = jiffies + HZ;
	c->revive_delay = HZ;
	c->revive_tries = 0;
	for (i = 0; i < spmu_set.nr; i++) {
		attr = &spmu_set.attr[i];
		event = perf_event_create_kernel_counter(attr, cpu, NULL,
							 attr->sample_period ?
							 spmu_overflow : NULL,
							 NULL);
		if (IS_ERR(event)) {
			pr_err("cpu%u: perf refused event %#llx: %ld; user access stays closed there\n",
			       cpu, attr->config, PTR_ERR(event));
			if (!spmu_start_err)
				spmu_start_err = PTR_ERR(event);
			event = NULL;
		} else {
			set_bit(i, spmu_start_created);
		}
		c->event[i] = event;
	}

	local_irq_save(flags);
	for (i = 0; i < SPMU_MAX_SLOTS; i++)
		WRITE_ONCE(c->index[i], SPMU_NO_INDEX);
	WRITE_ONCE(c->state, SPMU_CPU_OFFLINE);
	c->grant = SPMU_GRANT_NONE;
	WRITE_ONCE(c->open, false);
	/* Leaves the CPU held: unplaced, in error or placed. */
	spmu_update_placement(c);
	spmu_new_generation(c);
	spmu_check(c, SPMU_CHECK_ONLINE);
	local_irq_restore(flags);

	/* A pinned event perf cannot schedule goes to ERROR without a word. */
	if (!spmu_cpu_placed(c))
		pr_warn("cpu%u: not every event is counting at a counter user space can read; user access stays closed there (cpu%u/cycle_index, event_index)\n",
			cpu, cpu);

	timer_setup(&c->timer, spmu_timer_fn, TIMER_DEFERRABLE | TIMER_PINNED);
	c->timer.expires = jiffies + msecs_to_jiffies(spmu_recheck_ms);
	add_timer_on(&c->timer, cpu);
	return 0;
}

/* cpuhp teardown callback: runs on @cpu, on unplug and on unload. */
static int spmu_cpu_offline(unsigned int cpu)
{
	struct spmu_pcpu *c = per_cpu_ptr(&spmu_pcpus, cpu);
	unsigned long flags;
	unsigned int i;

	local_irq_save(flags);
	WRITE_ONCE(c->state, SPMU_CPU_OFFLINE);
	/* Access goes before the events it reads. */
	spmu_arch_revoke(c, current);
	WRITE_ONCE(c->open, false);
	for (i = 0; i < SPMU_MAX_SLOTS; i++)
		WRITE_ONCE(c->index[i], SPMU_NO_INDEX);
	spmu_new_generation(c);
	local_irq_restore(flags);

	spmu_timer_delete_sync(&c->timer);
	cancel_work_sync(&c->revive_work);
	for (i = 0; i < SPMU_MAX_SLOTS; i++) {
		if (c->event[i])
			perf_event_release_kernel(c->event[i]);
		c->event[i] = NULL;
	}
	/* No overflow call after the release: the last queued work ends here. */
	irq_work_sync(&c->overflow_work);
	return 0;
}

/*
 * A possible CPU that never comes online gets no cpuhp callback: publish
 * "no counter" for it, not the 0 of a fresh per-CPU area, which names
 * counter 0. Before the callbacks are set up, so nothing runs beside it.
 */
static void spmu_unpublish_possible_cpus(void)
{
	unsigned int cpu, i;

	for_each_possible_cpu(cpu) {
		for (i = 0; i < SPMU_MAX_SLOTS; i++)
			WRITE_ONCE(per_cpu_ptr(&spmu_pcpus, cpu)->index[i],
				   SPMU_NO_INDEX);
	}
}

/**
 * spmu_counters_start() - take @set's events on every CPU, now and later
 * @set: the events, attributes complete
 *
 * Return: 0, or a negative errno when perf gave one of them to no CPU (no
 * PMU driver, an event it refuses); then nothing is held.
 */
int spmu_counters_start(const struct spmu_counter_set *set)
{
	int ret;

	if (spmu_started || set->nr > SPMU_MAX_SLOTS) {
		pr_err("internal error: counters started twice or %u slots\n",
		       set->nr);
		return -EINVAL;
	}
	/* Unique across loads too: a reading never matches a stale one. */
	if (!atomic_long_read(&spmu_generation))
		atomic_long_set(&spmu_generation, ktime_get_boottime_ns());
	spmu_set = *set;
	spmu_unpublish_possible_cpus();
	bitmap_zero(spmu_start_created, SPMU_MAX_SLOTS);
	spmu_start_err = 0;
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "simple-pmu:online",
				spmu_cpu_online, spmu_cpu_offline);
	if (ret < 0)
		return ret;
	spmu_hp_state = ret;
	spmu_started = true;
	/* An event perf refuses on every CPU is a setting that cannot work. */
	if (!bitmap_full(spmu_start_created, set->nr)) {
		spmu_counters_stop();
		return spmu_start_err ?: -ENODEV;
	}
	return 0;
}

/* Release every event; user access is closed first on each CPU. */
void spmu_counters_stop(void)
{
	if (!spmu_started)
		return;
	cpuhp_remove_state(spmu_hp_state);
	spmu_started = false;
}

/**
 * spmu_counters_replace() - hold @set's events instead of the current ones
 * @set: the new events
 *
 * Caller serialises. User access closes on every CPU while the events are
 * exchanged. On failure the previous events are taken again.
 *
 * Return: 0 or the negative errno of the failed start.
 */
int spmu_counters_replace(const struct spmu_counter_set *set)
{
	int ret, err;

	spmu_prev_set = spmu_set;
	spmu_counters_stop();
	ret = spmu_counters_start(set);
	if (ret) {
		err = spmu_counters_start(&spmu_prev_set);
		if (err)
			pr_err("cannot take the previous events back either (%d); no counters held until the settings are written again (writing the same values retries)\n",
			       err);
	}
	return ret;
}

/* Whether the cpuhp state is installed: not after a replace took none. */
bool spmu_counters_held(void)
{
	return spmu_started;
}

unsigned int spmu_counters_nr_slots(void)
{
	return spmu_set.nr;
}

const struct spmu_pcpu *spmu_counters_cpu(unsigned int cpu)
{
	return per_cpu_ptr(&spmu_pcpus, cpu);
}

unsigned long spmu_counters_generation(void)
{
	return atomic_long_read(&spmu_generation);
}

/* CPUs whose counters user space may read now. */
void spmu_counters_placed_cpus(struct cpumask *mask)
{
	const struct spmu_pcpu *c;
	unsigned int cpu;

	cpumask_clear(mask);
	for_each_online_cpu(cpu) {
		c = per_cpu_ptr(&spmu_pcpus, cpu);
		if (spmu_cpu_placed(c) && READ_ONCE(c->open))
			cpumask_set_cpu(cpu, mask);
	}
}
