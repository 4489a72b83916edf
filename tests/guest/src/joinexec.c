// SPDX-License-Identifier: GPL-2.0
/*
 * joinexec CMD [ARGS...]: let this thread in through /dev/simple-pmu
 * (SPMU_IOC_JOIN), check that a read works, then exec CMD: a let-in
 * thread is let in for its program only, so CMD must be asked again.
 * Exit 3 (with a line on stderr) when the join or the read fails.
 */
#include "guestlib.h"

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	uint64_t v;

	if (argc < 2) {
		fprintf(stderr, "usage: joinexec CMD [ARGS...]\n");
		return 2;
	}
	spmu_catch_sigill();
	if (spmu_join_now()) {
		perror("joinexec: join");
		return 3;
	}
	if (spmu_try_pmccntr(&v)) {
		fprintf(stderr, "joinexec: a read trapped after the join\n");
		return 3;
	}
	execvp(argv[1], argv + 1);
	perror("joinexec: exec");
	return 127;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
