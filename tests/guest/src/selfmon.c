// SPDX-License-Identifier: GPL-2.0
/*
 * include/cycles.h's default path in the guest: perf self-monitoring of the
 * calling thread, without the module.
 *
 *   selfmon path          the path this thread reads from, and why not
 *                         another: "path=N name=... perfmon=P reason=...
 *                         note=..." (cycles_unavailable_reason(),
 *                         cycles_path_note())
 *   selfmon exact N R     R windows around spmu_spin(N): one instruction
 *                         count per line (an invalid window is measured
 *                         again, at most 100 times; each retry is counted
 *                         on stderr)
 *   selfmon threads N1 N2 two threads at once, each measuring spmu_spin()
 *                         of its own length in its own windows:
 *                         "t1=C1 t2=C2" (the smallest of 5 windows each)
 *   selfmon fork N        the parent reads once, then a forked child
 *                         measures spmu_spin(N) on its own events:
 *                         "child=C path=P"
 *   selfmon plain N       the 2011 names: insn_retired() around
 *                         spmu_spin(N), no window: one count
 *   selfmon revoke N S C  pinned to CPU C: windows around spmu_spin(N) and
 *                         single reads for S seconds, while root turns
 *                         perf_user_access off and on from another CPU:
 *                         "valid=V invalid=I faulted=F exact=E wrong=W"
 *                         (W: valid windows counting below 2N or more than
 *                         2N + 10^6: a read that faulted and yielded 0 would
 *                         give the thread's whole count or a wrapped one)
 *
 * Exit 1 with a FAIL line when a reading is not on the perf user-read path.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cycles.h"
#include "arm64_loop.h"

#define RETRIES	100

#if defined(__aarch64__)

static int need_perf_path(void)
{
	if (cycles_path() == CYCLES_PATH_PERF_MMAP)
		return 0;
	printf("FAIL: path %s, not perf user reads: %s\n",
	       cycles_path_name(cycles_path()),
	       cycles_unavailable_reason() ? cycles_unavailable_reason() :
	       "(no reason)");
	return -1;
}

/* Instructions of spmu_spin(n) in one valid window; 0 if none in RETRIES. */
static counter_t window_count(unsigned long n, unsigned int *retries)
{
	struct cycles_window w;
	counter_t a, b;
	int i;

	for (i = 0; i < RETRIES; i++) {
		if (cycles_window_begin(&w) < 0)
			continue;
		a = cycles_window_read(&w, CYCLES_INSN);
		spmu_spin(n);
		b = cycles_window_read(&w, CYCLES_INSN);
		if (cycles_window_end(&w) & CYCLES_EXACT)
			return cycles_window_delta(&w, CYCLES_INSN, a, b);
		(*retries)++;
	}
	return 0;
}

struct job {
	unsigned long n;
	counter_t best;
	int path;
};

static void *measure(void *arg)
{
	struct job *job = arg;
	unsigned int retries = 0;
	counter_t c;
	int i;

	job->path = cycles_path();	/* this thread's own setup */
	job->best = 0;
	for (i = 0; i < 5; i++) {
		c = window_count(job->n, &retries);
		if (c && (!job->best || c < job->best))
			job->best = c;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned int retries = 0;
	unsigned long n;
	const char *why;
	counter_t a, b;
	int i, runs, status;
	pid_t pid;

	if (argc >= 2 && !strcmp(argv[1], "path")) {
		why = cycles_unavailable_reason();
		printf("path=%d name=%s perfmon=%d reason=%s", cycles_path(),
		       cycles_path_name(cycles_path()), perfmon_available(),
		       why ? why : "none");
		why = cycles_path_note();
		printf(" note=%s\n", why ? why : "none");
		return 0;
	}
	if (argc < 3)
		return 2;
	n = strtoul(argv[2], NULL, 0);
	if (need_perf_path() < 0)
		return 1;
	if (!strcmp(argv[1], "exact") && argc == 4) {
		runs = atoi(argv[3]);
		for (i = 0; i < runs; i++) {
			a = window_count(n, &retries);
			if (!a) {
				printf("FAIL: no valid window in %d\n", RETRIES);
				return 1;
			}
			printf("%llu\n", a);
		}
		if (retries)
			fprintf(stderr, "%u windows invalid, measured again\n",
				retries);
		return 0;
	}
	if (!strcmp(argv[1], "plain")) {
		sync_core();
		a = insn_retired();
		spmu_spin(n);
		b = insn_retired();
		printf("%llu\n", b - a);
		return 0;
	}
	if (!strcmp(argv[1], "threads") && argc == 4) {
		struct job j1 = { n, 0, 0 }, j2 = { strtoul(argv[3], NULL, 0), 0, 0 };
		pthread_t t1, t2;

		if (pthread_create(&t1, NULL, measure, &j1) ||
		    pthread_create(&t2, NULL, measure, &j2))
			return 1;
		pthread_join(t1, NULL);
		pthread_join(t2, NULL);
		if (j1.path != CYCLES_PATH_PERF_MMAP ||
		    j2.path != CYCLES_PATH_PERF_MMAP) {
			printf("FAIL: thread paths %d %d\n", j1.path, j2.path);
			return 1;
		}
		printf("t1=%llu t2=%llu\n", j1.best, j2.best);
		return 0;
	}
	if (!strcmp(argv[1], "revoke") && argc == 5) {
		unsigned long valid = 0, invalid = 0, faulted = 0, exact = 0;
		unsigned long wrong = 0, k;
		struct cycles_reading r;
		struct cycles_window w;
		time_t end = time(NULL) + atoi(argv[3]);
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(atoi(argv[4]), &one);
		if (sched_setaffinity(0, sizeof(one), &one) < 0) {
			printf("FAIL: cannot pin to CPU %s\n", argv[4]);
			return 1;
		}

		for (k = 0; time(NULL) < end; k++) {
			if (cycles_window_begin(&w) == 0) {
				a = cycles_window_read(&w, CYCLES_INSN);
				spmu_spin(n);
				b = cycles_window_read(&w, CYCLES_INSN);
				if (cycles_window_end(&w) & CYCLES_VALID) {
					wrong += b - a < 2 * n ||
						 b - a > 2 * n + 1000000;
					valid++;
				} else {
					invalid++;
				}
			} else {
				invalid++;
			}
			if (cycles_read(CYCLES_INSN, &r) == 0 &&
			    (r.flags & CYCLES_EXACT))
				exact++;
			if (r.flags & CYCLES_FAULTED)
				faulted++;
			if (k % 64 == 0)
				usleep(1000);	/* let root's writes in */
		}
		printf("valid=%lu invalid=%lu faulted=%lu exact=%lu wrong=%lu\n",
		       valid, invalid, faulted, exact, wrong);
		return 0;
	}
	if (!strcmp(argv[1], "fork")) {
		(void)insn_retired();	/* the parent's events exist */
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			a = window_count(n, &retries);
			printf("child=%llu path=%d\n", a, cycles_path());
			return a ? 0 : 1;
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("FAIL: child status %#x\n", status);
			return 1;
		}
		return 0;
	}
	return 2;
}
#else
/* The known loop is arm64's (arm64_loop.h); amd64 guests have no PMU. */
int main(void)
{
	puts("selfmon: arm64 only");
	return 77;
}
#endif
