// SPDX-License-Identifier: GPL-2.0
/*
 * hwraw [--map] [--rdwr] [--hold] [--index N] [--node PATH] [--fault-elsewhere] CPU
 * [SPIN]: a raw reader that knows nothing of cycles.h (which lets a process
 * in by itself): pinned to CPU, it reads the core-cycles counter the module
 * publishes there (cpuN/cycle_index) with its own RDPMC, spins SPIN
 * iterations (default 1000000) and reads it again, between two reads of
 * cpuN/generation.
 *
 * --map: first let itself in as the x86 module asks: open /dev/simple-pmu
 * O_RDONLY, map one page of it (PROT_READ, MAP_SHARED, offset 0; the mapping
 * has no pages and is never touched), close the fd. The process may RDPMC
 * while the mapping lives: until munmap, exit or exec.
 *
 * Each read prints one line, its first half before the first RDPMC:
 *   cpu=C map=M index=I gen=G0 gen_after=G1 c0=V c1=V delta=D result=R
 * M: none (not asked), ok, unmapped (--hold's unmap), or the call that
 * failed and its errno's name (open:EACCES, mmap:EPERM). R: ok (the counter
 * advanced), stalled (it did not), generation (cpuN/generation changed
 * meanwhile: the index may have moved), unplaced (cycle_index -1: nothing
 * to read there), unavailable (no module). An RDPMC that faults completes
 * the line with
 *   result=sigsegv code=SI_CODE at_rdpmc=1|0
 * (at_rdpmc: the fault's RIP is that of the RDPMC itself) and the process
 * then dies of that SIGSEGV, as it would without the handler, dumping no
 * core.
 *
 * --rdwr: open the node O_RDWR (root may) rather than O_RDONLY, so that a
 * mapping that may become writable (VM_MAYWRITE) is the module's doing, not
 * the file mode's; the mapping is still PROT_READ.
 *
 * --hold: after mapping (or not), print "held map=M" and serve one command
 * a line on stdin: "read" (one read, its line), "unmap" (munmap; "unmapped
 * rc=R"), "protect" (mprotect of the mapping to read-write: "protect rc=R
 * errno=E"), "fork" (a child reads once, map=inherited, and exits: its line,
 * then "child status=exit:N|signal:N"; its map is the holder's, "inherited"
 * for ok), "fork-exec" (a child executes hwraw
 * anew, not let in, which reads once: the same two lines); at EOF exit 0,
 * the mapping ending with the process.
 *
 * --index N: read counter N without looking at the module (gen=none); --node
 * PATH: map PATH instead of the node. --fault-elsewhere: read address 0
 * where the first RDPMC would be (a fault that is not the RDPMC's:
 * at_rdpmc=0). For the host's unit tests, which have no module: a fault
 * where there is no PMU, a mapping of a plain file, a fault elsewhere.
 *
 * Exit 0 after an ok read (or --hold's EOF), 1 after another result, 2 on
 * bad arguments or a CPU it cannot run on; killed by SIGSEGV on a fault.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define HWRAW_SYSFS	"/sys/devices/system/simple-pmu/simple-pmu0"
#define HWRAW_NODE	"/dev/simple-pmu"

/* The address of the one RDPMC instruction (the label in hwraw_rdpmc()). */
extern const char hwraw_rdpmc_insn[];

/* --fault-elsewhere: read this (NULL, which the compiler cannot know) first. */
static int hwraw_fault_elsewhere;
static volatile int *volatile hwraw_nowhere;

static __attribute__((noinline, noclone)) unsigned long long hwraw_rdpmc(unsigned int idx)
{
	unsigned int lo, hi;

	__asm__ volatile(".globl hwraw_rdpmc_insn\n"
			 "hwraw_rdpmc_insn:\n\t"
			 "rdpmc"
			 : "=a"(lo), "=d"(hi) : "c"(idx) : "memory");
	return (unsigned long long)hi << 32 | lo;
}

/* Async-signal-safe: @v in decimal at @p, which must hold 21 bytes. */
static size_t hwraw_utoa(char *p, long v)
{
	char tmp[21];
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;
	size_t n = 0, i = 0;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		p[i++] = '-';
	while (n)
		p[i++] = tmp[--n];
	return i;
}

static void hwraw_on_sigsegv(int sig, siginfo_t *si, void *ctx)
{
	const ucontext_t *uc = ctx;
	unsigned long rip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	char line[96];
	size_t n = 0;

	memcpy(line, "result=sigsegv code=", 20);
	n = 20;
	n += hwraw_utoa(line + n, si->si_code);
	memcpy(line + n, rip == (unsigned long)hwraw_rdpmc_insn ? " at_rdpmc=1\n" :
	       " at_rdpmc=0\n", 12);
	n += 12;
	if (write(1, line, n) < 0)
		_exit(4);
	/* Die of it: the default action, delivered when the handler returns. */
	signal(sig, SIG_DFL);
	raise(sig);
}

static long hwraw_arg(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || end == s) {
		fprintf(stderr, "hwraw: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static const char *hwraw_errname(int err)
{
	static char other[16];

	switch (err) {
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ENODEV: return "ENODEV";
	case ENXIO: return "ENXIO";
	case EBUSY: return "EBUSY";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case 0: return "0";
	}
	snprintf(other, sizeof(other), "E%d", err);
	return other;
}

/* cpuN/NAME into @buf, its newline dropped: 0, or -1. */
static int hwraw_attr(int cpu, const char *name, char *buf, size_t size)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), HWRAW_SYSFS "/cpu%d/%s", cpu, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* Let this process in: the mapping, or NULL with @state saying what failed. */
static int hwraw_rdwr;

static void *hwraw_map(const char *node, char *state, size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;
	int fd, err;

	fd = open(node, (hwraw_rdwr ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0) {
		snprintf(state, size, "open:%s", hwraw_errname(errno));
		return NULL;
	}
	p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(state, size, "mmap:%s", hwraw_errname(err));
		return NULL;
	}
	snprintf(state, size, "ok");
	return p;
}

/* One read on @cpu (where this runs), its line: 0 for ok, else 1. */
static int hwraw_read(int cpu, const char *state, long index, long spin)
{
	char gen0[32] = "none", gen1[32] = "none", idx[32];
	unsigned long long c0, c1;
	volatile long k;
	long i;

	printf("cpu=%d map=%s ", cpu, state);
	if (index >= 0) {
		i = index;
	} else {
		if (hwraw_attr(cpu, "generation", gen0, sizeof(gen0)) ||
		    hwraw_attr(cpu, "cycle_index", idx, sizeof(idx))) {
			printf("result=unavailable\n");
			return 1;
		}
		i = strtol(idx, NULL, 10);
		if (i < 0) {
			printf("index=%ld gen=%s result=unplaced\n", i, gen0);
			return 1;
		}
	}
	printf("index=%ld gen=%s ", i, gen0);
	fflush(stdout);
	if (hwraw_fault_elsewhere)
		(void)*hwraw_nowhere;
	c0 = hwraw_rdpmc((unsigned int)i);
	for (k = 0; k < spin; k++)
		;
	c1 = hwraw_rdpmc((unsigned int)i);
	if (index < 0 && hwraw_attr(cpu, "generation", gen1, sizeof(gen1)))
		snprintf(gen1, sizeof(gen1), "gone");
	printf("gen_after=%s c0=%llu c1=%llu delta=%llu result=%s\n", gen1, c0, c1, c1 - c0,
	       strcmp(gen0, gen1) ? "generation" : c1 > c0 ? "ok" : "stalled");
	return !strcmp(gen0, gen1) && c1 > c0 ? 0 : 1;
}

/*
 * A child of this let-in process reads once (@exec: after executing hwraw
 * anew, so through a fresh mm); its line, then how it ended.
 */
static void hwraw_child(int cpu, const char *state, long index, long spin,
			int exec)
{
	char cpus[16], spins[24], indexs[24];
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		/* The two lines a child's read would give, so the reader never waits. */
		printf("cpu=%d map=%s result=fork:%s\n", cpu, state, hwraw_errname(errno));
		printf("child status=fork:%s\n", hwraw_errname(errno));
		return;
	}
	if (!pid) {
		if (!exec)
			_exit(hwraw_read(cpu, strcmp(state, "ok") ? state : "inherited",
					 index, spin));
		snprintf(cpus, sizeof(cpus), "%d", cpu);
		snprintf(spins, sizeof(spins), "%ld", spin);
		snprintf(indexs, sizeof(indexs), "%ld", index);
		if (index >= 0)
			execl("/proc/self/exe", "hwraw", "--index", indexs, cpus, spins,
			      (char *)NULL);
		else
			execl("/proc/self/exe", "hwraw", cpus, spins, (char *)NULL);
		printf("cpu=%d map=none result=exec:%s\n", cpu, hwraw_errname(errno));
		_exit(2);
	}
	if (waitpid(pid, &status, 0) < 0)
		printf("child status=wait:%s\n", hwraw_errname(errno));
	else if (WIFSIGNALED(status))
		printf("child status=signal:%d\n", WTERMSIG(status));
	else
		printf("child status=exit:%d\n", WEXITSTATUS(status));
}

int main(int argc, char **argv)
{
	int map = 0, hold = 0, cpu, a = 1, rc;
	long index = -1, spin = 1000000, page = sysconf(_SC_PAGESIZE);
	char state[32] = "none", cmd[32];
	const char *node = HWRAW_NODE;
	struct sigaction sa;
	cpu_set_t one;
	void *p = NULL;

	for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
		if (!strcmp(argv[a], "--map")) {
			map = 1;
		} else if (!strcmp(argv[a], "--rdwr")) {
			hwraw_rdwr = 1;
		} else if (!strcmp(argv[a], "--hold")) {
			hold = 1;
		} else if (!strcmp(argv[a], "--fault-elsewhere")) {
			hwraw_fault_elsewhere = 1;
		} else if (!strcmp(argv[a], "--node") && a + 1 < argc) {
			node = argv[++a];
		} else if (!strcmp(argv[a], "--index") && a + 1 < argc) {
			index = hwraw_arg(argv[++a], "index");
			if (index < 0)
				return 2;
		} else {
			break;
		}
	}
	if (a >= argc || argc - a > 2) {
		fprintf(stderr, "usage: hwraw [--map] [--rdwr] [--hold] [--index N] [--node PATH] "
			"[--fault-elsewhere] CPU [SPIN]\n");
		return 2;
	}
	cpu = (int)hwraw_arg(argv[a], "cpu");
	if (a + 1 < argc)
		spin = hwraw_arg(argv[a + 1], "spin");
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (cpu < 0 || sched_setaffinity(0, sizeof(one), &one) < 0 || sched_getcpu() != cpu) {
		fprintf(stderr, "hwraw: cannot run on CPU %d: %s\n", cpu, strerror(errno));
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	/* A fault here is expected: no core file, no crash report. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = hwraw_on_sigsegv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	if (map)
		p = hwraw_map(node, state, sizeof(state));
	if (!hold)
		return hwraw_read(cpu, state, index, spin);
	printf("held map=%s\n", state);
	while (fgets(cmd, sizeof(cmd), stdin)) {
		if (!strcmp(cmd, "read\n")) {
			hwraw_read(cpu, state, index, spin);
		} else if (!strcmp(cmd, "unmap\n")) {
			printf("unmapped rc=%d\n", p ? munmap(p, (size_t)page) : -1);
			p = NULL;
			snprintf(state, sizeof(state), "unmapped");
		} else if (!strcmp(cmd, "protect\n")) {
			errno = 0;
			rc = p ? mprotect(p, (size_t)page, PROT_READ | PROT_WRITE) : -1;
			printf("protect rc=%d errno=%s\n", rc, hwraw_errname(p ? errno : 0));
		} else if (!strcmp(cmd, "fork\n") || !strcmp(cmd, "fork-exec\n")) {
			hwraw_child(cpu, state, index, spin, !strcmp(cmd, "fork-exec\n"));
		} else {
			printf("unknown command\n");
		}
	}
	return 0;
}
