/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86 registers used by simple-pmu, one accessor each.
 *
 * CPUID is issued here rather than through the kernel's cpuid(): that
 * is in asm/processor.h up to 6.1 at least but in asm/cpuid/api.h by 7.2,
 * which nothing a module includes pulls in.
 */
#ifndef SIMPLE_PMU_X86_PMU_REGS_H
#define SIMPLE_PMU_X86_PMU_REGS_H

#include <linux/types.h>

struct spmu_cpuid_regs {
	u32 eax;
	u32 ebx;
	u32 ecx;
	u32 edx;
};

/* CPUID on the calling CPU; ECX selects the sub-leaf. */
static inline void spmu_cpuid(u32 leaf, u32 subleaf, struct spmu_cpuid_regs *r)
{
	asm volatile("cpuid"
		     : "=a" (r->eax), "=b" (r->ebx), "=c" (r->ecx), "=d" (r->edx)
		     : "0" (leaf), "2" (subleaf));
}

#endif /* SIMPLE_PMU_X86_PMU_REGS_H */
