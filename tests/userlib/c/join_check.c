// SPDX-License-Identifier: GPL-2.0-only
/*
 * join_check - how include/cycles.h lets a thread in through the module's
 * device node (arm64), driven from a test.
 *
 * Built for arm64 (run under qemu-aarch64) with -DCYCLES_SYSFS_DIR (a fake
 * driver directory), -DCYCLES_DEV_NODE (a file standing in for the node)
 * and -Wl,--wrap=ioctl: the ioctls cycles.h makes are counted here, never
 * reach a kernel, and succeed. One command per line on stdin, one answer
 * line on stdout:
 *
 *   nodac    drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (a root test
 *            run then meets the node's mode as a user does) -> ok | err
 *   state    perfmon_available() (re-chooses the path), then
 *                   -> avail=A path=P joined=J joins=N leaves=L in_guard=G
 *   why      cycles_unavailable_reason()          -> ok | the reason
 *   read     cycles_read(CYCLES_CORE)             -> rc=R flags=F joins=N
 *   window   a module-path window with one read    -> begin=B end=E joins=N
 *   join     cycles_join()                        -> rc=R errno=E joins=N
 *   leave    cycles_leave()                       -> rc=R joined=J leaves=L
 *   fork     fork(); the child reports its `state` (its own thread)
 *                   -> child: joined_at_fork=J avail=A path=P joins=N
 *   nodefds  descriptors open on CYCLES_DEV_NODE (one left open would
 *            keep the module from unloading)     -> fds=N
 *
 * joins counts SPMU_IOC_JOIN ioctls, in_guard those made while a guard was
 * on (from the fault handler's side of a read: never allowed).
 */
#define _GNU_SOURCE 1
#define CYCLES_SCOPE_CPU 1
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include "cycles.h"

static int joins, leaves, in_guard;

int __real_ioctl(int fd, unsigned long request, ...);
int __wrap_ioctl(int fd, unsigned long request, ...);

int __wrap_ioctl(int fd, unsigned long request, ...)
{
	(void)fd;
	if (cycles_tls.guarding)
		in_guard++;
	if (request == CYCLES_IOC_JOIN) {
		joins++;
		return 0;
	}
	if (request == CYCLES_IOC_LEAVE) {
		leaves++;
		return 0;
	}
	errno = ENOTTY;
	return -1;
}

static int drop_dac(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];
	unsigned int drop = (1U << CAP_DAC_OVERRIDE) |
			    (1U << CAP_DAC_READ_SEARCH);

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	data[0].effective &= ~drop;
	data[0].permitted &= ~drop;
	data[0].inheritable &= ~drop;
	return (int)syscall(SYS_capset, &hdr, data);
}

static int node_fds(void)
{
	char link[PATH_MAX], target[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	ssize_t n;
	int fds = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = 0;
		fds += !strcmp(target, CYCLES_DEV_NODE);
	}
	closedir(d);
	return fds;
}

static void state(const char *prefix)
{
	int avail = perfmon_available();

	printf("%savail=%d path=%d joined=%d joins=%d leaves=%d in_guard=%d\n",
	       prefix, avail, cycles_path(), cycles_tls.joined, joins, leaves,
	       in_guard);
}

int main(void)
{
	struct cycles_reading r;
	struct cycles_window w;
	char line[64], prefix[64];
	const char *why;
	int rc, begin, status;
	unsigned int end;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "nodac\n")) {
			printf("%s\n", drop_dac() == 0 ? "ok" : "err");
		} else if (!strcmp(line, "state\n")) {
			state("");
		} else if (!strcmp(line, "why\n")) {
			why = cycles_unavailable_reason();
			printf("%s\n", why ? why : "ok");
		} else if (!strcmp(line, "read\n")) {
			rc = cycles_read(CYCLES_CORE, &r);
			printf("rc=%d flags=%u joins=%d\n", rc, r.flags, joins);
		} else if (!strcmp(line, "window\n")) {
			begin = cycles_window_begin(&w);
			if (begin == 0)
				(void)cycles_window_read(&w, CYCLES_CORE);
			end = cycles_window_end(&w);
			printf("begin=%d end=%u joins=%d\n", begin, end, joins);
		} else if (!strcmp(line, "join\n")) {
			errno = 0;
			rc = cycles_join();
			printf("rc=%d errno=%d joins=%d\n", rc, rc ? errno : 0,
			       joins);
		} else if (!strcmp(line, "leave\n")) {
			rc = cycles_leave();
			printf("rc=%d joined=%d leaves=%d\n", rc,
			       cycles_tls.joined, leaves);
		} else if (!strcmp(line, "fork\n")) {
			pid = fork();
			if (pid == 0) {
				snprintf(prefix, sizeof(prefix),
					 "child: joined_at_fork=%d ",
					 cycles_tls.joined);
				state(prefix);
				_exit(0);
			}
			waitpid(pid, &status, 0);
		} else if (!strcmp(line, "nodefds\n")) {
			printf("fds=%d\n", node_fds());
		} else {
			printf("unknown command\n");
		}
	}
	return 0;
}
