// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu arm64: who may read the counters. The admin's choice is who
 * can open /dev/simple-pmu (its group and mode, a udev rule); a thread
 * that can asks to be let in (SPMU_IOC_JOIN) and from then on EL0 access
 * is open on a CPU only while it runs there: a preempt notifier of its
 * own (the mechanism KVM uses for a loaded vCPU) opens access at each of
 * its sched-ins and closes it at each sched-out. Nobody is let in by
 * loading the module; the everyone parameter restores 2011's machine-wide
 * access, for raw readers that use no library.
 *
 * Lifetimes. Only the owning thread walks its notifier list, in its own
 * context switches, without a lock; so only that thread adds or removes
 * a notifier (JOIN, LEAVE), except at unload, which unlinks every
 * notifier under stop_machine(), when no CPU is inside a switch. A
 * thread that exits without LEAVE is seen at its last switch (TASK_DEAD):
 * the record is freed from a work item once that switch is over.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/fs.h>
#include <linux/irq_work.h>
#include <linux/list.h>
#include <linux/llist.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/stop_machine.h>
#include <linux/workqueue.h>

#include "compat.h"
#include "drivers/arm64/pmu.h"

bool spmu_everyone;

#if SPMU_HAVE_MEMBERS

struct spmu_member {
	struct preempt_notifier pn;
	/* Only for the lists below; never dereferenced after TASK_DEAD. */
	struct task_struct *task;
	/*
	 * Let in for this program only: an exec()ed image must ask again. Seen
	 * at its next switch or check on its CPU (there is no exec hook).
	 */
	u64 exec_id;
	bool dead;
	struct list_head all;		/* spmu_members, under spmu_members_lock */
	struct llist_node reap;
};

static LIST_HEAD(spmu_members);
static DEFINE_MUTEX(spmu_members_lock);
static unsigned int spmu_nr_members;
/* The member running on this CPU, from its sched-in to its sched-out. */
static DEFINE_PER_CPU(struct spmu_member *, spmu_running);

static LLIST_HEAD(spmu_dead);
static void spmu_reap_work_fn(struct work_struct *work);
static DECLARE_WORK(spmu_reap_work, spmu_reap_work_fn);
static struct irq_work spmu_reap_irq;
static bool spmu_members_ready;

static void spmu_sched_in(struct preempt_notifier *pn, int cpu)
{
	struct spmu_member *m = container_of(pn, struct spmu_member, pn);

	if (current->self_exec_id != m->exec_id)
		return;
	this_cpu_write(spmu_running, m);
	spmu_counters_check_this_cpu(SPMU_CHECK_SWITCH);
}

/* Interrupts off, the runqueue locked: only per-CPU state and a flag. */
static void spmu_sched_out(struct preempt_notifier *pn,
			   struct task_struct *next)
{
	struct spmu_member *m = container_of(pn, struct spmu_member, pn);

	if (this_cpu_read(spmu_running) == m) {
		this_cpu_write(spmu_running, NULL);
		spmu_counters_leave_this_cpu(next);
	}
	/*
	 * The last switch of an exiting thread: nobody walks this list
	 * again. Free once it is over (the irq_work runs when interrupts
	 * are back on, after the walk); a work item, as a wake-up of a
	 * kworker here could take this runqueue's lock.
	 */
	if (spmu_task_dead(current)) {
		m->dead = true;
		llist_add(&m->reap, &spmu_dead);
		irq_work_queue(&spmu_reap_irq);
	}
}

static struct preempt_ops spmu_preempt_ops = {
	.sched_in = spmu_sched_in,
	.sched_out = spmu_sched_out,
};

const struct preempt_ops *spmu_member_ops(void)
{
	return &spmu_preempt_ops;
}

static void spmu_reap_irq_fn(struct irq_work *work)
{
	schedule_work(&spmu_reap_work);
}

static void spmu_reap_work_fn(struct work_struct *work)
{
	struct spmu_member *m, *n;
	struct llist_node *dead = llist_del_all(&spmu_dead);

	mutex_lock(&spmu_members_lock);
	llist_for_each_entry_safe(m, n, dead, reap) {
		list_del(&m->all);
		WRITE_ONCE(spmu_nr_members, spmu_nr_members - 1);
		kfree(m);
	}
	mutex_unlock(&spmu_members_lock);
}

/* The calling thread's record, if it has one; preemption off. */
static struct spmu_member *spmu_member_current(void)
{
	struct preempt_notifier *pn =
		spmu_task_notifier(current, &spmu_preempt_ops);

	return pn ? container_of(pn, struct spmu_member, pn) : NULL;
}

bool spmu_member_running_here(void)
{
	struct spmu_member *m = this_cpu_read(spmu_running);

	return m && m->task == current &&
	       m->exec_id == current->self_exec_id;
}

static long spmu_join(void)
{
	struct spmu_member *m, *fresh;

	if (spmu_everyone)
		return 0;	/* open to everyone already: nothing to track */
	fresh = kzalloc(sizeof(*fresh), GFP_KERNEL_ACCOUNT);
	if (!fresh)
		return -ENOMEM;
	mutex_lock(&spmu_members_lock);
	local_irq_disable();
	m = spmu_member_current();
	if (!m) {
		m = fresh;
		fresh = NULL;
		m->task = current;
		preempt_notifier_init(&m->pn, &spmu_preempt_ops);
		preempt_notifier_register(&m->pn);
		list_add(&m->all, &spmu_members);
		WRITE_ONCE(spmu_nr_members, spmu_nr_members + 1);
	}
	m->exec_id = current->self_exec_id;
	this_cpu_write(spmu_running, m);
	local_irq_enable();
	mutex_unlock(&spmu_members_lock);
	kfree(fresh);
	/* Open here now, not at the next switch. */
	preempt_disable();
	spmu_counters_check_this_cpu(SPMU_CHECK_JOIN);
	preempt_enable();
	return 0;
}

static long spmu_leave(void)
{
	struct spmu_member *m;

	mutex_lock(&spmu_members_lock);
	local_irq_disable();
	m = spmu_member_current();
	if (m) {
		if (this_cpu_read(spmu_running) == m) {
			this_cpu_write(spmu_running, NULL);
			spmu_counters_leave_this_cpu(current);
		}
		preempt_notifier_unregister(&m->pn);
		list_del(&m->all);
		WRITE_ONCE(spmu_nr_members, spmu_nr_members - 1);
	}
	local_irq_enable();
	mutex_unlock(&spmu_members_lock);
	kfree(m);
	return 0;
}

static long spmu_dev_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	switch (cmd) {
	case SPMU_IOC_JOIN:
		return spmu_join();
	case SPMU_IOC_LEAVE:
		return spmu_leave();
	default:
		return -ENOTTY;
	}
}

static const struct file_operations spmu_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = spmu_dev_ioctl,
	.compat_ioctl = spmu_dev_ioctl,
	.llseek = noop_llseek,
};

/* Root only until udev applies the admin's group and mode (the package's rule). */
static struct miscdevice spmu_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "simple-pmu",
	.fops = &spmu_dev_fops,
	.mode = 0600,
};

/* Under stop_machine(): no CPU is inside a switch, no list is walked. */
static int spmu_unlink_all(void *unused)
{
	struct spmu_member *m;
	unsigned int cpu;

	list_for_each_entry(m, &spmu_members, all)
		if (!m->dead)
			preempt_notifier_unregister(&m->pn);
	for_each_possible_cpu(cpu)
		per_cpu(spmu_running, cpu) = NULL;
	return 0;
}

unsigned int spmu_members_count(void)
{
	return READ_ONCE(spmu_nr_members);
}

/*
 * The notifier list is the scheduler's: check at load that it reads the
 * way spmu_task_notifier() walks it, and refuse rather than guess.
 */
static int spmu_members_selftest(void)
{
	struct preempt_notifier pn;
	bool found;

	preempt_notifier_init(&pn, &spmu_preempt_ops);
	local_irq_disable();
	preempt_notifier_register(&pn);
	found = spmu_task_notifier(current, &spmu_preempt_ops) == &pn;
	preempt_notifier_unregister(&pn);
	found = found && !spmu_task_notifier(current, &spmu_preempt_ops);
	local_irq_enable();
	if (!found) {
		pr_err("this kernel's preempt notifier list does not read as expected; not loading\n");
		return -EINVAL;
	}
	return 0;
}

static int spmu_members_register_node(void)
{
	int ret = misc_register(&spmu_miscdev);

	if (ret)
		pr_err("cannot register /dev/simple-pmu (%d)\n", ret);
	return ret;
}

int spmu_members_init(void)
{
	int ret;

	if (spmu_everyone) {
		pr_warn("everyone=1: every local user, in every container, may read the counters on every CPU; what they count includes other users' work (a side channel): simple-pmu(4)\n");
		return spmu_members_register_node();
	}
	init_irq_work(&spmu_reap_irq, spmu_reap_irq_fn);
	preempt_notifier_inc();
	ret = spmu_members_selftest();
	if (!ret)
		ret = spmu_members_register_node();
	if (ret) {
		preempt_notifier_dec();
		return ret;
	}
	spmu_members_ready = true;
	return 0;
}

void spmu_members_exit(void)
{
	struct spmu_member *m, *n;

	/* No open file is left (each pins the module): no JOIN runs. */
	misc_deregister(&spmu_miscdev);
	if (!spmu_members_ready)
		return;
	mutex_lock(&spmu_members_lock);
	if (!list_empty(&spmu_members))
		stop_machine(spmu_unlink_all, NULL, NULL);
	mutex_unlock(&spmu_members_lock);
	irq_work_sync(&spmu_reap_irq);
	flush_work(&spmu_reap_work);
	list_for_each_entry_safe(m, n, &spmu_members, all) {
		list_del(&m->all);
		kfree(m);
	}
	WRITE_ONCE(spmu_nr_members, 0);
	preempt_notifier_dec();
	spmu_members_ready = false;
}

#else /* !SPMU_HAVE_MEMBERS */

bool spmu_member_running_here(void)
{
	return false;
}

const struct preempt_ops *spmu_member_ops(void)
{
	return NULL;
}

unsigned int spmu_members_count(void)
{
	return 0;
}

int spmu_members_init(void)
{
	if (spmu_everyone)
		return 0;
	pr_err("this kernel has no preempt notifiers (CONFIG_PREEMPT_NOTIFIERS): access per thread is impossible; load with everyone=1 to open the counters to every user\n");
	return -EOPNOTSUPP;
}

void spmu_members_exit(void)
{
}

#endif /* SPMU_HAVE_MEMBERS */
