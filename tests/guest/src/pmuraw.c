// SPDX-License-Identifier: GPL-2.0
/*
 * pmuraw CPU N: pinned to CPU, read PMEVCNTR0..N-1_EL0 and PMCCNTR_EL0 with
 * mrs, as a 2011-style raw reader would, whoever holds them. One line:
 *   0=V 1=V ... 31=V        (31: PMCCNTR_EL0; "sigill" for a read that trapped)
 * Exit 0, or 2 on bad arguments or a failed pin.
 */
#include "guestlib.h"
#include "counters.h"

#if defined(__aarch64__)
static int read_one(int n, uint64_t *v)
{
	if (sigsetjmp(spmu_trap, 1))
		return -1;
	*v = spmu_read_counter(n);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	int cpu, n, i;

	if (argc != 3) {
		fprintf(stderr, "usage: pmuraw CPU N\n");
		return 2;
	}
	cpu = (int)spmu_arg(argv[1], "CPU");
	n = (int)spmu_arg(argv[2], "N");
	if (n < 0 || n > 31) {
		fprintf(stderr, "pmuraw: N must be 0..31, not %d\n", n);
		return 2;
	}
	if (spmu_pin(cpu)) {
		perror("pmuraw: sched_setaffinity");
		return 2;
	}
#if defined(__aarch64__)
	spmu_catch_sigill();
	for (i = 0; i <= n; i++) {
		int idx = i == n ? 31 : i;
		uint64_t v;

		if (read_one(idx, &v))
			printf("%s%d=sigill", i ? " " : "", idx);
		else
			printf("%s%d=%llu", i ? " " : "", idx, (unsigned long long)v);
	}
	printf("\n");
	return 0;
#else
	(void)i;
	return spmu_unsupported_arch();
#endif
}
