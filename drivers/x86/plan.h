/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the x86 driver asks perf for, as pure functions of the settings and
 * of CPUID, so that user-space unit tests (tests/unit/test_x86_plan.py)
 * run the same code the module does:
 *
 * - which events each CPU gets (slot 0 core cycles, then instructions
 *   retired and, where perf can count it, reference cycles), with the
 *   encoding published in sysfs `events` and the counters perf may give
 *   each (spmu_event_counters());
 * - the ring setting (2011: 1 kernel, 2 user, 3 both) as exclude bits;
 * - whether an RDPMC index perf published names a counter user space may
 *   read for that event.
 */
#ifndef SIMPLE_PMU_X86_PLAN_H
#define SIMPLE_PMU_X86_PLAN_H

#include "drivers/x86/cpuid_pmu.h"

#define SPMU_RING_KERNEL	1u
#define SPMU_RING_USER		2u
#define SPMU_RING_ALL		(SPMU_RING_KERNEL | SPMU_RING_USER)

/*
 * perf's generalised hardware events (enum perf_hw_id, uapi): the same
 * numbers on every kernel, and perf maps them to the PMU of the CPU the
 * event is bound to, cpu_core or cpu_atom on hybrid parts, which a raw
 * config (PERF_TYPE_RAW, cpu_core only) would not.
 */
#define SPMU_HW_CPU_CYCLES	0u	/* PERF_COUNT_HW_CPU_CYCLES */
#define SPMU_HW_INSTRUCTIONS	1u	/* PERF_COUNT_HW_INSTRUCTIONS */
#define SPMU_HW_REF_CPU_CYCLES	9u	/* PERF_COUNT_HW_REF_CPU_CYCLES */

/* Raw encodings (event | umask << 8) intel_perfmon_event_map gives them. */
#define SPMU_ENC_CORE_CYCLES	0x003cu
#define SPMU_ENC_INSN_RETIRED	0x00c0u
#define SPMU_ENC_REF_CYCLES	0x0300u

#define SPMU_X86_MAX_SLOTS	3

struct spmu_x86_slot {
	unsigned int hw_id;	/* perf_hw_id, the attr's config */
	unsigned int encoding;	/* what perf programs, published in `events` */
	/* Counters perf may place it on, as perf indices (fixed i: 32 + i). */
	unsigned long long counters;
};

struct spmu_x86_plan {
	unsigned int nr;
	struct spmu_x86_slot slot[SPMU_X86_MAX_SLOTS];
};

/* Return: 0, or -1 for a ring other than 1, 2 or 3 (nothing counted). */
static inline int spmu_ring_excludes(unsigned int ring, bool *exclude_kernel,
				     bool *exclude_user)
{
	if (ring < SPMU_RING_KERNEL || ring > SPMU_RING_ALL)
		return -1;
	*exclude_kernel = !(ring & SPMU_RING_KERNEL);
	*exclude_user = !(ring & SPMU_RING_USER);
	return 0;
}

static inline void spmu_plan_add(struct spmu_x86_plan *plan,
				 unsigned int hw_id, unsigned int encoding,
				 unsigned int gp_mask, unsigned int fixed_mask,
				 bool icl_or_later)
{
	struct spmu_x86_slot *s = &plan->slot[plan->nr++];

	s->hw_id = hw_id;
	s->encoding = encoding;
	s->counters = spmu_event_counters(encoding, gp_mask, fixed_mask,
					  icl_or_later);
}

/**
 * spmu_x86_plan_build() - the events every CPU gets
 * @p: leaf 0xA (and 0x23) as decoded
 * @fixed_mask: the fixed counters perf drives (spmu_perf_fixed_mask())
 *
 * Core cycles and instructions retired always (perf refuses them itself
 * where EBX marks them unavailable, and the load fails then). Reference
 * cycles only where perf can place them: 0x0300 is fixed counter 2 only,
 * and a pinned event with no counter would sit in ERROR for good.
 *
 * Return: the number of slots, at least 2.
 */
static inline unsigned int spmu_x86_plan_build(const struct spmu_perfmon *p,
					       unsigned int fixed_mask,
					       struct spmu_x86_plan *plan)
{
	/*
	 * Any general counter: on hybrid parts leaf 0xA gives only what both
	 * core types have, and a P-core has more.
	 */
	unsigned int gp = spmu_low_bits(SPMU_MAX_GP);

	plan->nr = 0;
	spmu_plan_add(plan, SPMU_HW_CPU_CYCLES, SPMU_ENC_CORE_CYCLES, gp,
		      fixed_mask, false);
	spmu_plan_add(plan, SPMU_HW_INSTRUCTIONS, SPMU_ENC_INSN_RETIRED, gp,
		      fixed_mask, false);
	if ((fixed_mask & (1u << 2)) &&
	    spmu_event_available(p, SPMU_EV_REF_CYCLES))
		spmu_plan_add(plan, SPMU_HW_REF_CPU_CYCLES,
			      SPMU_ENC_REF_CYCLES, gp, fixed_mask, false);
	return plan->nr;
}

/*
 * Is @ecx, the RDPMC index perf gave an event of @slot, one user space can
 * read it at? It must name a counter (not PERF_METRICS, not past the
 * architectural maximum) that the event may occupy at all: anything else
 * means perf placed something this header does not understand, and the
 * slot is published as unreadable rather than guessed.
 */
static inline bool spmu_x86_index_ok(const struct spmu_x86_slot *slot,
				     unsigned int ecx)
{
	unsigned int i;
	bool fixed;

	if (spmu_rdpmc_decode(ecx, &fixed, &i))
		return false;
	if (fixed)
		i += SPMU_PMC_IDX_FIXED;
	return slot->counters & (1ULL << i);
}

#endif /* SIMPLE_PMU_X86_PLAN_H */
