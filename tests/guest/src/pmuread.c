// SPDX-License-Identifier: GPL-2.0
/*
 * pmuread - check that user space can read the arm64 cycle counter.
 *
 *   pmuread CPU   pin to CPU, read PMCCNTR_EL0, do some work, read again
 *   pmuread all   the same on every CPU we may run on, one child per CPU
 *
 * One line per CPU on stdout, for the in-guest test suite to parse:
 *   cpu=N result=ok first=X second=Y          exit 0
 *   cpu=N result=sigill                       exit 1 (user access is off)
 *   cpu=N result=pin-failed                   exit 2 (reason on stderr)
 *   cpu=N result=not-increasing first=X second=Y  exit 3
 *   cpu=N result=unsupported-arch             exit 4 (not aarch64)
 *   cpu=N result=killed-by-signal-S           exit 5 (all mode only)
 * "all" exits with the highest status of its children.
 *
 * Build: aarch64-linux-gnu-gcc -O2 -Wall -Wextra -static -o pmuread pmuread.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guestlib.h"

enum {
	EXIT_OK = 0,
	EXIT_SIGILL = 1,
	EXIT_PIN = 2,
	EXIT_NOT_INCREASING = 3,
	EXIT_UNSUPPORTED_ARCH = 4,
	EXIT_CHILD_SIGNALED = 5,
};

#define BUSY_ITERATIONS 1000000UL

static int pin_to_cpu(int cpu)
{
	cpu_set_t set;

	if (cpu < 0 || cpu >= CPU_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

#if defined(__aarch64__)

static sigjmp_buf trap_env;

static void on_sigill(int sig)
{
	(void)sig;
	siglongjmp(trap_env, 1);
}

static inline uint64_t read_pmccntr(void)
{
	uint64_t v;

	/* isb: do not let the read move across the work being measured. */
	__asm__ __volatile__("isb\n\tmrs %0, pmccntr_el0" : "=r" (v) : : "memory");
	return v;
}

static void busy_work(void)
{
	volatile unsigned long acc = 0;
	unsigned long i;

	for (i = 0; i < BUSY_ITERATIONS; i++)
		acc += i;
}

static int read_counter(int cpu)
{
	struct sigaction sa;
	volatile uint64_t first = 0, second = 0;

	spmu_join();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigill;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGILL, &sa, NULL) != 0) {
		perror("pmuread: sigaction");
		return EXIT_SIGILL;
	}

	/* Save the signal mask: we leave the handler with SIGILL blocked. */
	if (sigsetjmp(trap_env, 1) != 0) {
		printf("cpu=%d result=sigill\n", cpu);
		return EXIT_SIGILL;
	}
	first = read_pmccntr();
	busy_work();
	second = read_pmccntr();

	if (second > first) {
		printf("cpu=%d result=ok first=%" PRIu64 " second=%" PRIu64 "\n",
		       cpu, (uint64_t)first, (uint64_t)second);
		return EXIT_OK;
	}
	printf("cpu=%d result=not-increasing first=%" PRIu64 " second=%" PRIu64 "\n",
	       cpu, (uint64_t)first, (uint64_t)second);
	return EXIT_NOT_INCREASING;
}

#else /* !__aarch64__ */

static int read_counter(int cpu)
{
	printf("cpu=%d result=unsupported-arch\n", cpu);
	return EXIT_UNSUPPORTED_ARCH;
}

#endif

/* Test one CPU in this process. Returns the exit status. */
static int test_cpu(int cpu)
{
	int ret;

	if (pin_to_cpu(cpu) != 0) {
		fprintf(stderr, "pmuread: cannot run on CPU %d: %s\n",
			cpu, strerror(errno));
		printf("cpu=%d result=pin-failed\n", cpu);
		ret = EXIT_PIN;
	} else {
		ret = read_counter(cpu);
	}
	fflush(stdout);
	return ret;
}

/* Test every CPU we may run on, each in its own child, one after another. */
static int test_all(void)
{
	cpu_set_t set;
	int cpu, ncpus, worst = EXIT_OK;

	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		/* Fall back to the first N online CPUs. */
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		CPU_ZERO(&set);
		for (cpu = 0; cpu < n && cpu < CPU_SETSIZE; cpu++)
			CPU_SET(cpu, &set);
	}
	ncpus = CPU_COUNT(&set);

	for (cpu = 0; cpu < CPU_SETSIZE && ncpus > 0; cpu++) {
		pid_t pid;
		int status, ret;

		if (!CPU_ISSET(cpu, &set))
			continue;
		ncpus--;

		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			perror("pmuread: fork");
			return EXIT_PIN;
		}
		if (pid == 0)
			_exit(test_cpu(cpu));

		if (waitpid(pid, &status, 0) < 0) {
			perror("pmuread: waitpid");
			return EXIT_PIN;
		}
		if (WIFEXITED(status)) {
			ret = WEXITSTATUS(status);
		} else {
			printf("cpu=%d result=killed-by-signal-%d\n", cpu,
			       WIFSIGNALED(status) ? WTERMSIG(status) : 0);
			ret = EXIT_CHILD_SIGNALED;
		}
		if (ret > worst)
			worst = ret;
	}
	fflush(stdout);
	return worst;
}

static void usage(void)
{
	fprintf(stderr, "usage: pmuread CPU|all\n");
}

int main(int argc, char **argv)
{
	char *end;
	long cpu;

	if (argc != 2) {
		usage();
		return EXIT_PIN;
	}
	if (strcmp(argv[1], "all") == 0)
		return test_all();

	errno = 0;
	cpu = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || cpu < 0 || cpu >= CPU_SETSIZE) {
		fprintf(stderr, "pmuread: bad CPU number '%s'\n", argv[1]);
		usage();
		return EXIT_PIN;
	}
	return test_cpu((int)cpu);
}
