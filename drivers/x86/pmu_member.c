// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu x86: who may read the counters. The admin's choice is who
 * can open /dev/simple-pmu (its group and mode, a udev rule); a process
 * that can maps it (one read-only page with nothing in it), and while
 * that mapping lives, the process may RDPMC. The module asks x86 perf for
 * what perf_mmap() asks for a process that maps a perf event: the PMU's
 * event_mapped() raises the mm's perf_rdpmc_allowed, which the kernel
 * turns into CR4.PCE at every switch to that mm. So the cpu PMU's rdpmc
 * attribute stays the admin's: 0 refuses every mapping, 2 opens RDPMC to
 * every process anyway (sysfs access "everyone").
 *
 * Lifetimes are the mapping's: munmap(), exit and exec (a new mm) end it
 * through vm_ops->close; a fork()ed child gets no copy (VM_DONTCOPY, and
 * VM_IO keeps MADV_DOFORK from undoing it) but keeps RDPMC until it
 * execs, as a child of a perf mapper does. A mapping is made from a
 * token, a disabled cycles event that takes no counter, whose flag perf
 * set from rdpmc when it made it. One token is shared by every open file
 * (a new one only when the last was made under rdpmc 0, at most two
 * alive); every mapping holds its file, the file its token and the module.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/perf_event.h>
#include <linux/slab.h>

#include "compat.h"
#include "drivers/x86/plan.h"
#include "drivers/x86/pmu.h"

struct spmu_token {
	struct perf_event *event;
	struct kref ref;		/* the current pointer, open files */
	bool refused;			/* a mapping of it got nothing */
};

/* The token new files get, under spmu_token_lock; tokens alive. */
static struct spmu_token *spmu_token;
static DEFINE_MUTEX(spmu_token_lock);
static atomic_t spmu_nr_tokens = ATOMIC_INIT(0);
/* Live mappings: sysfs members. */
static atomic_t spmu_nr_mappings = ATOMIC_INIT(0);

unsigned int spmu_members_count(void)
{
	return atomic_read(&spmu_nr_mappings);
}

static struct spmu_token *spmu_token_new(void)
{
	struct spmu_token *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return ERR_PTR(-ENOMEM);
	t->event = spmu_cycles_token();
	if (IS_ERR(t->event)) {
		long err = PTR_ERR(t->event);

		kfree(t);
		return ERR_PTR(err);
	}
	kref_init(&t->ref);
	atomic_inc(&spmu_nr_tokens);
	return t;
}

static void spmu_token_free(struct kref *ref)
{
	struct spmu_token *t = container_of(ref, struct spmu_token, ref);

	perf_event_release_kernel(t->event);
	kfree(t);
	atomic_dec(&spmu_nr_tokens);
}

/* Made under rdpmc 0, as perf's flag or a refused mapping showed. */
static bool spmu_token_bad(const struct spmu_token *t)
{
	return READ_ONCE(t->refused) || !spmu_event_user_readable(t->event);
}

/* The token for a file being opened, with a reference for it. */
static struct spmu_token *spmu_token_get(void)
{
	struct spmu_token *t, *fresh;

	mutex_lock(&spmu_token_lock);
	t = spmu_token;
	if (spmu_x86_token_renew(spmu_token_bad(t),
				 atomic_read(&spmu_nr_tokens))) {
		fresh = spmu_token_new();
		/* Keep the old one if perf makes this one no better. */
		if (!IS_ERR(fresh) && spmu_event_user_readable(fresh->event)) {
			spmu_token = fresh;
			kref_put(&t->ref, spmu_token_free);
			t = fresh;
		} else if (!IS_ERR(fresh)) {
			kref_put(&fresh->ref, spmu_token_free);
		}
	}
	kref_get(&t->ref);
	mutex_unlock(&spmu_token_lock);
	return t;
}

static struct perf_event *spmu_vma_event(struct vm_area_struct *vma)
{
	struct spmu_token *t = vma->vm_file->private_data;

	return t->event;
}

/* A copy of a mapping (mremap() moves one so): perf_mmap_open() does this. */
static void spmu_vm_open(struct vm_area_struct *vma)
{
	struct perf_event *event = spmu_vma_event(vma);

	event->pmu->event_mapped(event, vma->vm_mm);
	atomic_inc(&spmu_nr_mappings);
}

static void spmu_vm_close(struct vm_area_struct *vma)
{
	struct perf_event *event = spmu_vma_event(vma);

	event->pmu->event_unmapped(event, vma->vm_mm);
	atomic_dec(&spmu_nr_mappings);
}

/* No .fault: the page holds nothing, a touch of it is SIGBUS. */
static const struct vm_operations_struct spmu_vm_ops = {
	.open = spmu_vm_open,
	.close = spmu_vm_close,
};

/* mmap_lock is held for writing: no other mapping of this mm changes. */
static int spmu_dev_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct spmu_token *t = file->private_data;
	struct perf_event *event = t->event;
	atomic_t *allowed = &vma->vm_mm->context.perf_rdpmc_allowed;
	int before, err;

	err = spmu_x86_mapping_error(vma->vm_end - vma->vm_start, PAGE_SIZE,
				     vma->vm_pgoff, vma->vm_flags & VM_WRITE,
				     vma->vm_flags & VM_EXEC);
	if (!err)
		err = spmu_x86_let_in_blocked(spmu_hw.user_disable,
					      spmu_rdpmc_always_everywhere());
	if (err)
		return err;
	before = atomic_read(allowed);
	event->pmu->event_mapped(event, vma->vm_mm);
	err = spmu_x86_grant_error(before, atomic_read(allowed),
				   spmu_pce_here());
	if (err) {
		/*
		 * perf gave nothing (rdpmc 0), or not what it gives a perf
		 * mapping: take back what it gave; the next open makes a
		 * new token.
		 */
		if (atomic_read(allowed) != before)
			event->pmu->event_unmapped(event, vma->vm_mm);
		WRITE_ONCE(t->refused, true);
		return err;
	}
	spmu_vma_flags(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP | VM_IO,
		       VM_MAYWRITE | VM_MAYEXEC);
	vma->vm_ops = &spmu_vm_ops;
	atomic_inc(&spmu_nr_mappings);
	return 0;
}

static int spmu_dev_open(struct inode *inode, struct file *file)
{
	file->private_data = spmu_token_get();
	return 0;
}

static int spmu_dev_release(struct inode *inode, struct file *file)
{
	struct spmu_token *t = file->private_data;

	kref_put(&t->ref, spmu_token_free);
	return 0;
}

static const struct file_operations spmu_dev_fops = {
	.owner = THIS_MODULE,
	.open = spmu_dev_open,
	.release = spmu_dev_release,
	.mmap = spmu_dev_mmap,
	.llseek = noop_llseek,
};

/* Root only until udev applies the admin's group and mode (the package's rule). */
static struct miscdevice spmu_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "simple-pmu",
	.fops = &spmu_dev_fops,
	.mode = 0600,
};

/* Refuse to load rather than offer a node that can let nobody in. */
int spmu_members_init(void)
{
	struct spmu_token *t = spmu_token_new();
	int ret;

	if (IS_ERR(t)) {
		pr_err("cannot make the cycles event a mapping is checked against (%ld); not loading\n",
		       PTR_ERR(t));
		return PTR_ERR(t);
	}
	if (!t->event->pmu->event_mapped || !t->event->pmu->event_unmapped) {
		pr_err("perf's cpu PMU has no event_mapped(): no process could be let in; not loading\n");
		kref_put(&t->ref, spmu_token_free);
		return -EOPNOTSUPP;
	}
	spmu_token = t;
	ret = misc_register(&spmu_miscdev);
	if (ret) {
		pr_err("cannot register /dev/simple-pmu (%d)\n", ret);
		spmu_token = NULL;
		kref_put(&t->ref, spmu_token_free);
	}
	return ret;
}

/* No file is open (each pins the module), so no mapping is left. */
void spmu_members_exit(void)
{
	misc_deregister(&spmu_miscdev);
	kref_put(&spmu_token->ref, spmu_token_free);
	spmu_token = NULL;
}
