/* SPDX-License-Identifier: GPL-2.0 */
/*
 * simple-pmu: counters taken from perf, shared by both drivers.
 *
 * The driver owns no PMU register that perf owns. On every online CPU it
 * holds one pinned per-CPU kernel event per slot (slot 0: core cycles,
 * then the configured events), made with perf_event_create_kernel_counter()
 * as kernel/watchdog_perf.c does, so perf never gives those counters to
 * anyone else and never has its own counts touched. What is left to the
 * driver: finding out where perf placed each event, publishing that with a
 * generation number, and opening user access to it (the arch hooks below).
 */
#ifndef SIMPLE_PMU_COUNTERS_H
#define SIMPLE_PMU_COUNTERS_H

#include <linux/irq_work.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/workqueue.h>

/* Core cycles plus up to 31 events (arm64 has at most 31 event counters). */
#define SPMU_MAX_SLOTS		32
#define SPMU_SLOT_CYCLES	0
/* A slot whose event is not counting at a known counter. */
#define SPMU_NO_INDEX		(-1)

#define SPMU_RECHECK_MS_MIN	10
#define SPMU_RECHECK_MS_MAX	10000

/* The events every CPU gets, built once by the arch from the settings. */
struct spmu_counter_set {
	unsigned int nr;
	struct perf_event_attr attr[SPMU_MAX_SLOTS];
};

/*
 * Where a CPU's events stand. Only the cpuhp callbacks and the placement
 * update change it, on that CPU with interrupts off.
 */
enum spmu_cpu_state {
	SPMU_CPU_OFFLINE,	/* outside our online/offline callbacks */
	SPMU_CPU_UNPLACED,	/* held, some slot counts at no known counter */
	SPMU_CPU_ERROR,		/* held, a pinned event in ERROR: ask perf again */
	SPMU_CPU_PLACED,	/* every slot counts at a known counter */
};

/*
 * Arch (arm64): our user-access grant on a CPU since the events were
 * taken. A grant found gone and opened again is an intervention.
 */
enum spmu_grant {
	SPMU_GRANT_NONE,	/* not ours: closed, or closed by us */
	SPMU_GRANT_ADOPTED,	/* found open (perf's, or left), ours to close */
	SPMU_GRANT_HELD,	/* we opened it, and it is still there */
	SPMU_GRANT_LOST,	/* we opened it, and someone else changed it */
};

/*
 * One CPU's share. What is published (index[], generation, state, open and
 * the counts) is written on that CPU with interrupts off (the cpuhp
 * callbacks after their events exist, the timer, the CPU PM notifier, the
 * overflow irq_work, a let-in thread's switch), or before the callbacks
 * are installed; event[] by the cpuhp callbacks on that CPU. Read anywhere
 * (sysfs).
 */
struct spmu_pcpu {
	struct perf_event *event[SPMU_MAX_SLOTS];
	/* Published: the counter user space reads for each slot, or -1. */
	int index[SPMU_MAX_SLOTS];
	/*
	 * Changes whenever index[] or a counter's value base changes; stored
	 * with release after index[], so a reader that loads it with acquire
	 * before and after reading index[] sees a consistent pair.
	 */
	unsigned long generation;
	enum spmu_cpu_state state;
	enum spmu_grant grant;
	/* Arch: readable here by whom access is for (arm64: let-in threads or everyone). */
	bool open;
	unsigned long interventions;	/* user access found revoked, reopened */
	unsigned long kvm_deferrals;	/* checks skipped: a vCPU was loaded */
	unsigned long checks;		/* timer callbacks that ran */
	/* Events found moved, lost or in ERROR while held. */
	unsigned long conflicts;
	unsigned long revive_after;	/* jiffies */
	unsigned long revive_delay;	/* jiffies until the next try after that */
	unsigned int revive_tries;	/* since the event went to ERROR */
	/* At CPU PM entry: the exit will reload a counter with a new period. */
	bool pm_reload;
	struct timer_list timer;
	/* After our own overflow IRQ, whose PMU restart revokes access. */
	struct irq_work overflow_work;
	/* perf_event_enable() of ERROR events: it sleeps, so not the timer. */
	struct work_struct revive_work;
};

/* Between our online and offline callbacks: the CPU holds our events. */
static inline bool spmu_cpu_held(const struct spmu_pcpu *c)
{
	return READ_ONCE(c->state) != SPMU_CPU_OFFLINE;
}

/* Every slot counts at a known counter: user access may be open. */
static inline bool spmu_cpu_placed(const struct spmu_pcpu *c)
{
	return READ_ONCE(c->state) == SPMU_CPU_PLACED;
}

/* Why a CPU's state is looked at; the arch counts interventions by it. */
enum spmu_check_cause {
	SPMU_CHECK_ONLINE,
	SPMU_CHECK_TIMER,
	SPMU_CHECK_PM_EXIT,
	SPMU_CHECK_SETTINGS,
	SPMU_CHECK_OVERFLOW,
	SPMU_CHECK_REVIVE,
	SPMU_CHECK_SWITCH,	/* a let-in thread came onto the CPU */
	SPMU_CHECK_JOIN,	/* a thread was let in, on its CPU */
};

extern unsigned int spmu_recheck_ms;
extern unsigned int spmu_user_access;

int spmu_counters_start(const struct spmu_counter_set *set);
void spmu_counters_stop(void);
int spmu_counters_replace(const struct spmu_counter_set *set);
bool spmu_counters_held(void);
void spmu_counters_check_this_cpu(enum spmu_check_cause cause);
void spmu_counters_pm_enter_this_cpu(void);
void spmu_counters_leave_this_cpu(struct task_struct *next);
unsigned int spmu_counters_nr_slots(void);
const struct spmu_pcpu *spmu_counters_cpu(unsigned int cpu);
unsigned long spmu_counters_generation(void);
void spmu_counters_placed_cpus(struct cpumask *mask);

/*
 * Arch hooks, called on the CPU concerned with interrupts off.
 *
 * spmu_arch_counter_index(): the counter user space reads for @event, an
 * ACTIVE event of this CPU; SPMU_NO_INDEX if it cannot be read directly.
 * spmu_arch_sync_access(): open user access if @c is placed and user
 * access is wanted, close what we opened otherwise, and set @c->open; return
 * true if access we had opened was revoked behind our back and was opened
 * again (an intervention).
 * spmu_arch_revoke(): close what we opened (before the events go, or as
 * a let-in thread leaves the CPU), unless @next, the task that runs here
 * next, has perf's own grant to the same.
 */
int spmu_arch_counter_index(struct perf_event *event);
bool spmu_arch_sync_access(struct spmu_pcpu *c, enum spmu_check_cause cause);
void spmu_arch_revoke(struct spmu_pcpu *c, struct task_struct *next);

#endif /* SIMPLE_PMU_COUNTERS_H */
