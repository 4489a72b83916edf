/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A loop of known length for exact-count tests, written in assembly so the
 * compiler cannot change it. The host reads the global labels from the built
 * binary (pmubuild.guests.guest.loop_layout) and derives the expected instruction
 * count from them; nothing here states the answer.
 *
 * spmu_measure(n, &cycles): instructions retired (event counter selected by
 * PMSELR_EL0) from spmu_region_start up to spmu_region_end, with n loop
 * iterations; *cycles gets the PMCCNTR_EL0 delta around the same region.
 * spmu_spin(n): the same loop, no counter reads (for perf to measure).
 */
#ifndef SPMU_ARM64_LOOP_H
#define SPMU_ARM64_LOOP_H

#include <stdint.h>

uint64_t spmu_measure(uint64_t n, uint64_t *cycles);
void spmu_spin(uint64_t n);

#if defined(__aarch64__)
__asm__(
	"	.text\n"
	"	.balign 64\n"
	"	.global spmu_measure\n"
	"	.type spmu_measure, %function\n"
	"spmu_measure:\n"
	"	isb\n"
	"	mrs	x3, pmccntr_el0\n"
	"	.global spmu_region_start\n"
	"spmu_region_start:\n"
	"	mrs	x2, pmxevcntr_el0\n"
	"	mov	x9, x0\n"
	"	.global spmu_loop\n"
	"spmu_loop:\n"
	"	subs	x9, x9, #1\n"
	"	b.ne	spmu_loop\n"
	"	.global spmu_loop_end\n"
	"spmu_loop_end:\n"
	"	.global spmu_region_end\n"
	"spmu_region_end:\n"
	"	mrs	x4, pmxevcntr_el0\n"
	"	mrs	x5, pmccntr_el0\n"
	"	sub	x0, x4, x2\n"
	"	sub	x5, x5, x3\n"
	"	str	x5, [x1]\n"
	"	ret\n"
	"	.size spmu_measure, . - spmu_measure\n"
	"	.global spmu_spin\n"
	"	.type spmu_spin, %function\n"
	"spmu_spin:\n"
	"1:	subs	x0, x0, #1\n"
	"	b.ne	1b\n"
	"	ret\n"
	"	.size spmu_spin, . - spmu_spin\n");
#endif

#endif /* SPMU_ARM64_LOOP_H */
