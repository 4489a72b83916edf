// SPDX-License-Identifier: GPL-2.0
/*
 * One system call with the N-th fault-capable call of this thread failing: a
 * debug kernel's per-task fault injection (CONFIG_FAULT_INJECTION,
 * /proc/thread-self/fail-nth), armed just before the call and read back just
 * after, with no exec or libc work in between.
 *
 *   failnth N load MODULE [PARAMS]   finit_module(MODULE, PARAMS)
 *   failnth N write FILE VALUE       write(2) VALUE to FILE (opened first)
 *   failnth N join NODE              ioctl JOIN on NODE (opened first); then
 *                                    one PMCCNTR_EL0 read, on arm64
 *
 * N = 0 injects nothing: one plain call (busybox insmod and modprobe try
 * init_module() again after a failed finit_module()).
 *
 * Prints one line: n=N rc=R errno=NAME injected=0|1 left=L [read=ok|sigill].
 * injected=0: the call made fewer than N fault-capable calls, so nothing was
 * failed (a sweep N = 1, 2, ... ends there); it made N - L of them. Exit status 0 after that line; 2
 * on bad use or when fail-nth cannot be armed (a kernel without it).
 */
#include "guestlib.h"
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int arm(int ctl, long n)
{
	char buf[24];
	int len = snprintf(buf, sizeof(buf), "%ld", n);

	return pwrite(ctl, buf, (size_t)len, 0) == len ? 0 : -1;
}

static int open_or_die(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "failnth: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	return fd;
}

int main(int argc, char **argv)
{
	const char *rd = "";
	char left[24] = "";
	int ctl, fd, err;
	ssize_t got;
	long n, rc;

	if (argc < 4) {
		fprintf(stderr,
			"usage: failnth N load MODULE [PARAMS] | write FILE VALUE | join NODE\n");
		return 2;
	}
	n = spmu_arg(argv[1], "N");
	if (n < 0) {
		fprintf(stderr, "failnth: N must be 0 (inject nothing) or more, not %ld\n", n);
		return 2;
	}
	if (!((!strcmp(argv[2], "load") && argc <= 5) ||
	      (!strcmp(argv[2], "write") && argc == 5) ||
	      (!strcmp(argv[2], "join") && argc == 4))) {
		fprintf(stderr, "failnth: bad use: %s %s (argc %d)\n", argv[1], argv[2], argc);
		return 2;
	}
	ctl = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		fprintf(stderr, "failnth: /proc/thread-self/fail-nth: %s%s\n", strerror(errno),
			" (a kernel without CONFIG_FAULT_INJECTION?)");
		return 2;
	}
	if (!strcmp(argv[2], "load")) {
		fd = open_or_die(argv[3], O_RDONLY);
		if (arm(ctl, n))
			return 2;
		rc = syscall(SYS_finit_module, fd, argc == 5 ? argv[4] : "", 0);
	} else if (!strcmp(argv[2], "write")) {
		fd = open_or_die(argv[3], O_WRONLY);
		if (arm(ctl, n))
			return 2;
		rc = write(fd, argv[4], strlen(argv[4]));
	} else {
		fd = open_or_die(argv[3], O_RDONLY);
		if (arm(ctl, n))
			return 2;
		/* SPMU_IOC_JOIN (guestlib.h has it on arm64 only; built for amd64 too) */
		rc = ioctl(fd, _IO(0xB9, 0x01));
	}
	err = rc < 0 ? errno : 0;
	/* What is left of the count: 0 once the fault was injected. */
	got = pread(ctl, left, sizeof(left) - 1, 0);
	if (got <= 0) {
		fprintf(stderr, "failnth: reading fail-nth back: %s\n", strerror(errno));
		return 2;
	}
	left[got] = '\0';
	arm(ctl, 0);
#if defined(__aarch64__)
	if (!strcmp(argv[2], "join")) {
		uint64_t v;

		signal(SIGILL, spmu_on_sigill);
		rd = spmu_try_pmccntr(&v) ? " read=sigill" : " read=ok";
	}
#endif
	printf("n=%ld rc=%ld errno=%s injected=%d left=%ld%s\n", n, rc,
	       err ? strerrorname_np(err) : "0", n && atol(left) == 0, atol(left), rd);
	return 0;
}
