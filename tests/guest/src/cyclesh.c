// SPDX-License-Identifier: GPL-2.0
/*
 * include/cycles.h in the guest, through its 2011 API only.
 *   cyclesh absent  perfmon_available() is 0 and nothing faults (module not loaded)
 *   cyclesh exact   counts of a 2-instruction loop: insn_retired() deltas for n1 and n2
 *                   differ by exactly 2 * (n2 - n1), the same on every run (one run may
 *                   be disturbed upwards, see 32-exact-counts); cycles and timer advance
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

/* The value all runs but at most one (a larger one) share; 0 if there is none. */
static counter_t settled(const counter_t *v, int n)
{
	counter_t low = v[0];
	int i, other = 0;

	for (i = 1; i < n; i++)
		if (v[i] < low)
			low = v[i];
	for (i = 0; i < n; i++)
		other += v[i] != low;
	return other <= 1 ? low : 0;
}

int main(int argc, char **argv)
{
	cpu_set_t saved;
	counter_t c0, c1, t0, t1, small, large;
	counter_t s_runs[RUNS + 1], l_runs[RUNS + 1];
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
		s_runs[i] = loop_insns(1000);
		l_runs[i] = loop_insns(101000);
	}
	/* Run 0 warms up (page faults, cold paths); as in 32-exact-counts, at most one
	 * later run may be disturbed, and only upwards. */
	small = settled(s_runs + 1, RUNS);
	large = settled(l_runs + 1, RUNS);
	if (!small || !large) {
		printf("FAIL: counts differ between runs:");
		for (i = 1; i < RUNS + 1; i++)
			printf(" %llu/%llu", s_runs[i], l_runs[i]);
		printf("\n");
		return 1;
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
	printf("perfmon_available() = %d; loop(1000) = %llu, loop(101000) = %llu "
	       "instructions on every (undisturbed) run (2 per iteration); "
	       "%llu cycles, %llu timer ticks for 100000\n",
	       version, small, large, c1 - c0, t1 - t0);
	return 0;
}
