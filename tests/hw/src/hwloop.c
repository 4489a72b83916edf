// SPDX-License-Identifier: GPL-2.0
/*
 * hwloop measure CPU N RUNS: on CPU, RUNS times: instructions retired, core
 * cycles and TSC ticks around one call of hw_loop(N), one line a run:
 *   insns=I cycles=C tsc=T gen=same|changed
 * hwloop spin N: one call of hw_loop(N) and nothing else (for perf stat).
 *
 * hw_loop is written in assembly so that the compiler cannot change it; the
 * host derives its instruction counts from the built binary (objdump between
 * the global labels: HEAD before hw_loop_body, BODY per iteration, TAIL from
 * hw_loop_end), nothing here states them. What insn_retired() itself retires
 * between its two RDPMCs, plus the call, is the read overhead the test
 * bounds (pmubuild/hw/hwtest_steps.py, READ_OVERHEAD_MAX).
 */
#include "hwlib.h"

void hw_loop(unsigned long n);

__asm__(
	"	.text\n"
	"	.balign 64\n"
	"	.globl hw_loop\n"
	"	.type hw_loop, @function\n"
	"hw_loop:\n"
	"	mov	%rdi, %rax\n"
	"	.globl hw_loop_body\n"
	"hw_loop_body:\n"
	"	sub	$1, %rax\n"
	"	jnz	hw_loop_body\n"
	"	.globl hw_loop_end\n"
	"hw_loop_end:\n"
	"	ret\n"
	"	.size hw_loop, . - hw_loop\n");

#define MAX_RUNS 100

int main(int argc, char **argv)
{
	static counter_t insns[MAX_RUNS], cycles[MAX_RUNS];
	static unsigned long long tsc[MAX_RUNS];
	static int changed[MAX_RUNS];
	counter_t i0, i1, c0, c1;
	unsigned long long t0, t1;
	unsigned long g;
	long n, runs, r;

	if (argc == 3 && !strcmp(argv[1], "spin")) {
		n = hw_arg(argv[2], "iterations");
		if (n < 1)
			return 2;
		hw_loop((unsigned long)n);
		return 0;
	}
	if (argc != 5 || strcmp(argv[1], "measure")) {
		fprintf(stderr, "usage: hwloop measure CPU N RUNS | hwloop spin N\n");
		return 2;
	}
	hw_pin((int)hw_arg(argv[2], "cpu"));
	n = hw_arg(argv[3], "iterations");
	runs = hw_arg(argv[4], "runs");
	if (n < 1 || runs < 1 || runs > MAX_RUNS)
		return 2;
	hw_catch_sigsegv();
	hw_need_counters();
	/* Results are printed at the end: no output between the runs. */
	for (r = 0; r < runs; r++) {
		g = cycles_generation();
		sync_core();
		t0 = rdtsc();
		c0 = unhalted_core();
		i0 = insn_retired();
		hw_loop((unsigned long)n);
		i1 = insn_retired();
		c1 = unhalted_core();
		t1 = rdtsc();
		insns[r] = i1 - i0;
		cycles[r] = c1 - c0;
		tsc[r] = t1 - t0;
		changed[r] = cycles_generation() != g;
	}
	for (r = 0; r < runs; r++)
		printf("insns=%llu cycles=%llu tsc=%llu gen=%s\n", insns[r], cycles[r], tsc[r],
		       changed[r] ? "changed" : "same");
	return 0;
}
