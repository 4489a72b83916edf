// SPDX-License-Identifier: GPL-2.0
/*
 * perfcycles CPU N: on CPU, count user-space cycles with perf_event_open around
 * spmu_spin(N), close the event, then time how long until EL0 reads of
 * PMCCNTR_EL0 work again on that CPU and the counter runs (perf leaves it
 * disabled, or user access revoked from 5.17): the driver's recovery.
 * Prints "perf_cycles=C recovered_ms=R" (R=-1: not within 10 s).
 */
#include "guestlib.h"
#include "arm64_loop.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__aarch64__)
/* A read that does not trap, and a second one after some work that is larger. */
static int counter_runs(void)
{
	uint64_t a, b;

	if (spmu_try_pmccntr(&a))
		return 0;
	spmu_spin(1000);
	if (spmu_try_pmccntr(&b))
		return 0;
	return b > a;
}
#endif

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	struct perf_event_attr attr;
	long cpu, n;
	uint64_t count = 0, start;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: perfcycles CPU N\n");
		return 2;
	}
	cpu = spmu_arg(argv[1], "cpu");
	n = spmu_arg(argv[2], "iterations");
	if (spmu_pin((int)cpu)) {
		perror("perfcycles: pin");
		return 2;
	}
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd < 0) {
		perror("perfcycles: perf_event_open");
		return 2;
	}
	ioctl(fd, PERF_EVENT_IOC_RESET, 0);
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	spmu_spin((uint64_t)n);
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	if (read(fd, &count, sizeof(count)) != sizeof(count)) {
		perror("perfcycles: read");
		return 2;
	}
	close(fd);

	spmu_catch_sigill();
	start = spmu_now_ns();
	while (!counter_runs()) {
		if (spmu_now_ns() - start > 10000000000ull) {
			printf("perf_cycles=%llu recovered_ms=-1\n", (unsigned long long)count);
			return 1;
		}
	}
	printf("perf_cycles=%llu recovered_ms=%llu\n", (unsigned long long)count,
	       (unsigned long long)((spmu_now_ns() - start) / 1000000));
	return 0;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
