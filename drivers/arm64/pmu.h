/* SPDX-License-Identifier: GPL-2.0 */
/* simple-pmu arm64: state shared by the module, per-CPU and sysfs parts. */
#ifndef SIMPLE_PMU_ARM64_PMU_H
#define SIMPLE_PMU_ARM64_PMU_H

#include <linux/bitfield.h>
#include <linux/bits.h>
#include <linux/cpumask.h>
#include <linux/mutex.h>
#include <linux/types.h>

#include "drivers/arm64/pmu_regs.h"

struct attribute_group;

/* user_access levels */
#define SPMU_UA_OFF		0	/* PMUSERENR = 0 */
#define SPMU_UA_RO		1	/* CR|ER: read counters only */
#define SPMU_UA_RW		2	/* EN|CR|ER: also stop or reset them */

/* ring: what the counters count, as in the 2011 x86 driver */
#define SPMU_RING_KERNEL	BIT(0)	/* EL1, and EL2 on VHE */
#define SPMU_RING_USER		BIT(1)	/* EL0 */
#define SPMU_RING_ALL		(SPMU_RING_KERNEL | SPMU_RING_USER)

#define SPMU_EVENT_MAX		0xffff

#define SPMU_RECHECK_MS_MIN	10
#define SPMU_RECHECK_MS_MAX	10000

/* What the module parameters and sysfs speak; guarded by spmu_lock. */
struct spmu_settings {
	unsigned int user_access;
	unsigned int ring;
	unsigned int nr_events;
	u16 events[SPMU_MAX_EVENT_COUNTERS];
};

/*
 * Register values every CPU gets, built once from the settings. Written
 * under spmu_lock and cpus_read_lock(), so cpuhp callbacks may read it.
 */
struct spmu_config {
	u64 pmuserenr;
	bool own_pmuserenr;	/* false: access off, PMUSERENR left to perf */
	u64 pmccfiltr;
	u32 pmcnten;		/* cycle counter and our event counters */
	unsigned int nr_events;
	u8 idx[SPMU_MAX_EVENT_COUNTERS];	/* event i -> counter */
	u64 evtyper[SPMU_MAX_EVENT_COUNTERS];	/* event i's PMEVTYPER */
};

/* What the hardware offers, as seen on the CPU that loaded the module. */
struct spmu_hw {
	unsigned int pmuver;		/* ID_AA64DFR0_EL1.PMUVer, raw */
	unsigned int num_counters;	/* PMCR_EL0.N */
};

/* Times a CPU's state was found lost and put back, by cause. */
struct spmu_interventions {
	unsigned long hotplug;
	unsigned long pm;
	unsigned long perf;
};

extern struct spmu_settings spmu_settings;
extern struct spmu_config spmu_config;
extern struct spmu_hw spmu_hw;
extern struct mutex spmu_lock;
extern unsigned int spmu_recheck_ms;
extern bool spmu_loading;
/* CPUs whose registers hold spmu_config (or are being kept at it). */
extern struct cpumask spmu_active_cpus;
extern const struct attribute_group *spmu_arm64_groups[];

static inline unsigned int spmu_pmuver(void)
{
	return FIELD_GET(SPMU_DFR0_PMUVER, spmu_read_id_aa64dfr0());
}

/* 0: no PMU; 0xf: an IMPLEMENTATION DEFINED PMU, not PMUv3. */
static inline bool spmu_pmuver_is_v3(unsigned int pmuver)
{
	return pmuver != SPMU_DFR0_PMUVER_NI &&
	       pmuver != SPMU_DFR0_PMUVER_IMP_DEF;
}

/* pmu_config.c */
int spmu_parse_events(const char *s, struct spmu_settings *st);
void spmu_config_build(const struct spmu_settings *st,
		       struct spmu_config *cfg);
void spmu_settings_set(const struct spmu_settings *st);

/* pmu_cpu.c */
int spmu_cpu_online(unsigned int cpu);
int spmu_cpu_offline(unsigned int cpu);
void spmu_cpu_pm_exit(void);
void spmu_cpu_update(void *unused);
void spmu_cpu_interventions(unsigned int cpu, struct spmu_interventions *n);

#endif /* SIMPLE_PMU_ARM64_PMU_H */
