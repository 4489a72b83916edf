// SPDX-License-Identifier: GPL-2.0
/*
 * perfcoexist CPU N PHASE...: perf's own numbers judge simple-pmu.
 *
 * On CPU, two perf groups stay open for the whole run, counting cycles
 * and instructions: a pinned CPU-wide group of user space only (as
 * perf stat -a -e cycles:u opens it) and a per-task group of this thread,
 * user and kernel. Every window makes one getppid() call, so a driver
 * that widened the first group's filter to EL1 or narrowed the second's
 * to EL0 changes every window, not only those a timer tick lands in. Each PHASE
 * is NAME:COMMAND. The command runs first (system(), on this CPU, between
 * windows), then, after 300 ms for the other CPU to settle, five windows of
 * spmu_spin(N), each between two reads of both groups. A PHASE whose NAME starts with "during" runs its command in
 * a child on another CPU instead, while windows are measured until it
 * ends (five at least): the module changes state inside those windows.
 *
 * Output, one line per phase, each count as MIN..MAX over its windows (for a
 * step run between windows, over the last of at most QUIET_TRIES batches of
 * five; tries says which):
 *   phase=P rc=R tries=T windows=W cpu_insns=A..B cpu_cycles=A..B task_insns=A..B
 *     task_cycles=A..B cpu_before=X cpu_after=Y lost_ns=L task_lost_ns=T
 * cpu_before/after: the CPU-wide instruction count before the command and
 * after the phase; lost_ns, task_lost_ns: how much less each group has run
 * than it was enabled (0 when nobody took its counters; the per-task group
 * is not pinned and would be multiplexed).
 */
#include "guestlib.h"
#include "arm64_loop.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__aarch64__)
struct group_read {
	uint64_t nr, enabled, running, cycles, insns;
};

static int open_group(pid_t pid, int cpu, int pinned, int kernel, int *member)
{
	struct perf_event_attr attr;
	int leader;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.pinned = pinned;
	attr.exclude_kernel = !kernel;
	attr.exclude_hv = 1;
	attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
			   PERF_FORMAT_TOTAL_TIME_RUNNING;
	leader = (int)syscall(SYS_perf_event_open, &attr, pid, cpu, -1, 0);
	if (leader < 0)
		return -1;
	attr.config = PERF_COUNT_HW_INSTRUCTIONS;
	attr.pinned = 0;
	*member = (int)syscall(SYS_perf_event_open, &attr, pid, cpu, leader, 0);
	return *member < 0 ? -1 : leader;
}

static void read_group(int fd, struct group_read *r)
{
	if (read(fd, r, sizeof(*r)) != sizeof(*r)) {
		perror("perfcoexist: read");
		exit(2);
	}
}

#define QUIET_TRIES 20

static int cpu_fd, task_fd;

/* Smallest and largest of each count over a phase's windows. */
struct span {
	uint64_t min[4], max[4], windows;
};

static void window(struct span *sp, uint64_t n)
{
	struct group_read c0, t0, c1, t1;
	uint64_t d[4];
	int k;

	read_group(cpu_fd, &c0);
	read_group(task_fd, &t0);
	spmu_spin(n);
	syscall(SYS_getppid);
	read_group(cpu_fd, &c1);
	read_group(task_fd, &t1);
	d[0] = c1.insns - c0.insns;
	d[1] = c1.cycles - c0.cycles;
	d[2] = t1.insns - t0.insns;
	d[3] = t1.cycles - t0.cycles;
	for (k = 0; k < 4; k++) {
		if (!sp->windows || d[k] < sp->min[k])
			sp->min[k] = d[k];
		if (!sp->windows || d[k] > sp->max[k])
			sp->max[k] = d[k];
	}
	sp->windows++;
}

static int run_phase(const char *spec, int cpu, uint64_t n)
{
	char name[64], *colon = strchr(spec, ':');
	struct group_read before, after, task;
	struct span sp = { 0 };
	int i, rc = 0, status, tries = 1, done;
	pid_t child;

	if (!colon || colon - spec >= (long)sizeof(name)) {
		fprintf(stderr, "perfcoexist: phase %s is not NAME:COMMAND\n", spec);
		return -1;
	}
	memcpy(name, spec, colon - spec);
	name[colon - spec] = '\0';
	read_group(cpu_fd, &before);
	if (!strncmp(name, "during", 6)) {
		fflush(stdout);
		child = fork();
		if (child == 0) {
			spmu_pin(cpu ? 0 : 1);
			_exit(system(colon + 1) ? 1 : 0);
		}
		/*
		 * Idle between windows: under -icount a busy vCPU costs real time.
		 * Five windows at least, the last ones after the command if it
		 * was quick: the smallest must be exact, and one window alone
		 * may well hold the other vCPU's work.
		 */
		done = 0;
		do {
			window(&sp, n);
			usleep(2000);
			if (!done && waitpid(child, &status, WNOHANG) == child)
				done = 1;
		} while (!done || sp.windows < 5);
		rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
	} else {
		if (*(colon + 1))
			rc = system(colon + 1) ? 1 : 0;
		/*
		 * Let the other CPU finish what the command left it (RCU, kworkers):
		 * under -icount its instructions would land in our windows. A batch
		 * of windows that still differ in any of the four counts the script
		 * judges is measured again, QUIET_TRIES times at most (about a third
		 * of the batches on cpu1 are disturbed).
		 */
		usleep(300000);
		for (tries = 1; tries <= QUIET_TRIES; tries++) {
			memset(&sp, 0, sizeof(sp));
			for (i = 0; i < 5; i++)
				window(&sp, n);
			for (i = 0; i < 4 && sp.min[i] == sp.max[i]; i++)
				;
			if (i == 4)
				break;
		}
	}
	read_group(cpu_fd, &after);
	read_group(task_fd, &task);
	printf("phase=%s rc=%d tries=%d windows=%llu cpu_insns=%llu..%llu cpu_cycles=%llu..%llu task_insns=%llu..%llu task_cycles=%llu..%llu cpu_before=%llu cpu_after=%llu lost_ns=%llu task_lost_ns=%llu\n",
	       name, rc, tries > QUIET_TRIES ? QUIET_TRIES : tries, (unsigned long long)sp.windows,
	       (unsigned long long)sp.min[0], (unsigned long long)sp.max[0],
	       (unsigned long long)sp.min[1], (unsigned long long)sp.max[1],
	       (unsigned long long)sp.min[2], (unsigned long long)sp.max[2],
	       (unsigned long long)sp.min[3], (unsigned long long)sp.max[3],
	       (unsigned long long)before.insns, (unsigned long long)after.insns,
	       (unsigned long long)(after.enabled - after.running),
	       (unsigned long long)(task.enabled - task.running));
	fflush(stdout);
	return rc;
}
#endif

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	int cpu, i, member, bad = 0;
	uint64_t n;

	if (argc < 4) {
		fprintf(stderr, "usage: perfcoexist CPU N NAME:COMMAND...\n");
		return 2;
	}
	cpu = (int)spmu_arg(argv[1], "cpu");
	n = (uint64_t)spmu_arg(argv[2], "iterations");
	if (spmu_pin(cpu)) {
		perror("perfcoexist: pin");
		return 2;
	}
	cpu_fd = open_group(-1, cpu, 1, 0, &member);
	task_fd = open_group(0, -1, 0, 1, &member);
	if (cpu_fd < 0 || task_fd < 0) {
		perror("perfcoexist: perf_event_open");
		return 2;
	}
	for (i = 3; i < argc; i++)
		if (run_phase(argv[i], cpu, n))
			bad = 1;
	return bad;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
