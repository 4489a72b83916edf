// SPDX-License-Identifier: GPL-2.0
/*
 * spmu_broken: a module with one deliberate bug, chosen by bug=, for each
 * detector of the debug kernel to catch (pmubuild/guests/debugrun.py, `invoke
 * test-debug`).
 * It proves the run sees a report of that kind; it is never shipped.
 *
 *   lock-order      two mutexes taken in both orders (lockdep)
 *   sleep-in-timer  mutex_lock() in a timer callback (DEBUG_ATOMIC_SLEEP; the
 *                   mutex is free, so it reports without really sleeping)
 *   use-after-free  a read of freed memory (KASAN)
 *   leak            an allocation at load, forgotten (kmemleak)
 *   timer-freed     an armed timer's memory freed (debug objects)
 *   shift           a shift past the type's width (UBSAN)
 *   leak-on-error   a failed load that keeps its allocation (kmemleak)
 *   data-race       a plain counter both CPUs add to at once (KCSAN kernel)
 */
#define pr_fmt(fmt) "spmu_broken: " fmt

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timer.h>

static char *bug = "";
module_param(bug, charp, 0444);
MODULE_PARM_DESC(bug, "which bug to commit at load");

static DEFINE_MUTEX(spmu_a);
static DEFINE_MUTEX(spmu_b);
static struct timer_list spmu_timer;
static bool spmu_timer_armed;
static void *spmu_kept;
/* A parameter, so that the compiler cannot see the shift is too wide. */
static int shift_by = 40;
module_param(shift_by, int, 0444);

struct spmu_holder {
	struct timer_list timer;
};

static void spmu_sleepy(struct timer_list *t)
{
	mutex_lock(&spmu_a);
	mutex_unlock(&spmu_a);
}

static void spmu_idle(struct timer_list *t)
{
}

/* Plain, unannotated: the race KCSAN is there to see. */
static unsigned long spmu_racy;
static DECLARE_COMPLETION(spmu_race_go);
static DECLARE_COMPLETION(spmu_race_done);

static int spmu_racer(void *unused)
{
	unsigned long end;

	/* Both start together, then add for half a second whatever the host does. */
	wait_for_completion(&spmu_race_go);
	end = jiffies + HZ / 2;
	while (time_before(jiffies, end)) {
		spmu_racy++;
		barrier();	/* one plain load and store per round, not one sum */
	}
	/* Not back into this module's text: rmmod may follow at once. */
	kthread_complete_and_exit(&spmu_race_done, 0);
}

/* One racer bound to each of two online CPUs, so they really run at once. */
static int spmu_race(void)
{
	struct task_struct *t;
	unsigned int cpu, n = 0;

	cpus_read_lock();
	for_each_online_cpu(cpu) {
		if (n == 2)
			break;
		t = kthread_run_on_cpu(spmu_racer, NULL, cpu, "spmu_racer/%u");
		if (IS_ERR(t))
			break;
		n++;
	}
	cpus_read_unlock();
	complete_all(&spmu_race_go);
	for (cpu = 0; cpu < n; cpu++)
		wait_for_completion(&spmu_race_done);
	if (n < 2) {
		pr_err("data-race: %u racers, not 2\n", n);
		return -ENODEV;
	}
	pr_info("raced to %lu\n", spmu_racy);
	return 0;
}

static int spmu_commit(void)
{
	struct spmu_holder *h;
	char *p;

	if (!strcmp(bug, "lock-order")) {
		mutex_lock(&spmu_a);
		mutex_lock(&spmu_b);
		mutex_unlock(&spmu_b);
		mutex_unlock(&spmu_a);
		mutex_lock(&spmu_b);
		mutex_lock(&spmu_a);
		mutex_unlock(&spmu_a);
		mutex_unlock(&spmu_b);
	} else if (!strcmp(bug, "sleep-in-timer")) {
		timer_setup(&spmu_timer, spmu_sleepy, 0);
		mod_timer(&spmu_timer, jiffies + 1);
		spmu_timer_armed = true;
		msleep(100);
	} else if (!strcmp(bug, "use-after-free")) {
		p = kmalloc(32, GFP_KERNEL);
		if (!p)
			return -ENOMEM;
		kfree(p);
		pr_info("read %d after free\n", READ_ONCE(p[8]));
	} else if (!strcmp(bug, "leak")) {
		p = kmalloc(64, GFP_KERNEL);
		pr_info("leaking %p\n", p);
	} else if (!strcmp(bug, "timer-freed")) {
		h = kzalloc(sizeof(*h), GFP_KERNEL);
		if (!h)
			return -ENOMEM;
		timer_setup(&h->timer, spmu_idle, 0);
		mod_timer(&h->timer, jiffies + 60 * HZ);
		kfree(h);
	} else if (!strcmp(bug, "shift")) {
		pr_info("shifted %d\n", 1 << shift_by);
	} else if (!strcmp(bug, "leak-on-error")) {
		spmu_kept = kmalloc(128, GFP_KERNEL);
		spmu_kept = NULL;
		return -EINVAL;
	} else if (!strcmp(bug, "data-race")) {
		return spmu_race();
	} else if (*bug) {
		pr_err("unknown bug '%s'\n", bug);
		return -EINVAL;
	}
	return 0;
}

static int __init spmu_broken_init(void)
{
	return spmu_commit();
}

static void __exit spmu_broken_exit(void)
{
	if (spmu_timer_armed)
		del_timer_sync(&spmu_timer);
}

module_init(spmu_broken_init);
module_exit(spmu_broken_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("simple-pmu test module with deliberate bugs for the debug kernel");
