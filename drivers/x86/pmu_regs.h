/* SPDX-License-Identifier: GPL-2.0 */
/*
 * x86 registers used by simple-pmu, one accessor each.
 *
 * cpuid_count() has moved between headers (asm/processor.h, asm/cpuid.h,
 * asm/cpuid/api.h); the generated compat.h includes the right one for the
 * target kernel.
 */
#ifndef SIMPLE_PMU_X86_PMU_REGS_H
#define SIMPLE_PMU_X86_PMU_REGS_H

#include <linux/types.h>

#include "compat.h"

struct spmu_cpuid_regs {
	u32 eax;
	u32 ebx;
	u32 ecx;
	u32 edx;
};

/* CPUID on the calling CPU; ECX selects the sub-leaf. */
static inline void spmu_cpuid(u32 leaf, u32 subleaf, struct spmu_cpuid_regs *r)
{
	cpuid_count(leaf, subleaf, &r->eax, &r->ebx, &r->ecx, &r->edx);
}

#endif /* SIMPLE_PMU_X86_PMU_REGS_H */
