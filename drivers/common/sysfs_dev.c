// SPDX-License-Identifier: GPL-2.0
/*
 * simple-pmu: the system subsystem and its one device, shared by the
 * arm64 and x86 drivers. Each driver passes its own attribute groups.
 */

#define pr_fmt(fmt) "simple-pmu: " fmt

#include <linux/device.h>
#include <linux/slab.h>

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

static void spmu_dev_release(struct device *dev)
{
	kfree(dev);
}

/**
 * spmu_sysfs_register() - create /sys/devices/system/simple-pmu/simple-pmu0
 * @groups: NULL-terminated attribute groups of the device
 *
 * The groups are created together with the device, so user space never
 * sees the device without its attributes.
 *
 * Return: 0 or a negative errno; on error nothing is left registered.
 */
int spmu_sysfs_register(const struct attribute_group **groups)
{
	struct device *dev;
	int err;

	err = subsys_system_register(&spmu_subsys, NULL);
	if (err) {
		pr_err("cannot register sysfs subsystem (%d)\n", err);
		return err;
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

	err = device_register(dev);
	if (err) {
		/* device_register() failed: the last reference frees it. */
		put_device(dev);
		pr_err("cannot register sysfs device (%d)\n", err);
		goto err_subsys;
	}
	spmu_dev = dev;
	return 0;

err_subsys:
	bus_unregister(&spmu_subsys);
	return err;
}

void spmu_sysfs_unregister(void)
{
	device_unregister(spmu_dev);
	spmu_dev = NULL;
	/* Also removes the subsystem's root device under devices/system. */
	bus_unregister(&spmu_subsys);
}
