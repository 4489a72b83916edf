/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ARMv8 PMUv3 registers used by simple-pmu: one accessor per register,
 * each bit field named once.
 *
 * Defined here rather than taken from the kernel: the kernel's PMU macros
 * moved from asm/perf_event.h to linux/perf/arm_pmuv3.h in 6.4.
 * Callers issue isb() after a group of writes and run with interrupts
 * off (PMSELR_EL0 selects the counter for the PMXEV* accessors).
 */
#ifndef SIMPLE_PMU_ARM64_PMU_REGS_H
#define SIMPLE_PMU_ARM64_PMU_REGS_H

#include <linux/bits.h>
#include <linux/types.h>
#include <asm/sysreg.h>

/* ID_AA64DFR0_EL1 */
#define SPMU_DFR0_PMUVER		GENMASK(11, 8)
#define SPMU_DFR0_PMUVER_NI		0x0	/* no PMU */
#define SPMU_DFR0_PMUVER_IMP_DEF	0xf	/* not PMUv3 */

/* PMCR_EL0 */
#define SPMU_PMCR_E		BIT(0)	/* enable all counters */
#define SPMU_PMCR_P		BIT(1)	/* reset event counters; never set */
#define SPMU_PMCR_C		BIT(2)	/* reset cycle counter; never set */
#define SPMU_PMCR_LC		BIT(6)	/* 64-bit cycle counter overflow */
#define SPMU_PMCR_N		GENMASK(15, 11)	/* number of event counters */

/* PMUSERENR_EL0 */
#define SPMU_PMUSERENR_EN	BIT(0)	/* EL0 may also write PMU registers */
#define SPMU_PMUSERENR_SW	BIT(1)
#define SPMU_PMUSERENR_CR	BIT(2)	/* EL0 reads PMCCNTR_EL0 */
#define SPMU_PMUSERENR_ER	BIT(3)	/* EL0 reads event counters */
/* Read-only user access, the value the kernel itself uses. */
#define SPMU_PMUSERENR_RO	(SPMU_PMUSERENR_CR | SPMU_PMUSERENR_ER)

/* Read-write: EN also lets EL0 write PMCR, PMCNTEN*, counters, types. */
#define SPMU_PMUSERENR_RW	(SPMU_PMUSERENR_EN | SPMU_PMUSERENR_RO)

/* PMCNTENSET_EL0 / PMCNTENCLR_EL0: bit n is event counter n */
#define SPMU_PMCNTEN_CYCLE	BIT(31)

/* PMCR_EL0.N is five bits, and bit 31 is the cycle counter's. */
#define SPMU_MAX_EVENT_COUNTERS	31

/*
 * Filter bits, the same in PMCCFILTR_EL0 and PMEVTYPER<n>_EL0:
 * P/U exclude EL1/EL0, NSH includes EL2 (where VHE kernels run).
 */
#define SPMU_FILTER_P		BIT(31)
#define SPMU_FILTER_U		BIT(30)
#define SPMU_FILTER_NSH		BIT(27)

/* PMEVTYPER<n>_EL0: 10 bits before PMUv3p1, 16 from then on */
#define SPMU_EVTYPER_EVENT	GENMASK(15, 0)

static inline u64 spmu_read_id_aa64dfr0(void)
{
	return read_sysreg(id_aa64dfr0_el1);
}

static inline u64 spmu_read_pmcr(void)
{
	return read_sysreg(pmcr_el0);
}

static inline void spmu_write_pmcr(u64 val)
{
	write_sysreg(val, pmcr_el0);
}

static inline u64 spmu_read_pmuserenr(void)
{
	return read_sysreg(pmuserenr_el0);
}

static inline void spmu_write_pmuserenr(u64 val)
{
	write_sysreg(val, pmuserenr_el0);
}

/* Reads as the set of enabled counters. */
static inline u64 spmu_read_pmcntenset(void)
{
	return read_sysreg(pmcntenset_el0);
}

/* Write-1-to-set: zero bits leave counters alone. */
static inline void spmu_write_pmcntenset(u64 val)
{
	write_sysreg(val, pmcntenset_el0);
}

/* Write-1-to-clear. */
static inline void spmu_write_pmcntenclr(u64 val)
{
	write_sysreg(val, pmcntenclr_el0);
}

static inline u64 spmu_read_pmccfiltr(void)
{
	return read_sysreg(pmccfiltr_el0);
}

static inline void spmu_write_pmccfiltr(u64 val)
{
	write_sysreg(val, pmccfiltr_el0);
}

/*
 * Event types go through PMSELR_EL0: perf uses the direct PMEVTYPER<n>
 * registers (since 5.7) and never PMSELR, and our callers run with
 * interrupts off, so the selection cannot be changed in between.
 */
static inline void spmu_select_counter(unsigned int n)
{
	write_sysreg(n, pmselr_el0);
	isb();
}

static inline u64 spmu_read_pmevtyper(unsigned int n)
{
	spmu_select_counter(n);
	return read_sysreg(pmxevtyper_el0);
}

static inline void spmu_write_pmevtyper(unsigned int n, u64 val)
{
	spmu_select_counter(n);
	write_sysreg(val, pmxevtyper_el0);
}

#endif /* SIMPLE_PMU_ARM64_PMU_REGS_H */
