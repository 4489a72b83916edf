/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the x86 driver asks perf for, as pure functions of the settings and
 * of CPUID, so that user-space unit tests (tests/unit/drivers/test_x86_plan.py)
 * run the same code the module does:
 *
 * - which events each CPU gets (slot 0 core cycles, then instructions
 *   retired and, where perf can count it, reference cycles), with the
 *   encoding published in sysfs `events` and the counters perf may give
 *   each (spmu_event_counters());
 * - the ring setting (2011: 1 kernel, 2 user, 3 both) as exclude bits;
 * - whether an RDPMC index perf published names a counter user space may
 *   read for that event;
 * - letting a process in (its mapping of /dev/simple-pmu), and when perf's
 *   per-counter RDPMC block (7.x) asks for the events to be taken again.
 */
#ifndef SIMPLE_PMU_X86_PLAN_H
#define SIMPLE_PMU_X86_PLAN_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/perf_event.h>
#include <linux/string.h>
#else
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#endif

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
 * @sure: the fixed counters perf drives (spmu_perf_fixed_masks())
 * @maybe: the fixed counters perf may drive
 *
 * Core cycles and instructions retired always (perf refuses them itself
 * where EBX marks them unavailable, and the load fails then). Reference
 * cycles only where perf can place them: 0x0300 is fixed counter 2 only,
 * and a pinned event with no counter would sit in ERROR for good.
 *
 * Return: the number of slots, at least 2.
 */
static inline unsigned int spmu_x86_plan_build(const struct spmu_perfmon *p,
					       unsigned int sure,
					       unsigned int maybe,
					       struct spmu_x86_plan *plan)
{
	/*
	 * Any general counter: on hybrid parts leaf 0xA gives only what both
	 * core types have, and a P-core has more.
	 */
	unsigned int gp = spmu_low_bits(SPMU_MAX_GP);

	plan->nr = 0;
	spmu_plan_add(plan, SPMU_HW_CPU_CYCLES, SPMU_ENC_CORE_CYCLES, gp,
		      maybe, false);
	spmu_plan_add(plan, SPMU_HW_INSTRUCTIONS, SPMU_ENC_INSN_RETIRED, gp,
		      maybe, false);
	if ((sure & (1u << 2)) &&
	    spmu_event_available(p, SPMU_EV_REF_CYCLES))
		spmu_plan_add(plan, SPMU_HW_REF_CPU_CYCLES,
			      SPMU_ENC_REF_CYCLES, gp, maybe, false);
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

/**
 * spmu_x86_attr_fill() - the perf attributes of one slot
 * @attr: filled whole
 * @slot: what to count
 * @ring: 1..3, checked by spmu_ring_excludes() before
 * @period: perf's x86 max_period
 *
 * PERF_TYPE_HARDWARE, so perf maps the event to the PMU of the CPU it is
 * bound to (cpu_atom on hybrid E-cores, where PERF_TYPE_RAW would give
 * -ENOENT). A sampling event only so that perf tells us when it reloads
 * the counter (counting events are reloaded silently, and a delta across
 * a reload is junk): with @period its max_period, that is exactly when the
 * counter wraps. Guests are never counted: 7.x cannot create a mediated
 * vPMU while a host event counts guest time.
 */
static inline void spmu_x86_attr_fill(struct perf_event_attr *attr,
				      const struct spmu_x86_slot *slot,
				      unsigned int ring,
				      unsigned long long period)
{
	bool excl_kernel = true, excl_user = false;

	spmu_ring_excludes(ring, &excl_kernel, &excl_user);
	memset(attr, 0, sizeof(*attr));
	attr->type = PERF_TYPE_HARDWARE;
	attr->size = sizeof(*attr);
	attr->config = slot->hw_id;
	attr->pinned = 1;
	attr->exclude_kernel = excl_kernel;
	attr->exclude_user = excl_user;
	attr->exclude_hv = 1;
	attr->exclude_guest = 1;
	attr->sample_period = period;
}

/*
 * What user space should read for an ACTIVE event counting @hw_id that
 * perf placed at RDPMC index @ecx: @ecx, or -1 (SPMU_NO_INDEX) when the
 * event is not one of the plan's, sits where it cannot be, or perf
 * blocked user RDPMC of its counter (@user_blocked: 7.x's per-counter
 * RDPMC_USER_DISABLE, where RDPMC reads 0).
 */
static inline int spmu_x86_published_index(const struct spmu_x86_plan *plan,
					   unsigned long long hw_id,
					   unsigned int ecx,
					   bool user_blocked)
{
	unsigned int i;

	if (user_blocked)
		return -1;
	for (i = 0; i < plan->nr; i++) {
		if (plan->slot[i].hw_id == hw_id)
			return spmu_x86_index_ok(&plan->slot[i], ecx) ?
			       (int)ecx : -1;
	}
	return -1;
}

/*
 * Letting a process in (pmu_member.c): the one mapping of /dev/simple-pmu
 * it may make. One page at offset 0, never writable or executable: it
 * carries no data, only the permission perf gives a process that mapped a
 * perf event. Return: 0, or the -errno mmap() fails with.
 */
static inline int spmu_x86_mapping_error(unsigned long len,
					 unsigned long page_size,
					 unsigned long pgoff, bool writable,
					 bool executable)
{
	if (len != page_size || pgoff)
		return -EINVAL;
	if (writable || executable)
		return -EINVAL;
	return 0;
}

/*
 * Whether perf granted the mapping: x86 perf's event_mapped() raises the
 * mm's perf_rdpmc_allowed only for an event it made user-readable (the
 * cpu PMU's rdpmc not 0 when the node was opened, and on 7.x not a
 * counter it blocks for user RDPMC), and the kernel then sets CR4.PCE
 * (@pce: read after, on the mapping process's CPU) unless rdpmc is 0 now.
 * Checked on the count and the bit themselves, not on perf's private
 * flag. Return: 0, or -EPERM.
 */
static inline int spmu_x86_grant_error(int allowed_before, int allowed_after,
				       bool pce)
{
	return (allowed_after == allowed_before + 1 && pce) ? 0 : -EPERM;
}

/*
 * Where perf blocks user RDPMC of CPU-wide counters (7.x, Panther Cove
 * on: @user_disable) unless rdpmc is 2, the module's counters read 0 in
 * a let-in process: refuse the mapping unless rdpmc 2 opens them to
 * everyone already (@everyone). Return: 0, or -EPERM.
 */
static inline int spmu_x86_let_in_blocked(bool user_disable, bool everyone)
{
	return (user_disable && !everyone) ? -EPERM : 0;
}

/*
 * The token a let-in mapping is made from (pmu_member.c): one is shared by
 * every open file. Make a new one when it is known @bad (perf made it
 * under rdpmc 0, as its flag or a refused mapping showed), unless @live
 * tokens are 2 already: an older one still held by open files. So a
 * member holding files open cannot pile up perf events.
 */
static inline bool spmu_x86_token_renew(bool bad, unsigned int live)
{
	return bad && live < 2;
}

/* What a CPU's checks saw the cpu PMU's rdpmc attribute allow. */
enum spmu_x86_rdpmc_seen {
	SPMU_RDPMC_MAPPED,	/* 1, the default: processes perf lets in */
	SPMU_RDPMC_NEVER,	/* 0: nobody, let in or not */
	SPMU_RDPMC_ALWAYS,	/* 2: every process */
};

/*
 * The kernel sets CR4.PCE (@pce) at each switch to an mm iff rdpmc is 2,
 * or it is 1 and the mm has a perf-granted mapping (@mm_allowed). What
 * one look cannot tell apart keeps the @last answer.
 */
static inline enum spmu_x86_rdpmc_seen
spmu_x86_rdpmc_seen(bool pce, bool mm_allowed, enum spmu_x86_rdpmc_seen last)
{
	if (pce && !mm_allowed)
		return SPMU_RDPMC_ALWAYS;
	if (!pce && mm_allowed)
		return SPMU_RDPMC_NEVER;
	if (pce)	/* 1 or 2 */
		return last == SPMU_RDPMC_NEVER ? SPMU_RDPMC_MAPPED : last;
	/* 0 or 1 */
	return last == SPMU_RDPMC_ALWAYS ? SPMU_RDPMC_MAPPED : last;
}

/*
 * 7.x, where perf blocks user RDPMC per counter (Panther Cove on): perf
 * decides when it activates an event, from rdpmc then, and our pinned
 * events stay active. @held CPUs hold our
 * events, of which @always saw rdpmc 2 at their last check; @blocked and
 * @unblocked: some event of ours is blocked, some is not. Take the events
 * again when they were made for the other setting: blocked while rdpmc is
 * 2 everywhere (blocked events are unplaced, so placement cannot tell), or
 * readable by perf-mapped processes while it is not.
 */
static inline bool spmu_x86_retake(unsigned int held, unsigned int always,
				   bool blocked, bool unblocked)
{
	if (!held)
		return false;
	return always == held ? blocked : unblocked;
}

/* sysfs access: "everyone" where rdpmc 2 opens every CPU holding events. */
static inline bool spmu_x86_everyone(unsigned int held, unsigned int always)
{
	return held && always == held;
}

/* Why the driver will not load, or SPMU_X86_OK. */
enum spmu_x86_refusal {
	SPMU_X86_OK,
	SPMU_X86_NOT_INTEL,	/* Zhaoxin, Centaur: other PMU rules */
	SPMU_X86_NO_ARCH_PERFMON,	/* no feature flag, or leaf 0xA absent */
	SPMU_X86_NO_PERF_PMU,	/* perf's own rules reject this leaf 0xA */
	SPMU_X86_NO_FIXED,	/* version 1: no fixed counters */
};

/**
 * spmu_x86_refusal() - may the driver load here?
 * @intel: the vendor is GenuineIntel
 * @arch_perfmon: the kernel set X86_FEATURE_ARCH_PERFMON
 * @max_leaf: the highest basic CPUID leaf
 * @p: leaf 0xA as decoded (ignored unless it is present)
 */
static inline enum spmu_x86_refusal
spmu_x86_refusal(bool intel, bool arch_perfmon, unsigned int max_leaf,
		 const struct spmu_perfmon *p)
{
	if (!intel)
		return SPMU_X86_NOT_INTEL;
	if (!arch_perfmon || !spmu_leaf_present(max_leaf,
						SPMU_CPUID_LEAF_PERFMON))
		return SPMU_X86_NO_ARCH_PERFMON;
	if (!spmu_perf_arch_pmu(p))
		return SPMU_X86_NO_PERF_PMU;
	if (p->version < 2)
		return SPMU_X86_NO_FIXED;
	return SPMU_X86_OK;
}

#endif /* SIMPLE_PMU_X86_PLAN_H */
