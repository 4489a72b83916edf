// SPDX-License-Identifier: GPL-2.0
/*
 * pmuloop IDX N [RUNS]: on CPU 0, select event counter IDX (PMSELR_EL0, allowed
 * at EL0 with PMUSERENR.ER) and measure spmu_measure's loop of N iterations
 * RUNS times (default 3). One line per run: "insns=I cycles=C".
 */
#include "guestlib.h"
#include "arm64_loop.h"

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	long idx, n, i;
	volatile long runs = 3;

	if (argc < 3) {
		fprintf(stderr, "usage: pmuloop IDX N [RUNS]\n");
		return 2;
	}
	idx = spmu_arg(argv[1], "counter index");
	n = spmu_arg(argv[2], "iterations");
	if (argc > 3)
		runs = spmu_arg(argv[3], "runs");
	if (n < 1 || idx < 0 || idx > 30) {
		fprintf(stderr, "out of range\n");
		return 2;
	}
	if (spmu_pin(0)) {
		perror("pmuloop: pin");
		return 2;
	}
	spmu_catch_sigill();
	if (sigsetjmp(spmu_trap, 1)) {
		printf("result=sigill\n");
		return 1;
	}
	__asm__ __volatile__("msr pmselr_el0, %0\n\tisb" : : "r" ((uint64_t)idx));
	for (i = 0; i < runs; i++) {
		uint64_t cycles = 0, insns = spmu_measure((uint64_t)n, &cycles);

		printf("insns=%llu cycles=%llu\n", (unsigned long long)insns,
		       (unsigned long long)cycles);
	}
	return 0;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
