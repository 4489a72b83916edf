/* SPDX-License-Identifier: GPL-2.0 */
/* simple-pmu arm64: state shared by the module, config, access and sysfs parts. */
#ifndef SIMPLE_PMU_ARM64_PMU_H
#define SIMPLE_PMU_ARM64_PMU_H

#include <linux/bits.h>
#include <linux/ioctl.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include "drivers/arm64/pmu_regs.h"
#include "drivers/common/counters.h"

struct attribute_group;

/* ring: what the counters count, as in the 2011 x86 driver */
#define SPMU_RING_KERNEL	BIT(0)	/* EL1, and EL2 under a VHE kernel */
#define SPMU_RING_USER		BIT(1)	/* EL0 */
#define SPMU_RING_ALL		(SPMU_RING_KERNEL | SPMU_RING_USER)

/* Slot 0 counts cycles; the configured events take the rest. */
#define SPMU_MAX_EVENTS		(SPMU_MAX_SLOTS - 1)

/* What the module parameters and sysfs speak; guarded by spmu_lock. */
struct spmu_settings {
	unsigned int ring;
	unsigned int nr_events;
	u16 events[SPMU_MAX_EVENTS];
};

/* What the hardware offers, on every online CPU at load. */
struct spmu_hw {
	unsigned int pmuver;		/* lowest ID_AA64DFR0_EL1.PMUVer */
	unsigned int num_counters;	/* lowest PMCR_EL0.N */
	u64 pmceid[2];			/* PMCEID0/1_EL0, ANDed */
	bool long_events;		/* 64-bit event counters (PMUv3p5) */
};

extern struct spmu_settings spmu_settings;
extern struct spmu_hw spmu_hw;
extern struct mutex spmu_lock;
extern const struct attribute_group *spmu_arm64_groups[];

/* pmu_config.c */
int spmu_probe_hw(void);
int spmu_parse_events(const char *s, struct spmu_settings *st);
int spmu_check_events(const struct spmu_settings *st);
void spmu_counter_set_build(const struct spmu_settings *st,
			    struct spmu_counter_set *set);
int spmu_settings_set(const struct spmu_settings *st);
void spmu_user_access_set(bool on);
unsigned int spmu_event_width(void);

/* pmu_access.c */
int spmu_access_init(void);
void spmu_access_exit(void);

/* pmu_member.c: /dev/simple-pmu, whose ioctls let the calling thread in or out */
#define SPMU_IOC_MAGIC		0xB9
#define SPMU_IOC_JOIN		_IO(SPMU_IOC_MAGIC, 0x01)
#define SPMU_IOC_LEAVE		_IO(SPMU_IOC_MAGIC, 0x02)

struct preempt_ops;

extern bool spmu_everyone;
int spmu_members_init(void);
void spmu_members_exit(void);
bool spmu_member_running_here(void);
const struct preempt_ops *spmu_member_ops(void);
unsigned int spmu_members_count(void);

#endif /* SIMPLE_PMU_ARM64_PMU_H */
