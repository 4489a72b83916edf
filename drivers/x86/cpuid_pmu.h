/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Decoding of CPUID leaf 0xA (architectural performance monitoring).
 *
 * Pure functions of the four register values, so this header also
 * compiles in user space, where unit tests feed it CPUID dumps. Plain C
 * types and explicit masks keep it free of kernel headers.
 */
#ifndef SIMPLE_PMU_X86_CPUID_PMU_H
#define SIMPLE_PMU_X86_CPUID_PMU_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#endif

#define SPMU_CPUID_LEAF_PERFMON		0xa

/* EAX */
#define SPMU_CPUID_A_EAX_VERSION(eax)	((eax) & 0xffu)
#define SPMU_CPUID_A_EAX_NUM_GP(eax)	(((eax) >> 8) & 0xffu)
#define SPMU_CPUID_A_EAX_GP_WIDTH(eax)	(((eax) >> 16) & 0xffu)
#define SPMU_CPUID_A_EAX_EBX_LEN(eax)	(((eax) >> 24) & 0xffu)
/* EDX, defined from version 2 */
#define SPMU_CPUID_A_EDX_NUM_FIXED(edx)	((edx) & 0x1fu)
#define SPMU_CPUID_A_EDX_FIXED_WIDTH(edx) (((edx) >> 5) & 0xffu)

/* EBX: a set bit means the event is NOT available. */
enum spmu_arch_event {
	SPMU_EV_CORE_CYCLES	= 0,
	SPMU_EV_INSN_RETIRED	= 1,
	SPMU_EV_REF_CYCLES	= 2,
	SPMU_EV_LLC_REFS	= 3,
	SPMU_EV_LLC_MISSES	= 4,
	SPMU_EV_BR_RETIRED	= 5,
	SPMU_EV_BR_MISSES	= 6,
	SPMU_EV_TOPDOWN_SLOTS	= 7,
};

struct spmu_perfmon {
	unsigned int version;		/* 0: no architectural perfmon */
	unsigned int num_gp;		/* general-purpose counters */
	unsigned int gp_width;		/* their width in bits */
	unsigned int ebx_len;		/* number of valid bits in EBX */
	unsigned int events_unavail;	/* EBX, bits past ebx_len cleared */
	unsigned int num_fixed;		/* contiguous fixed counters from 0 */
	unsigned int fixed_width;	/* their width in bits */
	unsigned int fixed_mask;	/* bit i: fixed counter i exists */
};

/* Bits 0..n-1 set, without shifting a 32-bit value by 32 or more. */
static inline unsigned int spmu_low_bits(unsigned int n)
{
	return n >= 32 ? ~0u : (1u << n) - 1;
}

static inline void spmu_decode_cpuid_a(unsigned int eax, unsigned int ebx,
				       unsigned int ecx, unsigned int edx,
				       struct spmu_perfmon *p)
{
	p->version = SPMU_CPUID_A_EAX_VERSION(eax);
	p->num_gp = SPMU_CPUID_A_EAX_NUM_GP(eax);
	p->gp_width = SPMU_CPUID_A_EAX_GP_WIDTH(eax);
	p->ebx_len = SPMU_CPUID_A_EAX_EBX_LEN(eax);
	p->events_unavail = ebx & spmu_low_bits(p->ebx_len);

	/* Version 1 has no fixed counters; EDX is reserved there. */
	if (p->version < 2) {
		p->num_fixed = 0;
		p->fixed_width = 0;
		p->fixed_mask = 0;
		return;
	}
	p->num_fixed = SPMU_CPUID_A_EDX_NUM_FIXED(edx);
	p->fixed_width = SPMU_CPUID_A_EDX_FIXED_WIDTH(edx);
	p->fixed_mask = spmu_low_bits(p->num_fixed);
	/*
	 * From version 5, ECX lists fixed counters that need not be
	 * contiguous; counter i exists if ECX[i] or i < EDX[4:0] (SDM).
	 */
	if (p->version >= 5)
		p->fixed_mask |= ecx;
}

/* An event beyond ebx_len is not enumerated, hence not available. */
static inline bool spmu_event_available(const struct spmu_perfmon *p,
					enum spmu_arch_event ev)
{
	unsigned int bit = ev;

	return bit < p->ebx_len && !(p->events_unavail & (1u << bit));
}

static inline bool spmu_fixed_available(const struct spmu_perfmon *p,
					unsigned int idx)
{
	return idx < 32 && (p->fixed_mask & (1u << idx));
}

#endif /* SIMPLE_PMU_X86_CPUID_PMU_H */
