// SPDX-License-Identifier: GPL-2.0
/*
 * include/cycles.h in the guest, through its 2011 API only.
 *   cyclesh absent  perfmon_available() is 0 and nothing faults (module not loaded)
 *   cyclesh exact   counts of a 2-instruction loop: insn_retired() deltas for n1 and n2
 *                   differ by exactly 2 * (n2 - n1), the same on every run; cycles and
 *                   the timer advance
 */
#define _GNU_SOURCE 1
#include <stdio.h>
#include <string.h>
#include "cycles.h"

#define RUNS 10

static counter_t loop_insns(unsigned long n)
{
	counter_t a, b;

	sync_core();
	a = insn_retired();
#ifdef __aarch64__
	asm volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
	asm volatile("1: sub $1, %0\n\tjnz 1b" : "+r"(n) : : "cc");
#endif
	b = insn_retired();
	sync_core();
	return b - a;
}

int main(int argc, char **argv)
{
	cpu_set_t saved;
	counter_t c0, c1, t0, t1, small = 0, large = 0;
	int i, version;

	if (argc != 2)
		return 2;
	version = perfmon_available();
	if (!strcmp(argv[1], "absent")) {
		printf("perfmon_available() = %d\n", version);
		return version == 0 ? 0 : 1;
	}
	if (version <= 0) {
		printf("FAIL: perfmon_available() = %d with the module loaded\n", version);
		return 1;
	}
	pin_cpu(&saved);
	for (i = 0; i < RUNS + 1; i++) {
		counter_t s = loop_insns(1000), l = loop_insns(101000);

		if (i == 0)
			continue; /* first pass: page faults and cold paths */
		if ((small && s != small) || (large && l != large)) {
			printf("FAIL: run %d: %llu/%llu, earlier %llu/%llu\n", i, s, l, small, large);
			return 1;
		}
		small = s;
		large = l;
	}
	c0 = unhalted_core();
	t0 = rdtsc();
	loop_insns(100000);
	c1 = unhalted_core();
	t1 = rdtscp();
	unpin_cpu(&saved);
	if (large - small != 2 * 100000 || c1 <= c0 || t1 <= t0) {
		printf("FAIL: insns %llu - %llu, cycles %llu -> %llu, timer %llu -> %llu\n",
		       large, small, c0, c1, t0, t1);
		return 1;
	}
	printf("perfmon_available() = %d; loop(1000) = %llu, loop(101000) = %llu instructions "
	       "on every run (2 per iteration); %llu cycles, %llu timer ticks for 100000\n",
	       version, small, large, c1 - c0, t1 - t0);
	return 0;
}
