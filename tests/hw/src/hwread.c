// SPDX-License-Identifier: GPL-2.0
/*
 * hwread CPU [SPIN]: on CPU, read core cycles, instructions retired and
 * reference cycles through cycles.h, spin SPIN iterations (default 1000000),
 * read again, and print one line:
 *   cpu=C gen=G0..G1 cycles=DC insns=DI ref=DR result=ok|stalled|generation
 * (deltas; ref is 0 where the CPU has no fixed counter 2). result=stalled:
 * cycles or instructions did not advance; result=generation: the CPU's
 * generation changed meanwhile (the deltas mean nothing). Exit 0 only for ok.
 */
#include "hwlib.h"

int main(int argc, char **argv)
{
	counter_t c0, c1, i0, i1, r0, r1;
	unsigned long g0, g1;
	volatile long spin = 1000000, k;
	int cpu;

	if (argc < 2) {
		fprintf(stderr, "usage: hwread CPU [SPIN]\n");
		return 2;
	}
	cpu = (int)hw_arg(argv[1], "cpu");
	if (argc > 2)
		spin = hw_arg(argv[2], "spin");
	hw_pin(cpu);
	hw_catch_sigsegv();
	hw_need_counters();
	g0 = cycles_generation();
	sync_core();
	c0 = unhalted_core();
	i0 = insn_retired();
	r0 = unhalted_ref();
	for (k = 0; k < spin; k++)
		;
	sync_core();
	c1 = unhalted_core();
	i1 = insn_retired();
	r1 = unhalted_ref();
	g1 = cycles_generation();
	printf("cpu=%d gen=%lu..%lu cycles=%llu insns=%llu ref=%llu result=%s\n", cpu, g0, g1,
	       c1 - c0, i1 - i0, r1 - r0,
	       g0 != g1 ? "generation" : (c1 > c0 && i1 > i0) ? "ok" : "stalled");
	return g0 == g1 && c1 > c0 && i1 > i0 ? 0 : 1;
}
