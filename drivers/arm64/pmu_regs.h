/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ARMv8 PMUv3 registers simple-pmu touches: one accessor per register,
 * each bit field named once.
 *
 * perf owns the PMU: filters, types, PMCR and PMSELR are never written
 * here. The driver reads the ID registers to validate its settings and
 * writes PMUSERENR_EL0 to open read access for EL0; at each check while
 * access is open it zeroes the counters perf is not using, as perf's own
 * grant does (armv8pmu_enable_user_access()), so EL0 never reads what an
 * event perf has released left behind. The bits are defined here rather
 * than taken from the kernel: its PMU macros moved to
 * linux/perf/arm_pmuv3.h in 6.4.
 */
#ifndef SIMPLE_PMU_ARM64_PMU_REGS_H
#define SIMPLE_PMU_ARM64_PMU_REGS_H

#include <linux/bits.h>
#include <linux/types.h>
#include <asm/sysreg.h>

/* ID_AA64DFR0_EL1 */
#define SPMU_DFR0_PMUVER		GENMASK(11, 8)
#define SPMU_DFR0_PMUVER_NI		0x0	/* no PMU */
#define SPMU_DFR0_PMUVER_V3		0x1	/* PMUv3: 10-bit event numbers */
#define SPMU_DFR0_PMUVER_V3P1		0x4	/* 16-bit event numbers */
#define SPMU_DFR0_PMUVER_V3P5		0x6	/* 64-bit event counters (LP) */
#define SPMU_DFR0_PMUVER_IMP_DEF	0xf	/* not PMUv3 */

/* PMCR_EL0 */
#define SPMU_PMCR_N		GENMASK(15, 11)	/* number of event counters */

/* PMUSERENR_EL0 */
#define SPMU_PMUSERENR_EN	BIT(0)	/* EL0 may write the PMU: never ours */
#define SPMU_PMUSERENR_CR	BIT(2)	/* EL0 reads PMCCNTR_EL0 */
#define SPMU_PMUSERENR_ER	BIT(3)	/* EL0 reads event counters */
#define SPMU_PMUSERENR_UEN	BIT(4)	/* PMUv3p9: perf's filtered grant */
/* Read-only user access, the value the kernel itself uses. */
#define SPMU_PMUSERENR_RO	(SPMU_PMUSERENR_CR | SPMU_PMUSERENR_ER)

/* User space's name for PMCCNTR_EL0 (its PMCNTENSET bit); 0..30 PMEVCNTRn. */
#define SPMU_CYCLE_COUNTER	31
#define SPMU_MAX_EVENT_COUNTERS	31

/* Event numbers */
#define SPMU_EVENT_CPU_CYCLES	0x11
#define SPMU_EVENT_MAX_V3	0x3ff	/* 10-bit field before PMUv3p1 */
#define SPMU_EVENT_MAX		0xffff
/* Common events PMCEID0/1_EL0 describe: bits 0-31 and 32-63 of each. */
#define SPMU_COMMON_EVENTS_LO	0x0000	/* ..0x003f */
#define SPMU_COMMON_EVENTS_HI	0x4000	/* ..0x403f, from PMUv3p1 */
#define SPMU_COMMON_EVENTS_NR	0x40

static inline u64 spmu_read_id_aa64dfr0(void)
{
	return read_sysreg(id_aa64dfr0_el1);
}

static inline u64 spmu_read_pmcr(void)
{
	return read_sysreg(pmcr_el0);
}

static inline u64 spmu_read_pmceid0(void)
{
	return read_sysreg(pmceid0_el0);
}

static inline u64 spmu_read_pmceid1(void)
{
	return read_sysreg(pmceid1_el0);
}

static inline u64 spmu_read_pmuserenr(void)
{
	return read_sysreg(pmuserenr_el0);
}

static inline void spmu_write_pmuserenr(u64 val)
{
	write_sysreg(val, pmuserenr_el0);
	isb();
}

#endif /* SIMPLE_PMU_ARM64_PMU_REGS_H */
