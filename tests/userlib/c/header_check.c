// SPDX-License-Identifier: GPL-2.0-only
/*
 * header_check - exercise include/cycles.h on the machine it runs on.
 *
 * Prints "key=value" lines for the Python test to compare with what it
 * knows of the machine (e.g. perfmon=0 when the module is not loaded) and
 * "FAIL: ..." lines for every check that failed here; exit 1 if any did.
 * Never reads a PMU counter unless perfmon_available() says it may.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>

#include "cycles.h"

static int failures;

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			printf("FAIL: " __VA_ARGS__);			\
			putchar('\n');					\
			failures++;					\
		}							\
	} while (0)

/* In another translation unit: the header must link twice. */
int other_unit_perfmon(void);
const void *other_unit_thread_state(void);
const void *other_unit_module_cache(void);

static void *thread_state(void *arg)
{
	(void)arg;
	return (void *)other_unit_thread_state();
}

/*
 * One state per thread for the whole program, not one per translation
 * unit; a new thread and a forked child start without one (their first
 * use opens their own events).
 */
static void check_state(void)
{
	const void *mine = cycles_thread();
	void *other = NULL;
	pthread_t th;
	pid_t pid;
	int status = -1;

	CHECK(mine == other_unit_thread_state(),
	      "two translation units see two thread states");
	CHECK(cycles_state() == other_unit_module_cache(),
	      "two translation units see two module caches");
	CHECK(cycles_tls.ready, "no state after the first use");
	CHECK(pthread_create(&th, NULL, thread_state, NULL) == 0 &&
	      pthread_join(th, &other) == 0 && other && other != mine,
	      "a second thread shares the first one's state");
	pid = fork();
	if (pid == 0)	/* the parent's events count the parent: dropped */
		_exit(cycles_tls.ready ? 3 : 0);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid &&
	      WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "a forked child kept its parent's state (status %#x)", status);
	printf("path=%d\n", cycles_path());
}

/* events + event_index -> where INST_RETIRED counts on a CPU. */
static void check_event_index_parser(void)
{
	static const struct {
		const char *events, *event_index;
		unsigned long event;
		int want;
	} cases[] = {
		{ "0x8", "5", 0x8, 5 },
		{ "0x8", "31", 0x8, 31 },		/* PMCCNTR_EL0 */
		{ "0x8", "0", 0x8, 0 },
		{ "0x8", "-1", 0x8, CYCLES_IDX_NONE },	/* not placed */
		{ "0x11,0x8", "3 4", 0x8, 4 },		/* by position */
		{ "0x8,0x11", "3 4", 0x8, 3 },
		{ "0x11,0x8", "3 -1", 0x8, CYCLES_IDX_NONE },
		{ "17,8", "2 30", 0x8, 30 },		/* decimal events */
		{ "0x11", "3", 0x8, CYCLES_IDX_NONE },	/* not counted */
		{ "none", "", 0x8, CYCLES_IDX_NONE },
		{ "", "", 0x8, CYCLES_IDX_NONE },
		{ "0x8,0x8", "1 2", 0x8, 1 },		/* the first */
		/* Lists that do not belong together: read again. */
		{ "0x8", "", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x8", "1 2", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x11,0x8", "3", 0x8, CYCLES_IDX_UNKNOWN },
		{ "none", "3", 0x8, CYCLES_IDX_UNKNOWN },
		/* Malformed. */
		{ "0x8", "32", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x8", "-2", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x8", "5x", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x8", "5:0x0008", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x8,", "1", 0x8, CYCLES_IDX_UNKNOWN },
		{ ",0x8", "1", 0x8, CYCLES_IDX_UNKNOWN },
		{ "0x8 0x11", "1 2", 0x8, CYCLES_IDX_UNKNOWN },
		{ "junk", "1", 0x8, CYCLES_IDX_UNKNOWN },
#if defined(__x86_64__) || defined(__i386__)
		/* RDPMC operands: fixed counter n is 2^30 + n. */
		{ "0xc0,0x300", "1073741824 1073741826", 0xc0, 1073741824 },
		{ "0xc0,0x300", "1073741824 1073741826", 0x300, 1073741826 },
		{ "0xc0,0x300", "3 -1", 0x300, CYCLES_IDX_NONE },
		{ "0xc0", "1073741839", 0xc0, 1073741839 },	/* fixed 15 */
		{ "0xc0", "1073741840", 0xc0, CYCLES_IDX_UNKNOWN },
		{ "0xc0", "1073741823", 0xc0, CYCLES_IDX_UNKNOWN },
		{ "0xc0", "3221225473", 0xc0, CYCLES_IDX_UNKNOWN },	/* bit 31 */
		{ "0xc0", "32", 0xc0, CYCLES_IDX_UNKNOWN },
#else
		/* An x86 operand is no arm64 counter. */
		{ "0x8", "1073741825", 0x8, CYCLES_IDX_UNKNOWN },
#endif
	};
	static const struct {
		const char *events;
		int count, pos;
	} lists[] = {
		{ "0x8", 1, 0 }, { "0x11,0x8", 2, 1 }, { "none", 0, -1 },
		{ "", 0, -1 }, { "0x11", 1, -1 }, { "0x8,,0x11", -1, -1 },
		{ "-8", -1, -1 },
	};
	unsigned int i;
	int got, pos;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		got = cycles_event_index(cases[i].events, cases[i].event_index,
					 cases[i].event);
		CHECK(got == cases[i].want,
		      "event_index(\"%s\", \"%s\", %#lx) = %d, want %d",
		      cases[i].events, cases[i].event_index, cases[i].event,
		      got, cases[i].want);
	}
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		got = cycles_parse_events(lists[i].events, 0x8, &pos);
		CHECK(got == lists[i].count && pos == lists[i].pos,
		      "parse_events(\"%s\") = %d pos %d, want %d pos %d",
		      lists[i].events, got, pos, lists[i].count, lists[i].pos);
	}
	CHECK(cycles_index_at(" 7  -1 ", 1, &got) == 2 && got == -1,
	      "index_at with spaces: %d", got);
	CHECK(cycles_index_at("7", 3, &got) == 1 && got == CYCLES_IDX_NONE,
	      "index_at past the end: %d", got);
}

static void check_timer(void)
{
	unsigned long long prev, now, first;
	int i, backwards = 0;

	sync_core();
	first = prev = rdtsc();
	for (i = 0; i < 100000; i++) {
		now = (i & 1) ? rdtscp() : rdtsc();
		if (now < prev)
			backwards++;
		prev = now;
	}
	CHECK(backwards == 0, "rdtsc/rdtscp went backwards %d times", backwards);
	CHECK(prev > first, "rdtsc did not advance over 100000 reads");
	printf("timer_ticks_100k_reads=%llu\n", prev - first);
	printf("timer_frequency=%llu\n", cycles_timer_frequency());
	printf("unhalted_ref_is_timer=%d\n",
#ifdef __aarch64__
	       1
#else
	       0
#endif
	       );
}

static int affinity_count(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -1;
	return CPU_COUNT(&set);
}

static void check_pinning(void)
{
	cpu_set_t old, now;
	int cpu, before = affinity_count();

	CHECK(pin_cpu(&old) == 0, "pin_cpu(&old) failed");
	CHECK(CPU_COUNT(&old) == before, "pin_cpu saved %d CPUs, had %d",
	      CPU_COUNT(&old), before);
	cpu = sched_getcpu();
	CHECK(sched_getaffinity(0, sizeof(now), &now) == 0 &&
	      CPU_COUNT(&now) == 1 && CPU_ISSET(cpu, &now),
	      "after pin_cpu the thread may run on %d CPUs (on CPU %d)",
	      CPU_COUNT(&now), cpu);
#if defined(__x86_64__) || defined(__i386__)
	{
		unsigned int aux = ~0U;

		rdtscp_aux(&aux);
		/* Linux: TSC_AUX = node << 12 | cpu */
		CHECK((int)(aux & 0xfff) == cpu,
		      "rdtscp aux %#x does not name CPU %d", aux, cpu);
	}
#endif
	unpin_cpu(&old);
	CHECK(sched_getaffinity(0, sizeof(now), &now) == 0 &&
	      CPU_EQUAL(&now, &old), "unpin_cpu(&old) did not restore the mask");

	CHECK(pin_cpu(NULL) == 0, "pin_cpu(NULL) failed");
	CHECK(affinity_count() == 1, "pin_cpu(NULL) left %d CPUs",
	      affinity_count());
	unpin_cpu(NULL);
	CHECK(affinity_count() >= before, "unpin_cpu(NULL) allows %d CPUs, had %d",
	      affinity_count(), before);
	printf("cpus=%d\n", before);
}

/*
 * The 2011 names leave errno alone, as 2011's bare instructions did: a
 * fresh thread, so its first call makes the setup system calls (perf,
 * sysfs) that fail here.
 */
static void *errno_avail(void *arg)
{
	errno = 4242;
	perfmon_available();
	*(int *)arg = errno == 4242;
	return NULL;
}

static void *errno_reads(void *arg)
{
	errno = 4243;
	(void)unhalted_core();
	(void)insn_retired();
	(void)unhalted_ref();
	*(int *)arg = errno == 4243;
	return NULL;
}

static void check_errno(void)
{
	pthread_t th;
	int kept[2] = { 0, 0 };

	pthread_create(&th, NULL, errno_avail, &kept[0]);
	pthread_join(th, NULL);
	pthread_create(&th, NULL, errno_reads, &kept[1]);
	pthread_join(th, NULL);
	printf("errno_kept=%d,%d\n", kept[0], kept[1]);
	CHECK(kept[0] && kept[1], "errno changed: perfmon_available() %d, reads %d",
	      kept[0], kept[1]);
}

int main(void)
{
	int avail = perfmon_available();

	printf("perfmon=%d\n", avail);
	CHECK(other_unit_perfmon() == avail,
	      "perfmon_available() differs between translation units");
	if (avail > 0) {
		counter_t a, b;

		/* Only where the header says a read cannot fault. */
		sync_core();
		a = unhalted_core();
		b = unhalted_core();
		printf("cycles_delta=%llu\n", b - a);
		a = insn_retired();
		b = insn_retired();
		printf("insn_delta=%llu\n", b - a);
	}
	check_state();
	check_event_index_parser();
	check_timer();
	check_pinning();
	check_errno();
	printf("failures=%d\n", failures);
	return failures ? 1 : 0;
}
