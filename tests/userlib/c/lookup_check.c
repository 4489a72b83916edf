// SPDX-License-Identifier: GPL-2.0-only
/*
 * lookup_check - drive include/cycles.h's per-CPU cache from a test.
 *
 * Built with -DCYCLES_SYSFS_DIR pointing at a fake driver directory that
 * the test rewrites between commands. Reads one command per line on stdin
 * and answers with one line on stdout:
 *
 *   pin N      run on CPU N only               -> ok | err
 *   avail      perfmon_available()             -> N
 *   why        cycles_unavailable_reason()     -> ok | the reason
 *   index      the indices reads use here      -> cycle=C insn=I
 *   ref        cycles_ref_index()              -> R
 *   shared     the indices shared by all CPUs  -> cycle=C insn=I
 *              (read first if need be; -3 if CPUs differ, -1 none)
 *   cpu N      the cache's entry for CPU N     -> rc=R cycle=C insn=I gen=G
 *   gen        cycles_generation()             -> G
 *   refresh    cycles_refresh()                -> R
 *   read WHAT  x86: unhalted_core(), insn_retired() or unhalted_ref()
 *              (WHAT: core, insn, ref), a fault caught
 *                                              -> value=V | fault rdpmc ecx=E
 *              | fault other (the fault was not at a RDPMC)
 *
 * Only "read" reads a counter: on a machine without user RDPMC it faults,
 * and the SIGSEGV handler reports the ECX the RDPMC was given.
 */
#define _GNU_SOURCE 1
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <ucontext.h>

#include "cycles.h"

#if defined(__x86_64__)
static sigjmp_buf fault_env;
static volatile unsigned long long fault_ecx;
static volatile int fault_rdpmc;

static void on_fault(int sig, siginfo_t *info, void *uctx)
{
	const ucontext_t *uc = uctx;
	const unsigned char *ip =
		(const unsigned char *)uc->uc_mcontext.gregs[REG_RIP];

	(void)info;
	fault_ecx = (unsigned long long)uc->uc_mcontext.gregs[REG_RCX] &
		    0xffffffffULL;
	fault_rdpmc = ip[0] == 0x0f && ip[1] == 0x33;	/* rdpmc */
	siglongjmp(fault_env, sig);
}

static void read_counter(const char *what)
{
	struct sigaction sa, old;
	counter_t v = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old);
	if (sigsetjmp(fault_env, 1)) {
		if (fault_rdpmc)
			printf("fault rdpmc ecx=%llu\n", fault_ecx);
		else
			printf("fault other\n");
	} else {
		if (!strcmp(what, "core"))
			v = unhalted_core();
		else if (!strcmp(what, "insn"))
			v = insn_retired();
		else
			v = unhalted_ref();
		printf("value=%llu\n", v);
	}
	sigaction(SIGSEGV, &old, NULL);
}
#else
static void read_counter(const char *what)
{
	(void)what;
	printf("unsupported\n");
}
#endif

int main(void)
{
	char line[128], what[16];
	const char *reason;
	unsigned long gen;
	int n, cycle, insn, rc;
	struct cycles_state *st;
	cpu_set_t set;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "pin %d", &n) == 1) {
			CPU_ZERO(&set);
			CPU_SET(n, &set);
			rc = sched_setaffinity(0, sizeof(set), &set);
			printf("%s\n", rc == 0 && sched_getcpu() == n ? "ok" : "err");
		} else if (!strcmp(line, "avail\n")) {
			printf("%d\n", perfmon_available());
		} else if (!strcmp(line, "why\n")) {
			reason = cycles_unavailable_reason();
			printf("%s\n", reason ? reason : "ok");
		} else if (!strcmp(line, "ref\n")) {
			printf("%d\n", cycles_ref_index());
		} else if (sscanf(line, "read %15s", what) == 1 &&
			   (!strcmp(what, "core") || !strcmp(what, "insn") ||
			    !strcmp(what, "ref"))) {
			read_counter(what);
		} else if (!strcmp(line, "index\n")) {
			cycle = cycles_cycle_index();
			insn = cycles_insn_index();
			printf("cycle=%d insn=%d\n", cycle, insn);
		} else if (!strcmp(line, "shared\n")) {
			st = cycles_loaded_state();
			printf("cycle=%d insn=%d\n", st->cycle, st->insn);
		} else if (sscanf(line, "cpu %d", &n) == 1) {
			rc = cycles_cpu_indices(n, &cycle, &insn, &gen);
			printf("rc=%d cycle=%d insn=%d gen=%lu\n", rc, cycle,
			       insn, gen);
		} else if (!strcmp(line, "gen\n")) {
			printf("%lu\n", cycles_generation());
		} else if (!strcmp(line, "refresh\n")) {
			printf("%d\n", cycles_refresh());
		} else {
			printf("unknown command\n");
		}
	}
	return 0;
}
