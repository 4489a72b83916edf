// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test fixture for modverify, never loaded: it references cr4_update_irqsoff (exported
 * to every module up to 6.18, to the kvm modules only from 6.19), filp_open (on
 * modverify's list of symbols simple-pmu never uses) and ktime_get (GPL-only).
 */
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <asm/tlbflush.h>

static int __init badmod_init(void)
{
	struct file *f = filp_open("/nonexistent", O_RDONLY, 0);

	if (!IS_ERR(f))
		filp_close(f, NULL);
	cr4_update_irqsoff(0, 0);
	return ktime_get() < 0 ? -EINVAL : -ENODEV;
}
module_init(badmod_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("modverify test fixture");
