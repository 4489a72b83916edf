// SPDX-License-Identifier: GPL-2.0
/*
 * pmuspin CPU MS: read PMCCNTR_EL0 from EL0 on CPU for MS milliseconds (or
 * until SIGTERM), catching SIGILL; prints "ok=A sigill=B". A reader that
 * lives through module loads and unloads: after a trap it lets itself in
 * again (at most every 10 ms, as a library would: each try opens the
 * node, which holds the module for that moment).
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
	uint64_t end, v, joined;

	if (argc != 3) {
		fprintf(stderr, "usage: pmuspin CPU MS\n");
		return 2;
	}
	/* First: a SIGTERM from a test that saw it start must find the handler. */
	signal(SIGTERM, on_sigterm);
	if (spmu_pin((int)spmu_arg(argv[1], "cpu"))) {
		perror("pmuspin: pin");
		return 2;
	}
	end = spmu_now_ns() + (uint64_t)spmu_arg(argv[2], "ms") * 1000000ull;
	spmu_catch_sigill();
	joined = spmu_now_ns();
	while (!stop && spmu_now_ns() < end) {
		if (!spmu_try_pmccntr(&v)) {
			ok++;
			continue;
		}
		trapped++;
		if (spmu_now_ns() - joined > 10000000ull) {
			spmu_join();
			joined = spmu_now_ns();
		}
	}
	printf("ok=%lu sigill=%lu\n", ok, trapped);
	return 0;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
