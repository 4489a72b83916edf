// SPDX-License-Identifier: GPL-2.0
/*
 * perfchurn CPU: another perf user on CPU (pinned to it), until SIGTERM. In a loop it opens
 * a per-task event on itself (pid 0, cpu -1: instructions, then cycles),
 * enables it, reads it and closes it; every 8th round it also opens pinned
 * CPU-wide events (pid -1, cpu CPU: cycles and instructions, needs root),
 * enables and closes them. After the first round it prints "started";
 * on SIGTERM it prints
 *   "rounds=R task=T pinned=P"
 * (events opened and read) and exits 0; any refused open is a failure (2).
 */
#include "guestlib.h"

#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int open_event(unsigned long long config, int pid, int cpu, int pinned)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = config;
	attr.pinned = pinned;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &attr, pid, cpu, -1, 0);
}

/* Open, enable, read, close: 0, or -1 with the reason printed. */
static int churn_one(unsigned long long config, int pid, int cpu, int pinned)
{
	unsigned long long v;
	int fd = open_event(config, pid, cpu, pinned);

	if (fd < 0) {
		fprintf(stderr, "perfchurn: perf_event_open(pid %d, cpu %d, pinned %d): %s\n",
			pid, cpu, pinned, strerror(errno));
		return -1;
	}
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) ||
	    read(fd, &v, sizeof(v)) != sizeof(v)) {
		fprintf(stderr, "perfchurn: enable/read: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long rounds = 0, task = 0, pinned = 0;
	struct sigaction sa;
	int cpu;

	if (argc != 2) {
		fprintf(stderr, "usage: perfchurn CPU\n");
		return 2;
	}
	cpu = (int)spmu_arg(argv[1], "cpu");
	if (spmu_pin(cpu)) {
		fprintf(stderr, "perfchurn: cannot pin to cpu %d\n", cpu);
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		if (churn_one(PERF_COUNT_HW_INSTRUCTIONS, 0, -1, 0) ||
		    churn_one(PERF_COUNT_HW_CPU_CYCLES, 0, -1, 0))
			return 2;
		task += 2;
		if (rounds % 8 == 0) {
			if (churn_one(PERF_COUNT_HW_CPU_CYCLES, -1, cpu, 1) ||
			    churn_one(PERF_COUNT_HW_INSTRUCTIONS, -1, cpu, 1))
				return 2;
			pinned += 2;
		}
		if (!rounds++) {
			printf("started\n");
			fflush(stdout);
		}
	}
	printf("rounds=%lu task=%lu pinned=%lu\n", rounds, task, pinned);
	return 0;
}
