/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the hardware test's programs (invoke test-hw, pmubuild/hw/hwtest.py):
 * argument parsing, pinning to a given CPU, and a SIGSEGV handler that turns a
 * faulting RDPMC into the line "result=sigsegv" and exit status 3.
 */
#ifndef HWLIB_H
#define HWLIB_H

#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The module's counters, read as in 2011 (these programs catch faults). */
#define CYCLES_SCOPE_CPU 1
#define CYCLES_2011_READS 1
#include "cycles.h"

static inline long hw_arg(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || end == s) {
		fprintf(stderr, "bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

/* Run on @cpu only; exit 2 if that is not possible. */
static inline void hw_pin(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0 || sched_getcpu() != cpu) {
		fprintf(stderr, "cannot run on CPU %d: %s\n", cpu, strerror(errno));
		exit(2);
	}
}

static void hw_on_sigsegv(int sig)
{
	static const char msg[] = "result=sigsegv\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(4);
	_exit(3);
}

/* A counter read that faults (user RDPMC off) ends the program with result=sigsegv. */
static inline void hw_catch_sigsegv(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGSEGV, hw_on_sigsegv);
}

/* perfmon_available() or the line "result=unavailable" and exit 1. */
static inline void hw_need_counters(void)
{
	if (perfmon_available() <= 0) {
		printf("result=unavailable\n");
		exit(1);
	}
}

#endif /* HWLIB_H */
