// SPDX-License-Identifier: GPL-2.0
/*
 * include/cycles.h in the guest, through its 2011 API and the per-CPU
 * additions (cycles_generation(), cycles_refresh(), the index lookup).
 *   cyclesh absent  perfmon_available() is 0, there is no generation, and
 *                   nothing faults (module not loaded)
 *   cyclesh reason  perfmon_available() and cycles_unavailable_reason():
 *                   "perfmon=P reason=..." (exit 0 whatever they say)
 *   cyclesh exact   on every CPU in turn (pinned there): perfmon_available()
 *                   > 0; the counters the header reads are the ones that
 *                   CPU's cpuN/cycle_index and event_index name (parsed here
 *                   independently); then insn_retired() deltas of a loop of
 *                   2 instructions, n1 and n2 iterations, each window inside
 *                   an unchanged cpuN generation (a window whose generation
 *                   changed is measured again), are the same on every run
 *                   and differ by exactly 2 * (n2 - n1); cycles and the
 *                   timer advance. Deltas are taken modulo the counter's
 *                   width (64 for index 31, event_width otherwise).
 */
#define _GNU_SOURCE 1
/* The module's counters, read as in 2011 (SIGILL caught here). */
#define CYCLES_SCOPE_CPU 1
#define CYCLES_2011_READS 1
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "cycles.h"

#define RUNS		10
#define MAX_RETRIES	20	/* windows measured again after a generation change */
#define SMALL		1000
#define LARGE		101000

static sigjmp_buf trap;
static volatile sig_atomic_t trapping;

static void on_sigill(int sig)
{
	if (!trapping) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	trapping = 0;
	siglongjmp(trap, 1);
}

static unsigned long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static counter_t loop_insns(unsigned long n)
{
	counter_t a, b;

	sync_core();
	a = insn_retired();
#ifdef __aarch64__
	asm volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
	asm volatile("1: sub $1, %0\n\tjnz 1b" : "+r"(n) : : "cc");
#endif
	b = insn_retired();
	sync_core();
	return b - a;
}

/* Both counters readable here? 0, or -1 if a read trapped (SIGILL). */
static int try_reads(void)
{
	if (sigsetjmp(trap, 1))
		return -1;
	trapping = 1;
	(void)unhalted_core();
	(void)insn_retired();
	trapping = 0;
	return 0;
}

/* perf clears user access at every PMU start; the module reopens it. */
static int wait_readable(long recheck_ms)
{
	unsigned long long deadline = now_ms() + 2 * recheck_ms + 100;
	struct timespec pause = { 0, 10 * 1000 * 1000 };

	while (try_reads() < 0) {
		if (now_ms() > deadline)
			return -1;
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* A number from cpuN/NAME; -100 if absent or malformed. */
static long cpu_attr(int cpu, const char *name)
{
	char buf[64], *end;
	long v;

	if (cycles_read_cpu_attr(cpu, name, buf, sizeof(buf)) < 0)
		return -100;
	v = strtol(buf, &end, 10);
	return *end ? -100 : v;
}

/*
 * INST_RETIRED's counter on @cpu, parsed here from events and event_index
 * without the header's helpers: -1 not counted or not placed, -100 junk.
 */
static int sysfs_insn_index(int cpu)
{
	char events[256], list[256], *ev, *idx, *s1, *s2;
	long e, i;

	if (cycles_read_attr("events", events, sizeof(events)) < 0 ||
	    cycles_read_cpu_attr(cpu, "event_index", list, sizeof(list)) < 0)
		return -100;
	if (!strcmp(events, "none"))
		return -1;
	ev = strtok_r(events, ",", &s1);
	idx = strtok_r(list, " ", &s2);
	while (ev && idx) {
		e = strtol(ev, NULL, 0);
		i = strtol(idx, NULL, 10);
		if (e == CYCLES_EVENT_INST_RETIRED)
			return (int)i;
		ev = strtok_r(NULL, ",", &s1);
		idx = strtok_r(NULL, " ", &s2);
	}
	return ev || idx ? -100 : -1;
}

/* The value every run shares; 0 (and a FAIL line) if they differ. */
static counter_t same(const char *what, const counter_t *v, int n, int cpu)
{
	int i;

	for (i = 1; i < n; i++)
		if (v[i] != v[0])
			break;
	if (i == n)
		return v[0];
	printf("FAIL: cpu%d: %s differs between runs (generation unchanged):", cpu,
	       what);
	for (i = 0; i < n; i++)
		printf(" %llu", v[i]);
	printf("\n");
	return 0;
}

struct window {
	counter_t small[RUNS + 1], large[RUNS + 1];
	int retries;
};

/*
 * RUNS + 1 windows of each size (the first warms up), each inside one
 * generation: one whose generation changed is measured again. 0, or -1
 * after too many retries or a trap.
 */
static int measure_cpu(int cpu, counter_t mask, struct window *w)
{
	volatile int i = 0, size = 0;
	unsigned long g0, g1;
	counter_t d;

	w->retries = 0;
	if (sigsetjmp(trap, 1)) {
		printf("FAIL: cpu%d: SIGILL during the runs (user access lost)\n", cpu);
		return -1;
	}
	while (i < RUNS + 1) {
		g0 = cycles_generation();
		trapping = 1;
		d = loop_insns(size ? LARGE : SMALL) & mask;
		trapping = 0;
		g1 = cycles_generation();
		if (g0 != g1 || !g0) {
			if (++w->retries > MAX_RETRIES) {
				printf("FAIL: cpu%d: generation changed in %d windows (last %lu -> %lu)\n",
				       cpu, w->retries, g0, g1);
				return -1;
			}
			continue;
		}
		if (size)
			w->large[i++] = d;
		else
			w->small[i] = d;
		size = !size;
	}
	return 0;
}

static int exact_on(int cpu, long event_width, long recheck_ms)
{
	counter_t c0, c1, t0, t1, small, large, mask;
	int version, cycle, insn, want_cycle, want_insn;
	unsigned long gen;
	struct window w;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0 || sched_getcpu() != cpu) {
		printf("FAIL: cannot run on cpu%d\n", cpu);
		return 1;
	}
	version = perfmon_available();	/* re-reads every CPU's placement */
	if (version <= 0) {
		printf("FAIL: cpu%d: perfmon_available() = %d with the module loaded\n",
		       cpu, version);
		return 1;
	}
	gen = cycles_generation();
	cycle = cycles_cycle_index();
	insn = cycles_insn_index();
	want_cycle = (int)cpu_attr(cpu, "cycle_index");
	want_insn = sysfs_insn_index(cpu);
	if (gen != (unsigned long)cpu_attr(cpu, "generation") ||
	    cycle != want_cycle || insn != want_insn || cycle < 0 || insn < 0) {
		printf("FAIL: cpu%d: header reads cycles at %d, instructions at %d (generation %lu); sysfs says %d, %d (generation %ld)\n",
		       cpu, cycle, insn, gen, want_cycle, want_insn,
		       cpu_attr(cpu, "generation"));
		return 1;
	}
	if (wait_readable(recheck_ms) < 0) {
		printf("FAIL: cpu%d: reads still trap after 2 * recheck_ms + 100 ms\n",
		       cpu);
		return 1;
	}
	mask = insn == CYCLES_CYCLE_COUNTER || event_width == 64 ? ~0ULL :
	       (1ULL << event_width) - 1;
	if (measure_cpu(cpu, mask, &w) < 0)
		return 1;
	/* Run 0 warms up (page faults, cold paths); every other run must agree. */
	small = same("loop(1000)", w.small + 1, RUNS, cpu);
	large = same("loop(101000)", w.large + 1, RUNS, cpu);
	if (!small || !large)
		return 1;
	c0 = unhalted_core();
	t0 = rdtsc();
	loop_insns(100000);
	c1 = unhalted_core();
	t1 = rdtscp();
	if (large - small != 2 * (LARGE - SMALL) || c1 == c0 || t1 <= t0) {
		printf("FAIL: cpu%d: insns %llu - %llu, cycles %llu -> %llu, timer %llu -> %llu\n",
		       cpu, large, small, c0, c1, t0, t1);
		return 1;
	}
	printf("cpu%d: perfmon_available() = %d; cycles at %d, instructions at %d (generation %lu); loop(%d) = %llu, loop(%d) = %llu instructions on every run (2 per iteration; %d windows measured again); %llu cycles, %llu timer ticks for 100000\n",
	       cpu, version, cycle, insn, gen, SMALL, small, LARGE, large,
	       w.retries, (c1 - c0) & (cycle == CYCLES_CYCLE_COUNTER ? ~0ULL : mask),
	       t1 - t0);
	return 0;
}

int main(int argc, char **argv)
{
	cpu_set_t saved;
	long event_width, recheck_ms;
	int cpu, version, failed = 0, tested = 0;

	if (argc != 2)
		return 2;
	version = perfmon_available();
	if (!strcmp(argv[1], "absent")) {
		printf("perfmon_available() = %d, cycles_generation() = %lu, cycles_refresh() = %d\n",
		       version, cycles_generation(), cycles_refresh());
		return version == 0 && cycles_generation() == 0 ? 0 : 1;
	}
	if (!strcmp(argv[1], "reason")) {
		const char *why = cycles_unavailable_reason();

		printf("perfmon=%d reason=%s\n", version, why ? why : "none");
		return 0;
	}
	if (strcmp(argv[1], "exact"))
		return 2;
	signal(SIGILL, on_sigill);
	event_width = cycles_attr_long("event_width", -1);
	recheck_ms = cycles_attr_long("recheck_ms", 100);
	if (event_width != 32 && event_width != 64) {
		printf("FAIL: event_width %ld\n", event_width);
		return 1;
	}
	if (sched_getaffinity(0, sizeof(saved), &saved) < 0)
		return 2;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &saved))
			continue;
		tested++;
		failed |= exact_on(cpu, event_width, recheck_ms);
	}
	unpin_cpu(&saved);
	if (!tested)
		printf("FAIL: no CPU to test\n");
	return failed || !tested;
}
