/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Decoding of CPUID leaf 0xA (architectural performance monitoring) and
 * leaf 0x23 (its per-core-type extension), plus the pure rules the x86
 * driver needs: which fixed counters perf itself uses, which counters an
 * event may land on, and RDPMC index arithmetic.
 *
 * Pure functions of register values, so this header also compiles in user
 * space, where unit tests feed it real CPUID dumps. Plain C types and
 * explicit masks keep it free of kernel headers.
 *
 * Sources, cited by name below: the Intel SDM (CPUID instruction); the
 * kernel's arch/x86/include/asm/perf_event.h (5.10 to 7.2 headers of the
 * test matrix) and arch/x86/events/intel/core.c, intel_pmu_init(); and
 * tools/arch/x86/kcpuid/cpuid.csv for leaf 0x23.
 */
#ifndef SIMPLE_PMU_X86_CPUID_PMU_H
#define SIMPLE_PMU_X86_CPUID_PMU_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#endif

#define SPMU_CPUID_LEAF_PERFMON		0xa
#define SPMU_CPUID_LEAF_HYBRID		0x1a
#define SPMU_CPUID_LEAF_PERFMON_EXT	0x23

/* EAX */
#define SPMU_CPUID_A_EAX_VERSION(eax)	((eax) & 0xffu)
#define SPMU_CPUID_A_EAX_NUM_GP(eax)	(((eax) >> 8) & 0xffu)
#define SPMU_CPUID_A_EAX_GP_WIDTH(eax)	(((eax) >> 16) & 0xffu)
#define SPMU_CPUID_A_EAX_EBX_LEN(eax)	(((eax) >> 24) & 0xffu)
/* EDX, defined from version 2 */
#define SPMU_CPUID_A_EDX_NUM_FIXED(edx)	((edx) & 0x1fu)
#define SPMU_CPUID_A_EDX_FIXED_WIDTH(edx) (((edx) >> 5) & 0xffu)
/* union cpuid10_edx: anythread_deprecated is bit 15 */
#define SPMU_CPUID_A_EDX_ANYTHREAD_DEPRECATED	0x8000u

/*
 * Architectural events: bit numbers of leaf 0xA EBX (a set bit means NOT
 * available) and of leaf 0x23 sub-leaf 3 EAX (a set bit means available).
 * Bits 8-11 exist in leaf 0x23 only (kcpuid's cpuid.csv: td_backend_bound,
 * td_bad_spec, td_frontend_bound, td_retiring).
 */
enum spmu_arch_event {
	SPMU_EV_CORE_CYCLES	= 0,
	SPMU_EV_INSN_RETIRED	= 1,
	SPMU_EV_REF_CYCLES	= 2,
	SPMU_EV_LLC_REFS	= 3,
	SPMU_EV_LLC_MISSES	= 4,
	SPMU_EV_BR_RETIRED	= 5,
	SPMU_EV_BR_MISSES	= 6,
	SPMU_EV_TOPDOWN_SLOTS	= 7,
	SPMU_EV_TD_BACKEND	= 8,
	SPMU_EV_TD_BAD_SPEC	= 9,
	SPMU_EV_TD_FRONTEND	= 10,
	SPMU_EV_TD_RETIRING	= 11,
};

struct spmu_perfmon {
	unsigned int version;		/* 0: no architectural perfmon */
	unsigned int num_gp;		/* general-purpose counters */
	unsigned int gp_width;		/* their width in bits */
	unsigned int gp_mask;		/* bit i: general counter i exists */
	unsigned int ebx_len;		/* number of valid bits in EBX */
	unsigned int events_unavail;	/* EBX, bits past ebx_len cleared */
	unsigned int events_avail;	/* bit set: architectural event usable */
	unsigned int num_fixed;		/* EDX[4:0]: contiguous from 0 */
	unsigned int fixed_width;	/* their width in bits */
	unsigned int fixed_mask;	/* bit i: fixed counter i exists (SDM) */
	unsigned int ecx;		/* raw fixed-counter bitmap, v5 and later */
	bool anythread_deprecated;
};

/* Bits 0..n-1 set, without shifting a 32-bit value by 32 or more. */
static inline unsigned int spmu_low_bits(unsigned int n)
{
	return n >= 32 ? ~0u : (1u << n) - 1;
}

/* Like the kernel's fls(): 1-based index of the highest set bit, 0 if none. */
static inline unsigned int spmu_fls(unsigned int x)
{
	return x ? 32 - __builtin_clz(x) : 0;
}

/*
 * On Intel, CPUID above the highest basic leaf returns the data of that
 * highest leaf, not zeros, so the maximum leaf must be checked first.
 */
static inline bool spmu_leaf_present(unsigned int max_basic_leaf,
				     unsigned int leaf)
{
	return max_basic_leaf >= leaf;
}

static inline void spmu_decode_cpuid_a(unsigned int eax, unsigned int ebx,
				       unsigned int ecx, unsigned int edx,
				       struct spmu_perfmon *p)
{
	p->version = SPMU_CPUID_A_EAX_VERSION(eax);
	p->num_gp = SPMU_CPUID_A_EAX_NUM_GP(eax);
	p->gp_width = SPMU_CPUID_A_EAX_GP_WIDTH(eax);
	p->gp_mask = spmu_low_bits(p->num_gp);
	p->ebx_len = SPMU_CPUID_A_EAX_EBX_LEN(eax);
	p->events_unavail = ebx & spmu_low_bits(p->ebx_len);
	/* An event beyond ebx_len is not enumerated, hence not available. */
	p->events_avail = ~ebx & spmu_low_bits(p->ebx_len);
	p->ecx = 0;
	p->anythread_deprecated = false;

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
	p->anythread_deprecated = edx & SPMU_CPUID_A_EDX_ANYTHREAD_DEPRECATED;
	/*
	 * From version 5, ECX lists fixed counters that need not be
	 * contiguous; counter i exists if ECX[i] or i < EDX[4:0] (SDM).
	 */
	if (p->version >= 5) {
		p->ecx = ecx;
		p->fixed_mask |= ecx;
	}
}

/* Whether the architectural event is usable, by either leaf's account. */
static inline bool spmu_event_available(const struct spmu_perfmon *p,
					enum spmu_arch_event ev)
{
	unsigned int bit = ev;

	return bit < 32 && (p->events_avail & (1u << bit));
}

static inline bool spmu_fixed_available(const struct spmu_perfmon *p,
					unsigned int idx)
{
	return idx < 32 && (p->fixed_mask & (1u << idx));
}

/*
 * The kernel's own view. init_intel() (arch/x86/kernel/cpu/intel.c) sets
 * X86_FEATURE_ARCH_PERFMON only if the version is non-zero and there are
 * at least 2 general counters; intel_pmu_init() then gives up with
 * -ENODEV if EBX is shorter than ARCH_PERFMON_EVENTS_COUNT (7) bits.
 */
static inline bool spmu_perf_arch_pmu(const struct spmu_perfmon *p)
{
	return p->version && p->num_gp > 1 && p->ebx_len >= 7;
}

/*
 * The fixed counters perf itself drives, which need not match the SDM's
 * list (intel_pmu_init(), arch/x86/events/intel/core.c):
 *
 * - Versions 2-4, and every version before Linux 5.12 (5.10 among the
 *   test matrix's kernels): counters 0..n-1
 *   with n = max(EDX[4:0], 3) on bare metal and EDX[4:0] under a
 *   hypervisor ("Quirk: v2 perfmon does not report fixed-purpose events,
 *   so assume at least 3 events, when not running in a hypervisor").
 *   5.10 also clamps n to INTEL_PMC_MAX_FIXED, 4 there.
 * - Version 5 and later from 5.12 (Kan Liang's January 2021 patch,
 *   "if (version > 1 && version < 5) ...
 *   else if (version >= 5) num_counters_fixed = fls(fixed_mask)", the
 *   enable bits being fixed_mask << 32): ECX alone, not ECX | EDX's
 *   contiguous counters as the SDM has it. The 2024 counter-mask
 *   rework (6.11) keeps that rule ("x86_pmu.fixed_cntr_mask64 =
 *   fixed_mask").
 *
 * @ecx_aware: the running kernel has the 5.12 rule.
 * Hybrid PMUs are set up differently: see spmu_apply_cpuid_23().
 */
static inline unsigned int spmu_perf_fixed_mask(const struct spmu_perfmon *p,
						bool hypervisor,
						bool ecx_aware)
{
	unsigned int n;

	if (p->version < 2)
		return 0;
	if (p->version >= 5 && ecx_aware)
		return p->ecx;
	n = p->num_fixed;
	if (!hypervisor && n < 3)
		n = 3;
	if (!ecx_aware && n > 4)
		n = 4;
	return spmu_low_bits(n);
}

/*
 * Which of the two rules the running kernel follows is written only in
 * intel_pmu_init(): no header, export or sysfs file shows it. So take
 * both: @sure, the counters perf drives under either rule (an event only
 * a fixed counter counts is planned only there, or it would sit in ERROR);
 * @maybe, those it may drive (an index perf gives there is its counter).
 * The rules differ on version 5 parts whose ECX and EDX disagree, and
 * where EDX[4:0] > 4 (5.10 clamps to 4). Where they differ, reference
 * cycles may be left out although the running kernel drives fixed 2: a
 * missing third event, never a pinned event stuck in ERROR.
 */
static inline void spmu_perf_fixed_masks(const struct spmu_perfmon *p,
					 bool hypervisor, unsigned int *sure,
					 unsigned int *maybe)
{
	unsigned int now = spmu_perf_fixed_mask(p, hypervisor, true);
	unsigned int old = spmu_perf_fixed_mask(p, hypervisor, false);

	*sure = now & old;
	*maybe = now | old;
}

/*
 * Leaf 0x23, architectural performance monitoring extended leaf (Meteor
 * Lake and later). Enumerated by CPUID.(7,1):EAX[8] (the kernel's
 * X86_FEATURE_ARCH_PERFMON_EXT, word 12 bit 8), and answered per core
 * type, unlike leaf 0xA on Alder and Raptor Lake, which reports only what
 * both core types share.
 *
 * Sub-leaf 0: EAX bit i set means sub-leaf i is valid (union cpuid35_eax:
 * 1 counters, 2 auto counter reload, 3 events, 4-5 arch-PEBS); EBX
 * (union cpuid35_ebx) bit 0 UnitMask2, bit 1 EQ, bit 2 RDPMC user
 * disable (7.x). Sub-leaf 1: EAX general counter bitmap, EBX fixed counter
 * bitmap (update_pmu_cap() uses them as cntr_mask64/fixed_cntr_mask64).
 * Sub-leaf 3: EAX architectural events, set bit = supported (cpuid.csv).
 */
#define SPMU_CPUID_7_1_EAX_PERFMON_EXT	0x100u		/* bit 8 */
#define SPMU_EXT_SUBLEAF_COUNTERS	1
#define SPMU_EXT_SUBLEAF_ACR		2
#define SPMU_EXT_SUBLEAF_EVENTS		3
#define SPMU_EXT_CAP_UMASK2		0x1u
#define SPMU_EXT_CAP_EQ			0x2u
#define SPMU_EXT_CAP_RDPMC_USER_DISABLE	0x4u

struct spmu_perfmon_ext {
	unsigned int subleaves;		/* sub-leaf 0 EAX */
	unsigned int caps;		/* sub-leaf 0 EBX */
	unsigned int gp_mask;		/* sub-leaf 1 EAX; 0 if not valid */
	unsigned int fixed_mask;	/* sub-leaf 1 EBX; 0 if not valid */
	unsigned int events;		/* sub-leaf 3 EAX; 0 if not valid */
};

static inline bool spmu_leaf_23_present(unsigned int max_basic_leaf,
					unsigned int leaf7_1_eax)
{
	return spmu_leaf_present(max_basic_leaf, SPMU_CPUID_LEAF_PERFMON_EXT) &&
	       (leaf7_1_eax & SPMU_CPUID_7_1_EAX_PERFMON_EXT);
}

static inline bool spmu_ext_subleaf_valid(const struct spmu_perfmon_ext *x,
					  unsigned int subleaf)
{
	return subleaf < 32 && (x->subleaves & (1u << subleaf));
}

/* Registers of sub-leaves that sub-leaf 0 does not list are ignored. */
static inline void spmu_decode_cpuid_23(unsigned int sl0_eax,
					unsigned int sl0_ebx,
					unsigned int sl1_eax,
					unsigned int sl1_ebx,
					unsigned int sl3_eax,
					struct spmu_perfmon_ext *x)
{
	x->subleaves = sl0_eax;
	x->caps = sl0_ebx;
	x->gp_mask = 0;
	x->fixed_mask = 0;
	x->events = 0;
	if (spmu_ext_subleaf_valid(x, SPMU_EXT_SUBLEAF_COUNTERS)) {
		x->gp_mask = sl1_eax;
		x->fixed_mask = sl1_ebx;
	}
	if (spmu_ext_subleaf_valid(x, SPMU_EXT_SUBLEAF_EVENTS))
		x->events = sl3_eax;
}

/*
 * Leaf 0x23 overrides leaf 0xA's counters and events for this core type,
 * as update_pmu_cap() does for hybrid PMUs. Alder and Raptor Lake have no
 * leaf 0x23: there the kernel adds counters to the P-core PMU by model
 * (intel_pmu_init(): cntr_mask64 <<= 2 | 3, fixed_cntr_mask64 <<= 1 | 1),
 * which this header does not guess.
 */
static inline void spmu_apply_cpuid_23(struct spmu_perfmon *p,
				       const struct spmu_perfmon_ext *x)
{
	if (spmu_ext_subleaf_valid(x, SPMU_EXT_SUBLEAF_COUNTERS)) {
		p->gp_mask = x->gp_mask;
		p->num_gp = spmu_fls(x->gp_mask);
		p->fixed_mask = x->fixed_mask;
	}
	if (spmu_ext_subleaf_valid(x, SPMU_EXT_SUBLEAF_EVENTS))
		p->events_avail = x->events;
}

/* Leaf 0x1A EAX[31:24] on hybrid parts (enum intel_cpu_type, 6.x). */
#define SPMU_CORE_TYPE_ATOM		0x20
#define SPMU_CORE_TYPE_CORE		0x40

static inline unsigned int spmu_core_type(unsigned int leaf1a_eax)
{
	return leaf1a_eax >> 24;
}

/*
 * Counter indices as perf numbers them (INTEL_PMC_IDX_FIXED): general
 * counter i is index i, fixed counter i is index 32 + i. A mask of such
 * indices fits in 64 bits.
 */
#define SPMU_PMC_IDX_FIXED		32

/*
 * X86_RAW_EVENT_MASK: event, umask, edge, inv, cmask. A fixed constraint
 * matches these bits exactly (FIXED_EVENT_FLAGS); USR, OS, INT, EN do not
 * matter.
 */
#define SPMU_RAW_EVENT_MASK		0xff84ffffu

/*
 * The counters perf may put an event on, as a mask of perf indices, for
 * the fixed-counter encodings the driver uses (FIXED_EVENT_CONSTRAINT
 * entries of arch/x86/events/intel/core.c):
 *
 *   0x00c0 INST_RETIRED.ANY       fixed 0, or any general counter
 *   0x003c CPU_CLK_UNHALTED.CORE  fixed 1, or any general counter
 *   0x0300 CPU_CLK_UNHALTED.REF   fixed 2 only
 *   0x0400 TOPDOWN.SLOTS          fixed 3 only
 *   0x0100 INST_RETIRED.PREC_DIST fixed 0 only, Ice Lake and later
 *                                 (intel_icl/glc/lnc_event_constraints);
 *                                 earlier cores have no such constraint,
 *                                 so it lands on a general counter.
 *
 * Event code 0x00 is a pseudo-encoding that perf does not extend to the
 * general counters (use_fixed_pseudo_encoding() in
 * intel_pmu_check_event_constraints()); the others it does, which is how
 * 0x003c ends up on a general counter when the NMI watchdog holds fixed 1.
 * Kernels from before that check extended every fixed constraint except
 * ref-cycles and the topdown ones, so 0x0100 could reach a general counter.
 * A fixed counter perf does not use is dropped ("c->idxmsk64 &=
 * intel_ctrl"): pass spmu_perf_fixed_masks()' @maybe, not the SDM's mask.
 * Other encodings are treated as unconstrained (any general counter);
 * per-model constraints on them are not modelled.
 */
static inline unsigned long long spmu_event_counters(unsigned int config,
						     unsigned int gp_mask,
						     unsigned int fixed_mask,
						     bool icl_or_later)
{
	unsigned long long fixed = (unsigned long long)fixed_mask <<
				   SPMU_PMC_IDX_FIXED;
	unsigned int code = config & SPMU_RAW_EVENT_MASK;
	int idx;

	switch (code) {
	case 0x00c0:
		idx = 0;
		break;
	case 0x003c:
		idx = 1;
		break;
	case 0x0300:
		idx = 2;
		break;
	case 0x0400:
		idx = 3;
		break;
	case 0x0100:
		idx = icl_or_later ? 0 : -1;
		break;
	default:
		idx = -1;
		break;
	}
	if (idx < 0)
		return gp_mask;
	fixed &= 1ULL << (SPMU_PMC_IDX_FIXED + idx);
	if (!(code & 0xff))
		return fixed;
	return fixed | gp_mask;
}

/*
 * RDPMC's ECX for a counter (INTEL_PMC_FIXED_RDPMC_BASE): bit 30 selects
 * the fixed counters, so fixed counter i is (1 << 30) | i and general
 * counter i is i. Bit 29 (INTEL_PMC_FIXED_RDPMC_METRICS) reads
 * PERF_METRICS, which is not a counter.
 */
#define SPMU_RDPMC_FIXED		0x40000000u	/* bit 30 */
#define SPMU_RDPMC_METRICS		0x20000000u	/* bit 29 */
/* INTEL_PMC_MAX_GENERIC and INTEL_PMC_MAX_FIXED (6.1 to 7.2) */
#define SPMU_MAX_GP			32
#define SPMU_MAX_FIXED			16

static inline unsigned int spmu_rdpmc_index(bool fixed, unsigned int i)
{
	return fixed ? SPMU_RDPMC_FIXED | i : i;
}

/* From a perf index, as event->hw.idx holds it. */
static inline unsigned int spmu_rdpmc_from_perf_idx(unsigned int idx)
{
	if (idx >= SPMU_PMC_IDX_FIXED)
		return spmu_rdpmc_index(true, idx - SPMU_PMC_IDX_FIXED);
	return spmu_rdpmc_index(false, idx);
}

/*
 * The inverse: which counter an RDPMC index names.
 * Return: 0, or -1 for an index that names no counter (metrics, bits set
 * outside the index, or past the architectural maximum).
 */
static inline int spmu_rdpmc_decode(unsigned int ecx, bool *fixed,
				    unsigned int *i)
{
	if (ecx & SPMU_RDPMC_FIXED) {
		ecx &= ~SPMU_RDPMC_FIXED;
		if (ecx >= SPMU_MAX_FIXED)
			return -1;
		*fixed = true;
		*i = ecx;
		return 0;
	}
	if (ecx >= SPMU_MAX_GP)
		return -1;
	*fixed = false;
	*i = ecx;
	return 0;
}

#endif /* SIMPLE_PMU_X86_CPUID_PMU_H */
