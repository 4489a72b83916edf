/* SPDX-License-Identifier: GPL-2.0 */
/* simple-pmu arm64: state shared by the module, per-CPU and sysfs parts. */
#ifndef SIMPLE_PMU_ARM64_PMU_H
#define SIMPLE_PMU_ARM64_PMU_H

#include <linux/bitfield.h>
#include <linux/cpumask.h>
#include <linux/types.h>

#include "drivers/arm64/pmu_regs.h"

struct attribute_group;

/* What every CPU gets; computed once at load, read by the per-CPU code. */
struct spmu_config {
	u64 pmuserenr;
	u64 pmccfiltr;
};

/* What the hardware offers, as seen on the CPU that loaded the module. */
struct spmu_hw {
	unsigned int pmuver;		/* ID_AA64DFR0_EL1.PMUVer, raw */
	unsigned int num_counters;	/* PMCR_EL0.N */
};

extern struct spmu_config spmu_config;
extern struct spmu_hw spmu_hw;
/* CPUs whose registers currently hold spmu_config. */
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

int spmu_cpu_online(unsigned int cpu);
int spmu_cpu_offline(unsigned int cpu);
void spmu_cpu_reapply(void);

#endif /* SIMPLE_PMU_ARM64_PMU_H */
