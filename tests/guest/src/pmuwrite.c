// SPDX-License-Identifier: GPL-2.0
/*
 * pmuwrite CPU: read-only user access, proven. On CPU, read the cycle
 * counter and the published event counter (must work), then try to write
 * PMCR_EL0, PMCNTENCLR_EL0, PMCCNTR_EL0, PMEVTYPER0_EL0, PMSWINC_EL0 and
 * PMEVCNTR0_EL0 (each must trap: PMUSERENR_EL0.EN and SW are never set). One line per access:
 * "op=NAME result=ok|sigill"; exit 0 if reads work and every write traps.
 */
#include "guestlib.h"
#include "counters.h"

#if defined(__aarch64__)
enum op {
	RD_CYCLES, RD_EVENT, WR_PMCR, WR_PMCNTENCLR, WR_PMCCNTR, WR_PMEVTYPER0,
	WR_PMSWINC, WR_PMEVCNTR0, NR_OPS
};

static const char * const names[NR_OPS] = {
	"read-cycles", "read-event", "write-pmcr", "write-pmcntenclr",
	"write-pmccntr", "write-pmevtyper0", "write-pmswinc", "write-pmevcntr0",
};

static volatile uint64_t sink;

/* Values written are what a no-op would be, were the write allowed. */
static void do_op(enum op op, int cyc, int ev)
{
	uint64_t zero = 0;

	switch (op) {
	case RD_CYCLES:
		sink = spmu_read_counter(cyc);
		break;
	case RD_EVENT:
		sink = spmu_read_counter(ev);
		break;
	case WR_PMCR:
		__asm__ __volatile__("msr pmcr_el0, %0\n\tisb" : : "r" ((uint64_t)0x41));
		break;
	case WR_PMCNTENCLR:
		__asm__ __volatile__("msr pmcntenclr_el0, %0\n\tisb" : : "r" (zero));
		break;
	case WR_PMCCNTR:
		__asm__ __volatile__("msr pmccntr_el0, %0\n\tisb" : : "r" (sink));
		break;
	case WR_PMEVTYPER0:
		__asm__ __volatile__("msr pmevtyper0_el0, %0\n\tisb" : : "r" (zero));
		break;
	case WR_PMSWINC:	/* PMUSERENR.SW would allow it */
		__asm__ __volatile__("msr pmswinc_el0, %0\n\tisb" : : "r" (zero));
		break;
	case WR_PMEVCNTR0:
		sink = spmu_read_counter(0);
		__asm__ __volatile__("msr pmevcntr0_el0, %0\n\tisb" : : "r" (sink));
		break;
	default:
		break;
	}
}
#endif

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	int cpu, cyc, ev;
	volatile int op, bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: pmuwrite CPU\n");
		return 2;
	}
	cpu = (int)spmu_arg(argv[1], "cpu");
	if (spmu_pin(cpu)) {
		perror("pmuwrite: pin");
		return 2;
	}
	cyc = spmu_published_index(cpu, 0);
	ev = spmu_published_index(cpu, 1);
	if (cyc < 0 || ev < 0) {
		printf("result=unpublished\n");
		return 2;
	}
	spmu_catch_sigill();
	for (op = 0; op < NR_OPS; op++) {
		int trapped = 0;

		if (sigsetjmp(spmu_trap, 1))
			trapped = 1;
		else
			do_op((enum op)op, cyc, ev);
		printf("op=%s result=%s\n", names[op], trapped ? "sigill" : "ok");
		/* Reads must work, writes must trap. */
		if (trapped != (op >= WR_PMCR))
			bad = 1;
	}
	return bad;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
