/* SPDX-License-Identifier: GPL-2.0 */
/*
 * simple-pmu x86: state shared by the driver's files.
 */
#ifndef SIMPLE_PMU_X86_PMU_H
#define SIMPLE_PMU_X86_PMU_H

#include <linux/mutex.h>
#include <linux/types.h>

#include "drivers/common/counters.h"
#include "drivers/x86/plan.h"

struct attribute_group;
struct perf_event;

/* The 2011 attributes: what is counted, and whether counters are held. */
struct spmu_settings {
	unsigned int ring;		/* SPMU_RING_* */
	unsigned int rdpmc_fixed;	/* 1: counters held */
};

/* What CPUID and the kernel's rules say, from the CPU that loaded us. */
struct spmu_hw {
	struct spmu_perfmon perfmon;
	/* Fixed counters perf drives (the kernel's rules, not the SDM's). */
	unsigned int perf_fixed_mask;
	bool hypervisor;
	bool hybrid;
	/* Our events' sampling period: perf's max_period. */
	u64 reload_period;
	/* perf may block user RDPMC per counter (7.x, leaf 0x23). */
	bool user_disable;
	struct spmu_x86_plan plan;
};

extern struct spmu_settings spmu_settings;
extern struct spmu_hw spmu_hw;
extern struct mutex spmu_lock;
extern const struct attribute_group *spmu_x86_groups[];

int spmu_probe_hw(void);
struct perf_event *spmu_cycles_token(void);
void spmu_counter_set_build(unsigned int ring, struct spmu_counter_set *set);
int spmu_settings_set(const struct spmu_settings *st);
bool spmu_rdpmc_always_everywhere(void);
bool spmu_cpu_rdpmc_always(unsigned int cpu);
bool spmu_pce_here(void);
void spmu_rdpmc_watch_start(void);
void spmu_rdpmc_watch_stop(void);
int spmu_members_init(void);
void spmu_members_exit(void);
unsigned int spmu_members_count(void);

#endif /* SIMPLE_PMU_X86_PMU_H */
