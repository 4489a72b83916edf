/* SPDX-License-Identifier: GPL-2.0 */
/* Small helpers shared by the in-guest test programs. */
#ifndef SPMU_GUESTLIB_H
#define SPMU_GUESTLIB_H

#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline int spmu_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static inline uint64_t spmu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline long spmu_arg(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || end == s) {
		fprintf(stderr, "bad %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

/* What every test program prints and returns on an architecture it does not test. */
static inline int spmu_unsupported_arch(void)
{
	printf("result=unsupported-arch\n");
	return 4;
}

#if defined(__aarch64__)
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The module's node and ioctl (drivers/arm64/pmu.h): let this thread in. */
#define SPMU_DEV "/dev/simple-pmu"
#define SPMU_IOC_JOIN _IO(0xB9, 0x01)

/*
 * Let the calling thread in, as cycles.h does lazily: 0, or -1 with errno
 * (no node, not allowed to open it). The fd is closed at once: an open one
 * would keep the module from unloading.
 */
static inline int spmu_join_now(void)
{
	int fd, ret;

	fd = open(SPMU_DEV, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = ioctl(fd, SPMU_IOC_JOIN);
	close(fd);
	return ret;
}

/* spmu_join_now(), unless SPMU_RAW is set: a raw 2011-style reader. */
static inline int spmu_join(void)
{
	if (getenv("SPMU_RAW"))
		return -1;
	return spmu_join_now();
}

static sigjmp_buf spmu_trap;

static void spmu_on_sigill(int sig)
{
	(void)sig;
	siglongjmp(spmu_trap, 1);
}

/* Catch SIGILL, and let this thread in (spmu_join()). */
static inline void spmu_catch_sigill(void)
{
	struct sigaction sa;

	spmu_join();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = spmu_on_sigill;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGILL, &sa, NULL);
}

/* PMCCNTR_EL0 into *v; 0 on success, -1 if the read trapped (SIGILL). */
static inline int spmu_try_pmccntr(uint64_t *v)
{
	if (sigsetjmp(spmu_trap, 1))
		return -1;
	__asm__ __volatile__("isb\n\tmrs %0, pmccntr_el0" : "=r" (*v) : : "memory");
	return 0;
}

#define SPMU_SYSFS "/sys/devices/system/simple-pmu/simple-pmu0"
#define SPMU_CYCLE_COUNTER 31

/* A sysfs attribute of the driver (path relative to SPMU_SYSFS) into buf. */
static inline int spmu_sysfs_read(const char *rel, char *buf, size_t size)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", SPMU_SYSFS, rel);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

/*
 * The published counter of CPU @cpu: slot 0 is cycle_index, slot k > 0 the
 * k-th entry of event_index. -2 if the driver does not say.
 */
static inline int spmu_published_index(int cpu, int slot)
{
	char rel[64], buf[512], *p = buf, *end;
	long v = -2;
	int i;

	snprintf(rel, sizeof(rel), "cpu%d/%s", cpu, slot ? "event_index" : "cycle_index");
	if (spmu_sysfs_read(rel, buf, sizeof(buf)))
		return -2;
	for (i = 0; i < (slot ? slot : 1); i++) {
		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno)
			return -2;
		p = end;
	}
	return (int)v;
}

static inline unsigned long long spmu_cpu_generation(int cpu)
{
	char rel[64], buf[64];

	snprintf(rel, sizeof(rel), "cpu%d/generation", cpu);
	if (spmu_sysfs_read(rel, buf, sizeof(buf)))
		return 0;
	return strtoull(buf, NULL, 10);
}
#endif

#endif /* SPMU_GUESTLIB_H */
