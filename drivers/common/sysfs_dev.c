// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu: the system subsystem and its one device, shared by the
 * arm64 and x86 drivers, with what both publish about their counters:
 *
 *   simple-pmu0/generation, cpus, recheck_ms
 *   simple-pmu0/cpuN/cycle_index, event_index, generation, interventions,
 *                    kvm_deferrals, checks, conflicts, user_access
 *                    (one directory per possible CPU)
 *
 * Each driver adds its own attribute groups to the device.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

#include "compat.h"
#include "drivers/common/counters.h"
#include "drivers/common/sysfs_dev.h"

/*
 * Not const: subsys_system_register() takes a non-const pointer before 6.12
 * and a const one after, and a non-const pointer converts to both.
 */
static struct bus_type spmu_subsys = {
	.name = "simple-pmu",
	.dev_name = "simple-pmu",	/* device id 0 -> "simple-pmu0" */
};

static struct device *spmu_dev;

static ssize_t generation_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lu\n", spmu_counters_generation());
}
static DEVICE_ATTR_RO(generation);

static ssize_t cpus_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	cpumask_var_t mask;
	ssize_t len;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	cpus_read_lock();
	spmu_counters_placed_cpus(mask);
	cpus_read_unlock();
	len = sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(mask));
	free_cpumask_var(mask);
	return len;
}
static DEVICE_ATTR_RO(cpus);

static ssize_t recheck_ms_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", spmu_recheck_ms);
}
static DEVICE_ATTR_RO(recheck_ms);

static struct attribute *spmu_common_attrs[] = {
	&dev_attr_generation.attr,
	&dev_attr_cpus.attr,
	&dev_attr_recheck_ms.attr,
	NULL
};

const struct attribute_group spmu_common_group = {
	.attrs = spmu_common_attrs,
};

/*
 * simple-pmu0/cpuN: a named attribute group per possible CPU, its
 * attributes allocated with the CPU number beside them.
 */
enum spmu_cpu_field {
	SPMU_F_CYCLE_INDEX,
	SPMU_F_EVENT_INDEX,
	SPMU_F_GENERATION,
	SPMU_F_INTERVENTIONS,
	SPMU_F_KVM_DEFERRALS,
	SPMU_F_CHECKS,
	SPMU_F_CONFLICTS,
	SPMU_F_USER_ACCESS,
	SPMU_F_NR
};

static const char * const spmu_cpu_field_names[SPMU_F_NR] = {
	[SPMU_F_CYCLE_INDEX]	= "cycle_index",
	[SPMU_F_EVENT_INDEX]	= "event_index",
	[SPMU_F_GENERATION]	= "generation",
	[SPMU_F_INTERVENTIONS]	= "interventions",
	[SPMU_F_KVM_DEFERRALS]	= "kvm_deferrals",
	[SPMU_F_CHECKS]		= "checks",
	[SPMU_F_CONFLICTS]	= "conflicts",
	[SPMU_F_USER_ACCESS]	= "user_access",
};

struct spmu_cpu_attr {
	struct device_attribute dattr;
	unsigned int cpu;
	enum spmu_cpu_field field;
};

struct spmu_cpu_dir {
	char name[16];
	struct attribute_group group;
	struct attribute *attrs[SPMU_F_NR + 1];
	struct spmu_cpu_attr attr[SPMU_F_NR];
};

static struct spmu_cpu_dir *spmu_cpu_dirs;
static const struct attribute_group **spmu_all_groups;

/* The counters of slots 1.., in the order of the driver's events. */
static int spmu_emit_event_index(const struct spmu_pcpu *c, char *buf)
{
	unsigned int i, nr = spmu_counters_nr_slots();
	int len = 0;

	for (i = SPMU_SLOT_CYCLES + 1; i < nr; i++)
		len += sysfs_emit_at(buf, len, "%s%d", len ? " " : "",
				     READ_ONCE(c->index[i]));
	return len + sysfs_emit_at(buf, len, "\n");
}

static ssize_t spmu_cpu_show(struct device *dev, struct device_attribute *da,
			     char *buf)
{
	const struct spmu_cpu_attr *a =
		container_of(da, struct spmu_cpu_attr, dattr);
	const struct spmu_pcpu *c = spmu_counters_cpu(a->cpu);

	switch (a->field) {
	case SPMU_F_CYCLE_INDEX:
		return sysfs_emit(buf, "%d\n", spmu_counters_nr_slots() ?
				  READ_ONCE(c->index[SPMU_SLOT_CYCLES]) :
				  SPMU_NO_INDEX);
	case SPMU_F_EVENT_INDEX:
		return spmu_emit_event_index(c, buf);
	case SPMU_F_GENERATION:
		/* Acquire: pairs with spmu_new_generation()'s release. */
		return sysfs_emit(buf, "%lu\n", smp_load_acquire(&c->generation));
	case SPMU_F_INTERVENTIONS:
		return sysfs_emit(buf, "%lu\n", READ_ONCE(c->interventions));
	case SPMU_F_KVM_DEFERRALS:
		return sysfs_emit(buf, "%lu\n", READ_ONCE(c->kvm_deferrals));
	case SPMU_F_CHECKS:
		return sysfs_emit(buf, "%lu\n", READ_ONCE(c->checks));
	case SPMU_F_CONFLICTS:
		return sysfs_emit(buf, "%lu\n", READ_ONCE(c->conflicts));
	case SPMU_F_USER_ACCESS:
		return sysfs_emit(buf, "%d\n", spmu_cpu_held(c) &&
				  READ_ONCE(c->open));
	default:
		return -EINVAL;
	}
}

static void spmu_cpu_dir_init(struct spmu_cpu_dir *d, unsigned int cpu)
{
	struct spmu_cpu_attr *a;
	unsigned int f;

	snprintf(d->name, sizeof(d->name), "cpu%u", cpu);
	for (f = 0; f < SPMU_F_NR; f++) {
		a = &d->attr[f];
		sysfs_attr_init(&a->dattr.attr);
		a->dattr.attr.name = spmu_cpu_field_names[f];
		a->dattr.attr.mode = 0444;
		a->dattr.show = spmu_cpu_show;
		a->cpu = cpu;
		a->field = f;
		d->attrs[f] = &a->dattr.attr;
	}
	d->attrs[SPMU_F_NR] = NULL;
	d->group.name = d->name;
	d->group.attrs = d->attrs;
}

static void spmu_cpu_dirs_free(void)
{
	kfree(spmu_cpu_dirs);
	spmu_cpu_dirs = NULL;
	kfree(spmu_all_groups);
	spmu_all_groups = NULL;
}

/*
 * @groups followed by a cpuN group per possible CPU, so that the device
 * appears with all of them at once (udev sees no half-made device).
 */
static int spmu_cpu_dirs_alloc(const struct attribute_group **groups)
{
	unsigned int cpu, n = 0, i = 0;

	while (groups[n])
		n++;
	spmu_cpu_dirs = kcalloc(nr_cpu_ids, sizeof(*spmu_cpu_dirs), GFP_KERNEL);
	spmu_all_groups = kcalloc(n + nr_cpu_ids + 1, sizeof(*spmu_all_groups),
				  GFP_KERNEL);
	if (!spmu_cpu_dirs || !spmu_all_groups) {
		spmu_cpu_dirs_free();
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		spmu_all_groups[i] = groups[i];
	for_each_possible_cpu(cpu) {
		spmu_cpu_dir_init(&spmu_cpu_dirs[cpu], cpu);
		spmu_all_groups[i++] = &spmu_cpu_dirs[cpu].group;
	}
	return 0;
}

/*
 * The release runs when the last reference goes, which may be after
 * device_unregister() (CONFIG_DEBUG_KOBJECT_RELEASE delays it by seconds):
 * unload waits for it; only the release's return follows the wake-up.
 */
static DECLARE_COMPLETION(spmu_dev_released);

static void spmu_dev_release(struct device *dev)
{
	kfree(dev);
	complete(&spmu_dev_released);
}

/**
 * spmu_sysfs_register() - create /sys/devices/system/simple-pmu/simple-pmu0
 * @groups: NULL-terminated attribute groups of the device
 * @per_cpu: also the cpuN directories of the counters held
 *
 * The groups are created together with the device, so user space never
 * sees the device without its attributes. subsys_system_register() is
 * what the 2011 path (/sys/devices/system/simple-pmu) takes.
 *
 * Return: 0 or a negative errno; on error nothing is left registered.
 */
int spmu_sysfs_register(const struct attribute_group **groups, bool per_cpu)
{
	struct device *dev;
	int err;

	if (per_cpu) {
		err = spmu_cpu_dirs_alloc(groups);
		if (err) {
			pr_err("cannot allocate the sysfs cpuN groups (%d)\n", err);
			return err;
		}
		groups = spmu_all_groups;
	}
	err = subsys_system_register(&spmu_subsys, NULL);
	if (err) {
		/* It may have registered the bus and unregistered it again. */
		spmu_bus_wait_failed_register(&spmu_subsys);
		pr_err("cannot register sysfs subsystem (%d)\n", err);
		goto err_dirs;
	}

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev) {
		err = -ENOMEM;
		goto err_subsys;
	}
	dev->id = 0;
	dev->bus = &spmu_subsys;
	dev->groups = groups;
	dev->release = spmu_dev_release;
	reinit_completion(&spmu_dev_released);

	err = device_register(dev);
	if (err) {
		/* device_register() failed: the last reference frees it. */
		put_device(dev);
		wait_for_completion(&spmu_dev_released);
		goto err_subsys;
	}
	spmu_dev = dev;
	return 0;

err_subsys:
	pr_err("cannot register sysfs device (%d)\n", err);
	bus_unregister(&spmu_subsys);
	spmu_bus_wait_released(&spmu_subsys);
err_dirs:
	spmu_cpu_dirs_free();
	return err;
}

void spmu_sysfs_unregister(void)
{
	/* Removes the attributes, waiting for readers, before they are freed. */
	device_unregister(spmu_dev);
	spmu_dev = NULL;
	wait_for_completion(&spmu_dev_released);
	/* Also removes the subsystem's root device under devices/system. */
	bus_unregister(&spmu_subsys);
	spmu_bus_wait_released(&spmu_subsys);
	spmu_cpu_dirs_free();
}
