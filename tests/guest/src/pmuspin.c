// SPDX-License-Identifier: GPL-2.0
/*
 * pmuspin CPU MS: read PMCCNTR_EL0 from EL0 on CPU for MS milliseconds (or
 * until SIGTERM), catching SIGILL; prints "ok=A sigill=B". A reader that
 * lives through module loads and unloads.
 */
#include "guestlib.h"

#if defined(__aarch64__)
static volatile sig_atomic_t stop;

static void on_sigterm(int sig)
{
	(void)sig;
	stop = 1;
}
#endif

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	unsigned long ok = 0, trapped = 0;
	uint64_t end, v;

	if (argc != 3) {
		fprintf(stderr, "usage: pmuspin CPU MS\n");
		return 2;
	}
	if (spmu_pin((int)spmu_arg(argv[1], "cpu"))) {
		perror("pmuspin: pin");
		return 2;
	}
	end = spmu_now_ns() + (uint64_t)spmu_arg(argv[2], "ms") * 1000000ull;
	spmu_catch_sigill();
	signal(SIGTERM, on_sigterm);
	while (!stop && spmu_now_ns() < end) {
		if (spmu_try_pmccntr(&v))
			trapped++;
		else
			ok++;
	}
	printf("ok=%lu sigill=%lu\n", ok, trapped);
	return 0;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
