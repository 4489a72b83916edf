/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading a counter by the number the driver publishes (31: PMCCNTR_EL0,
 * 0..30: PMEVCNTR<n>_EL0), directly with mrs: no PMSELR_EL0, which other
 * EL0 code may be using. Also the known loop with direct reads around it.
 */
#ifndef SPMU_COUNTERS_H
#define SPMU_COUNTERS_H

#include <stdint.h>

#if defined(__aarch64__)
#define SPMU_RD(n)							\
	case n:								\
		__asm__ __volatile__("mrs %0, pmevcntr" #n "_el0"	\
				     : "=r" (v) : : "memory");		\
		break

/* noinline: every call takes the same path, so windows are comparable. */
static __attribute__((noinline)) uint64_t spmu_read_counter(int idx)
{
	uint64_t v = 0;

	switch (idx) {
	SPMU_RD(0); SPMU_RD(1); SPMU_RD(2); SPMU_RD(3); SPMU_RD(4);
	SPMU_RD(5); SPMU_RD(6); SPMU_RD(7); SPMU_RD(8); SPMU_RD(9);
	SPMU_RD(10); SPMU_RD(11); SPMU_RD(12); SPMU_RD(13); SPMU_RD(14);
	SPMU_RD(15); SPMU_RD(16); SPMU_RD(17); SPMU_RD(18); SPMU_RD(19);
	SPMU_RD(20); SPMU_RD(21); SPMU_RD(22); SPMU_RD(23); SPMU_RD(24);
	SPMU_RD(25); SPMU_RD(26); SPMU_RD(27); SPMU_RD(28); SPMU_RD(29);
	SPMU_RD(30);
	case 31:
		__asm__ __volatile__("mrs %0, pmccntr_el0" : "=r" (v) : : "memory");
		break;
	default:
		break;
	}
	return v;
}
#endif

#endif /* SPMU_COUNTERS_H */
