// SPDX-License-Identifier: GPL-2.0
/*
 * advreader CPU thread|cpu N WINDOWS PAIRS: on CPU (pinned), include/cycles.h's window API
 * under attack (tests/guest/arm64/46-adversarial.sh runs perfchurn beside
 * it). "thread": the default path, perf self-monitoring; "cpu":
 * cycles_set_scope(CYCLES_SCOPE_CPU_ID), the module. WINDOWS windows of
 * PAIRS pairs of reads around spmu_spin(N): 2 * PAIRS * WINDOWS reads.
 * Every pair in a window that cycles_window_end() calls valid and exact
 * must count the same, between 2N and 2N + 64 instructions; invalid
 * windows are counted and discarded, and so are valid windows it does not
 * call exact (advisory: the module path before Linux 5.17). Prints
 *   "path=P windows=W reads=R valid=V flagged=F advisory=A count=C"
 * and exits 0; "FAIL: ..." and 1 on a valid window with another count;
 * "SKIP: ..." and 3 when this thread cannot have the asked path.
 * ADV_IGNORE_VALIDITY=1 in the environment takes every window as valid
 * (to show that the check fails when the reader ignores validity).
 * ADV_AT_LEAST=1 (47-perf-own-tests.sh): a valid pair must count at least
 * 2N; pairs above 2N + 63 are counted ("over=") instead of failing. For
 * counts that may rightly hold more than this thread's loop: the module's
 * CPU-wide counters while other programs share the CPU (a window the reader
 * was preempted in counts theirs too), and any path while another vCPU is
 * online (under -icount QEMU's instruction count is global).
 */
#include "guestlib.h"

#include "cycles.h"
#include "arm64_loop.h"

#if defined(__aarch64__)
#define MAX_PAIRS 512

int main(int argc, char **argv)
{
	static counter_t delta[MAX_PAIRS];
	unsigned long n, windows, pairs, i, j, valid = 0, flagged = 0, over = 0, advisory = 0;
	counter_t want = 0, a, b;
	struct cycles_window w;
	int cpu, path, ignore, at_least;

	if (argc != 6 || (strcmp(argv[2], "thread") && strcmp(argv[2], "cpu"))) {
		fprintf(stderr, "usage: advreader CPU thread|cpu N WINDOWS PAIRS\n");
		return 2;
	}
	if (spmu_pin((int)spmu_arg(argv[1], "cpu"))) {
		printf("FAIL: cannot pin to cpu %s\n", argv[1]);
		return 1;
	}
	argv++;
	cpu = !strcmp(argv[1], "cpu");
	n = (unsigned long)spmu_arg(argv[2], "n");
	windows = (unsigned long)spmu_arg(argv[3], "windows");
	pairs = (unsigned long)spmu_arg(argv[4], "pairs");
	if (pairs < 1 || pairs > MAX_PAIRS || n < 1) {
		fprintf(stderr, "advreader: PAIRS 1..%d, N >= 1\n", MAX_PAIRS);
		return 2;
	}
	ignore = getenv("ADV_IGNORE_VALIDITY") != NULL;
	at_least = getenv("ADV_AT_LEAST") != NULL;
	path = cycles_set_scope(cpu ? CYCLES_SCOPE_CPU_ID : CYCLES_SCOPE_THREAD_ID);
	if (path != (cpu ? CYCLES_PATH_MODULE : CYCLES_PATH_PERF_MMAP)) {
		const char *why = cycles_unavailable_reason();
		const char *note = cycles_path_note();

		printf("SKIP: %s scope is on path %s, not %s: %s; %s\n", argv[1],
		       cycles_path_name(path),
		       cpu ? "the module" : "perf user reads",
		       why ? why : "(no reason)", note ? note : "(no note)");
		return 3;
	}
	for (i = 0; i < windows; i++) {
		unsigned int end;
		int ok;

		if (cycles_window_begin(&w) < 0) {
			flagged++;
			continue;
		}
		for (j = 0; j < pairs; j++) {
			a = cycles_window_read(&w, CYCLES_INSN);
			spmu_spin(n);
			b = cycles_window_read(&w, CYCLES_INSN);
			delta[j] = cycles_window_delta(&w, CYCLES_INSN, a, b);
		}
		end = cycles_window_end(&w);
		ok = end & CYCLES_VALID;
		if (!ok && !ignore) {
			flagged++;
			continue;
		}
		/*
		 * Valid but not exact: the module path where a move shows only at
		 * the driver's next check (arm64 before 5.17). Advisory by
		 * contract, so counted, not held to the loop.
		 */
		if (!(end & CYCLES_EXACT) && !ignore) {
			advisory++;
			continue;
		}
		valid++;
		for (j = 0; j < pairs; j++) {
			if (at_least && delta[j] >= 2 * n) {
				if (delta[j] >= 2 * n + 64)
					over++;
				else if (!want || delta[j] < want)
					want = delta[j];
				continue;
			}
			if (!want)
				want = delta[j];
			if (delta[j] == want && want >= 2 * n && want < 2 * n + 64)
				continue;
			printf("FAIL: %s path %s: window %lu pair %lu reported valid counts %llu instructions of spmu_spin(%lu); other pairs %llu (expected 2n..2n+63)\n",
			       argv[1], cycles_path_name(path), i, j,
			       (unsigned long long)delta[j], n,
			       (unsigned long long)want);
			return 1;
		}
	}
	if (!valid && !advisory) {
		printf("FAIL: %s path %s: no valid window in %lu\n", argv[1],
		       cycles_path_name(path), windows);
		return 1;
	}
	printf("path=%s windows=%lu reads=%lu valid=%lu flagged=%lu advisory=%lu count=%llu",
	       cycles_path_name(path), windows, 2 * pairs * windows, valid,
	       flagged, advisory, (unsigned long long)want);
	if (at_least)
		printf(" over=%lu", over);
	printf("\n");
	return 0;
}
#else
/* The known loop is arm64's (arm64_loop.h); amd64 guests have no PMU. */
int main(void)
{
	puts("advreader: arm64 only");
	return 77;
}
#endif
