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
 *   window     a module-path window with a fault of the program's own in
 *              it      -> begin=B reads=A,B own=N end=E restored=R
 *   unpin      run on any CPU this process may  -> ok | err
 *   ownlate    the program's handler installed inside a window stays
 *              after its end       -> begin=B kept=K
 *   emptywin   a module-path window with no read in it (so nothing
 *              faults)         -> begin=B end=E cpu=C gen=G
 *   widths     the counter widths such a window takes its deltas modulo
 *                              -> cycles=W insn=W
 *   fbegin     cycles_window_begin_fixed() for cycles (the window stays
 *              open)           -> begin=B on_fixed=M
 *   fread      cycles_window_read_fixed() of cycles in it (only after a
 *              begin of 0)     -> value=V faulted=F
 *   fend       its end         -> end=E
 *   read WHAT  cycles_read() of CYCLES_CORE, _INSN or _REF (WHAT: core,
 *              insn, ref)      -> value=V flags=F | none (nothing read)
 *              | fault rdpmc ecx=E (the guard caught a fault at the read
 *              of counter E)
 *
 * Built with CYCLES_SCOPE_CPU: every read is on the module path. Only
 * "read" reads a counter: on a machine without user RDPMC it faults, and
 * cycles.h's guard turns that into an invalid reading naming the operand.
 */
#define _GNU_SOURCE 1
/* The module's CPU-wide counters: the path these tests are about. */
#define CYCLES_SCOPE_CPU 1
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

#include "cycles.h"

/*
 * A read through the path's guard: on this host RDPMC faults (no user
 * RDPMC), the guard skips it and the reading names the operand that
 * faulted; where it works, the value.
 */
static void read_counter(const char *what)
{
	struct cycles_reading r;
	int which = !strcmp(what, "core") ? CYCLES_CORE :
		    !strcmp(what, "insn") ? CYCLES_INSN : CYCLES_REF;

	if (cycles_read(which, &r) == 0)
		printf("value=%llu flags=%u\n", r.value, r.flags);
	else if (r.flags & CYCLES_FAULTED)
		printf("fault rdpmc ecx=%u\n", r.hw);
	else
		printf("none\n");
}

static sigjmp_buf own_env;
static volatile sig_atomic_t own_calls;

/* The program's own handler: the guard must pass it what is not its own. */
static void own_handler(int sig, siginfo_t *info, void *uc)
{
	(void)info;
	(void)uc;
	own_calls++;
	siglongjmp(own_env, sig);
}

/*
 * A module-path window, pinned: two reads of cycles (here they fault, and
 * the guard skips them), then a fault of the program's own (x86: a NULL
 * store; arm64: UDF) that must reach the program's handler, then the end. After it the
 * program's handler is installed again.
 */
static void window(void)
{
	struct sigaction sa, now;
	struct cycles_window w;
	volatile int *volatile nowhere = NULL;
	volatile counter_t a = 1, b = 1;
	unsigned int end;
	int begin;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(CYCLES_GUARD_SIGNAL, &sa, NULL);
	own_calls = 0;
	begin = cycles_window_begin(&w);
	if (begin == 0) {
		a = cycles_window_read(&w, CYCLES_CORE);
		b = cycles_window_read(&w, CYCLES_CORE);
		if (!sigsetjmp(own_env, 1)) {
#if defined(__aarch64__)
			(void)nowhere;
			__asm__ __volatile__(".inst 0x00000000");	/* udf */
#else
			*nowhere = 1;
#endif
		}
	}
	end = cycles_window_end(&w);
	sigaction(CYCLES_GUARD_SIGNAL, NULL, &now);
	printf("begin=%d reads=%llu,%llu own=%d end=%u restored=%d\n", begin,
	       (counter_t)a, (counter_t)b, (int)own_calls, end,
	       now.sa_sigaction == own_handler);
	signal(CYCLES_GUARD_SIGNAL, SIG_DFL);
}

/*
 * The program installs its own handler inside a module window (after the
 * guard): the window's end must leave it installed.
 */
static void own_late(void)
{
	struct sigaction sa, now;
	struct cycles_window w;
	int begin;

	signal(CYCLES_GUARD_SIGNAL, SIG_DFL);
	begin = cycles_window_begin(&w);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(CYCLES_GUARD_SIGNAL, &sa, NULL);
	cycles_window_end(&w);
	sigaction(CYCLES_GUARD_SIGNAL, NULL, &now);
	printf("begin=%d kept=%d\n", begin,
	       (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == own_handler);
	signal(CYCLES_GUARD_SIGNAL, SIG_DFL);
}

/* A window with nothing read in it: what its edges decide alone. */
static void empty_window(void)
{
	struct cycles_window w;
	int begin = cycles_window_begin(&w);
	unsigned int end = cycles_window_end(&w);

	printf("begin=%d end=%u cpu=%d gen=%lu\n", begin, end, w.cpu,
	       w.generation);
}

static void window_widths(void)
{
	struct cycles_window w;

	cycles_window_begin(&w);
	cycles_window_end(&w);
	printf("cycles=%u insn=%u\n", w.width[CYCLES_CORE], w.width[CYCLES_INSN]);
}

/* A fixed-read window of cycles, open across commands. */
static struct cycles_window fixed_win;

static void fixed_read(void)
{
	volatile counter_t v = cycles_window_read_fixed(&fixed_win, CYCLES_CORE);

	printf("value=%llu faulted=%d\n", (counter_t)v, (int)cycles_tls.faulted);
}

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
		} else if (!strcmp(line, "unpin\n")) {
			CPU_ZERO(&set);
			for (n = 0; n < CPU_SETSIZE; n++)
				CPU_SET(n, &set);
			rc = sched_setaffinity(0, sizeof(set), &set);
			printf("%s\n", rc == 0 ? "ok" : "err");
		} else if (!strcmp(line, "ownlate\n")) {
			own_late();
		} else if (!strcmp(line, "fbegin\n")) {
			rc = cycles_window_begin_fixed(&fixed_win,
						       CYCLES_FIXED(CYCLES_CORE));
			printf("begin=%d on_fixed=%u\n", rc, fixed_win.on_fixed);
		} else if (!strcmp(line, "fread\n")) {
			fixed_read();
		} else if (!strcmp(line, "fend\n")) {
			printf("end=%u\n", cycles_window_end(&fixed_win));
		} else if (!strcmp(line, "emptywin\n")) {
			empty_window();
		} else if (!strcmp(line, "widths\n")) {
			window_widths();
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
		} else if (!strcmp(line, "window\n")) {
			window();
		} else if (!strcmp(line, "refresh\n")) {
			printf("%d\n", cycles_refresh());
		} else {
			printf("unknown command\n");
		}
	}
	return 0;
}
