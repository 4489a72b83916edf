// SPDX-License-Identifier: GPL-2.0
/*
 * pmuloop CPU IDX N [RUNS [GAP_MS]]: on CPU, select event counter IDX once
 * (PMSELR_EL0, which EL0 may write with PMUSERENR.ER) and measure
 * spmu_measure's loop of N iterations RUNS times (default 3), busy for
 * GAP_MS milliseconds between runs (default 0): a driver that used PMSELR
 * itself in between would change what PMXEVCNTR_EL0 reads. One line per
 * run: "insns=I cycles=C" (cycles: PMCCNTR_EL0), then "pmselr=S", the
 * selection as read back at the end.
 */
#include "guestlib.h"
#include "arm64_loop.h"

#define MAX_RUNS 1000

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	static uint64_t insns[MAX_RUNS], cycles[MAX_RUNS];
	long cpu, idx, n, i;
	volatile long runs = 3, gap_ms = 0;
	uint64_t until;

	if (argc < 4) {
		fprintf(stderr, "usage: pmuloop CPU IDX N [RUNS [GAP_MS]]\n");
		return 2;
	}
	cpu = spmu_arg(argv[1], "cpu");
	idx = spmu_arg(argv[2], "counter index");
	n = spmu_arg(argv[3], "iterations");
	if (argc > 4)
		runs = spmu_arg(argv[4], "runs");
	if (argc > 5)
		gap_ms = spmu_arg(argv[5], "gap");
	if (n < 1 || idx < 0 || idx > 30 || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "out of range\n");
		return 2;
	}
	if (spmu_pin((int)cpu)) {
		perror("pmuloop: pin");
		return 2;
	}
	spmu_catch_sigill();
	if (sigsetjmp(spmu_trap, 1)) {
		printf("result=sigill\n");
		return 1;
	}
	__asm__ __volatile__("msr pmselr_el0, %0\n\tisb" : : "r" ((uint64_t)idx));
	/*
	 * Results are printed at the end: a reader of our output woken in
	 * the middle of a run would have its instructions counted (on this
	 * CPU directly, on the other one through QEMU's global count).
	 */
	for (i = 0; i < runs && i < MAX_RUNS; i++) {
		insns[i] = spmu_measure((uint64_t)n, &cycles[i]);
		until = spmu_now_ns() + (uint64_t)gap_ms * 1000000ull;
		while (spmu_now_ns() < until)
			;
	}
	for (i = 0; i < runs && i < MAX_RUNS; i++)
		printf("insns=%llu cycles=%llu\n", (unsigned long long)insns[i],
		       (unsigned long long)cycles[i]);
	{
		uint64_t sel;

		__asm__ __volatile__("mrs %0, pmselr_el0" : "=r" (sel));
		printf("pmselr=%llu\n", (unsigned long long)sel);
	}
	return 0;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
