// SPDX-License-Identifier: GPL-2.0
/*
 * pmuwin MODE CPU ...: windows measured through the counters the driver
 * publishes for CPU (cpuN/cycle_index, first entry of cpuN/event_index,
 * which the tests keep at INST_RETIRED), read directly with mrs.
 *
 *   pmuwin exact CPU RUNS    spmu_spin(1000) and spmu_spin(101000), RUNS
 *                            windows each: "n=N insns=I cycles=C gen=same|changed"
 *   pmuwin syscall CPU RUNS  the same loop without and with a getppid()
 *                            system call inside the window (two user
 *                            instructions more): "plain=I syscall=J"
 *   pmuwin sleep CPU MS      a window holding nanosleep(MS):
 *                            "cycles=C insns=I"
 * Exit 1 if a counter read traps (SIGILL), 2 for bad arguments or no
 * published counter.
 */
#include "guestlib.h"
#include "arm64_loop.h"
#include "counters.h"

#if defined(__aarch64__)
/*
 * spmu_spin_sc(n, sc): getppid() first if sc, then n iterations of the
 * two-instruction loop. The two paths differ by exactly two EL0
 * instructions (mov, svc); anything more is the kernel's.
 */
void spmu_spin_sc(uint64_t n, uint64_t sc);
__asm__(
	"	.text\n"
	"	.global spmu_spin_sc\n"
	"	.type spmu_spin_sc, %function\n"
	"spmu_spin_sc:\n"
	"	mov	x9, x0\n"	/* the syscall returns in x0 */
	"	cbz	x1, 1f\n"
	"	mov	x8, #173\n"	/* __NR_getppid */
	"	svc	#0\n"
	"1:	subs	x9, x9, #1\n"
	"	b.ne	1b\n"
	"	ret\n"
	"	.size spmu_spin_sc, . - spmu_spin_sc\n");

static int cyc_idx, ins_idx;

static uint64_t window(uint64_t n, uint64_t sc, uint64_t *cycles)
{
	uint64_t c0, i0, i1, c1;

	c0 = spmu_read_counter(cyc_idx);
	i0 = spmu_read_counter(ins_idx);
	spmu_spin_sc(n, sc);
	i1 = spmu_read_counter(ins_idx);
	c1 = spmu_read_counter(cyc_idx);
	*cycles = c1 - c0;
	return i1 - i0;
}

static int run(const char *mode, int cpu, long arg)
{
	uint64_t cycles, insns, plain, sc;
	unsigned long long gen;
	static const uint64_t ns[] = { 1000, 101000 };
	struct timespec ts;
	long i, k;

	if (!strcmp(mode, "exact")) {
		for (k = 0; k < 2; k++) {
			for (i = 0; i < arg; i++) {
				gen = spmu_cpu_generation(cpu);
				insns = window(ns[k], 0, &cycles);
				printf("n=%llu insns=%llu cycles=%llu gen=%s\n",
				       (unsigned long long)ns[k], (unsigned long long)insns,
				       (unsigned long long)cycles,
				       gen == spmu_cpu_generation(cpu) ? "same" : "changed");
			}
		}
		return 0;
	}
	if (!strcmp(mode, "syscall")) {
		for (i = 0; i < arg; i++) {
			plain = window(1000, 0, &cycles);
			sc = window(1000, 1, &cycles);
			printf("plain=%llu syscall=%llu\n", (unsigned long long)plain,
			       (unsigned long long)sc);
		}
		return 0;
	}
	if (!strcmp(mode, "sleep")) {
		uint64_t c0 = spmu_read_counter(cyc_idx), i0 = spmu_read_counter(ins_idx);

		ts.tv_sec = arg / 1000;
		ts.tv_nsec = (arg % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		insns = spmu_read_counter(ins_idx) - i0;
		cycles = spmu_read_counter(cyc_idx) - c0;
		printf("cycles=%llu insns=%llu\n", (unsigned long long)cycles,
		       (unsigned long long)insns);
		return 0;
	}
	fprintf(stderr, "pmuwin: unknown mode %s\n", mode);
	return 2;
}
#endif

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	int cpu;

	if (argc != 4) {
		fprintf(stderr, "usage: pmuwin exact|syscall|sleep CPU ARG\n");
		return 2;
	}
	cpu = (int)spmu_arg(argv[2], "cpu");
	if (spmu_pin(cpu)) {
		perror("pmuwin: pin");
		return 2;
	}
	cyc_idx = spmu_published_index(cpu, 0);
	ins_idx = spmu_published_index(cpu, 1);
	if (cyc_idx < 0 || ins_idx < 0) {
		printf("result=unpublished cycle_index=%d event_index=%d\n", cyc_idx, ins_idx);
		return 2;
	}
	spmu_catch_sigill();
	if (sigsetjmp(spmu_trap, 1)) {
		printf("result=sigill\n");
		return 1;
	}
	return run(argv[1], cpu, spmu_arg(argv[3], "argument"));
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
