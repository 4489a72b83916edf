/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cycles.h - read the CPU's cycle and instruction counters from user space,
 * once the simple-pmu module has switched user access on.
 *
 * The API of the 2011 simple-pmu cycles.h, unchanged in names and meaning,
 * on x86-64 and arm64:
 *
 *   counter_t            unsigned long long
 *   perfmon_available()  > 0 if the counters below can be read, else 0
 *   sync_core()          keep work from moving across a counter read
 *   unhalted_core()      core cycles while not halted
 *   insn_retired()       instructions retired
 *   unhalted_ref()       reference cycles (constant rate)
 *   rdtsc(), rdtscp()    time-stamp counter, unordered / after prior work
 *   pin_cpu(), unpin_cpu()  keep the thread on one CPU while measuring
 *
 * and additions for the per-CPU state the driver publishes:
 *
 *   cycles_generation()  this CPU's generation: a measurement is valid only
 *                        if it is the same before and after (below)
 *   cycles_refresh()     forget what was read from sysfs and read it again
 *                        (0; -1 if the driver publishes no placement, as
 *                        without the module or with a driver older than
 *                        this header)
 *   cycles_unavailable_reason()  NULL when perfmon_available() is > 0, else
 *                        a short text naming the check that failed
 *
 * Both architectures: the driver takes its counters from perf (pinned
 * per-CPU kernel events), and perf decides, per CPU, which hardware counter
 * each one lands in. The driver publishes that in sysfs, per CPU:
 *   cpuN/cycle_index   the counter of core cycles, -1 = none
 *   cpuN/event_index   one such index per entry of `events`, same order
 *   cpuN/generation    changes with any of them, when the CPU goes offline
 *                      and online, when settings change, and when perf
 *                      reloads a counter
 * sysfs is read once and cached: when every CPU has the same indices (the
 * usual case) a read costs a compare and the read instruction; otherwise
 * it looks the current CPU up (sched_getcpu()) first.
 *
 * x86-64: an index is the ECX operand of RDPMC: 1073741824 + n (bit 30)
 * for fixed counter n, n for general counter n. unhalted_core() is RDPMC
 * of this CPU's cycle_index; insn_retired() of the index at the position
 * of event 0xc0 (INST_RETIRED.ANY) in `events`; unhalted_ref() of the one
 * at the position of 0x300 (CPU_CLK_UNHALTED.REF_TSC; x86 `events` are in
 * perf's raw encoding event | umask << 8). unhalted_ref() returns 0 where
 * the driver publishes no 0x300 (a CPU without fixed counter 2). Where the
 * driver publishes no counter for this CPU at all (module not loaded, CPU
 * not placed), unhalted_core() and insn_retired() read the counters of
 * 2011, fixed counters 1 and 0, which faults where user RDPMC is off.
 * rdtsc/rdtscp read the TSC. perfmon_available() returns the architectural
 * perfmon version (sysfs pmu_version, else CPUID leaf 0xA) when the module
 * is loaded, rdpmc_fixed (where present) is 1, user RDPMC is allowed (the
 * cpu PMU's rdpmc attribute is 2: /sys/bus/event_source/devices/cpu/rdpmc,
 * cpu_core/rdpmc and cpu_atom/rdpmc on hybrid parts; none: an older kernel,
 * allowed), cpuN/user_access (where present) is 1 and this CPU has a
 * cycle counter (cycle_index >= 0); it re-reads the cached state. Counter
 * values belong to perf: within one generation b - a is exact.
 *
 * arm64: the driver's events are CPU_CYCLES and the configured events (by
 * default INST_RETIRED, 0x08). An index is 31 for PMCCNTR_EL0, n for
 * PMEVCNTR<n>_EL0. unhalted_core() reads the counter at this CPU's
 * cycle_index, and insn_retired() the one at the position of event 0x08
 * (INST_RETIRED) in event_index; it returns 0 if the driver counts no such
 * event. Both read the register directly (mrs), never through PMSELR_EL0.
 * rdtsc, rdtscp and unhalted_ref read the generic timer CNTVCT_EL0
 * (CNTFRQ_EL0 Hz). perfmon_available() returns the PMU version (sysfs
 * pmu_version: 1 = PMUv3, 4 = v3p1, ...) when the module is loaded,
 * user_access is 1 and this CPU has a cycle counter (cycle_index >= 0); it
 * re-reads the cached state.
 *
 * Widths (arm64): counter values belong to perf. PMCCNTR_EL0 (index 31) is
 * 64 bits wide and starts near 2^63; an event counter is event_width bits
 * (sysfs: 32, or 64 with PMUv3p5 long counters), and perf reloads a 32-bit
 * one at 2^31 (a new generation). Only the difference of two readings taken
 * within one generation means anything, taken modulo 2^width; for a 64-bit
 * counter that is plain counter_t subtraction, for a 32-bit one mask it:
 * (b - a) & 0xffffffff.
 *
 * Measuring (both architectures):
 *
 *	pin_cpu(&old);
 *	g = cycles_generation();	// also brings the cached indices of
 *	a = insn_retired();		// this CPU up to date
 *	work();
 *	b = insn_retired();
 *	if (cycles_generation() != g)	// moved, reloaded, CPU replugged,
 *		retry or discard;	// settings changed: b - a is junk
 *	unpin_cpu(&old);
 *
 * Nothing checks the generation on every read (that would be a system call
 * per read): a program that reads without calling cycles_generation() or
 * perfmon_available() keeps using the indices it read first, even after perf
 * moved a counter. The cache is per translation unit and not locked: fill it
 * (perfmon_available(), cycles_refresh()) before threads start reading.
 *
 * A counter read where user access is off faults (SIGSEGV on x86, SIGILL on
 * arm64), as in 2011: call perfmon_available() first. It never faults.
 * Counters are per CPU: pin the thread (pin_cpu) around a measurement. On
 * arm64 a CPU whose cycle_index is -1 (the driver's events are not on a
 * counter there, or the CPU is offline) has user access closed: a read
 * there faults, or insn_retired() returns 0. On x86 user RDPMC is one
 * switch for the whole machine: there a read of a counter that is not the
 * driver's may return perf's count of something else instead of faulting.
 *
 * arm64 and perf: whenever any perf event (perf stat, perf record, another
 * program's perf_event_open, even a failed trial of it) is scheduled on a
 * CPU, the kernel (from 5.17) clears PMUSERENR_EL0 there, and until the
 * module's deferrable timer opens user access again, reads on that CPU die
 * with SIGILL even though perfmon_available() says > 0: for up to
 * 2 * recheck_ms (sysfs recheck_ms, default 100 ms) after perf stopped
 * using that CPU while the CPU is busy. sysfs `cpus` lists the CPUs where
 * reads are allowed right now. Programs that use perf themselves should let
 * that time pass (or test a read in a child process) before reading; the
 * Python package's reads catch the fault instead (simple_pmu.CounterFault).
 *
 * Define _GNU_SOURCE before the first #include of the file that includes
 * this header (sched_getcpu() and the CPU_SET macros need it). Define
 * CYCLES_SYSFS_DIR (the driver's directory) or CYCLES_EVENT_SOURCE_DIR
 * (x86: where the cpu PMU's rdpmc attribute is) before including it to
 * read other directories (tests).
 */
#ifndef CYCLES_H
#define CYCLES_H 1

/* glibc decides on GNU extensions at its first header; too late after it. */
#if (defined(_SCHED_H) || defined(_FEATURES_H)) && !defined(__USE_GNU)
#error "cycles.h: add #define _GNU_SOURCE 1 before the first #include"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !defined(__x86_64__) && !defined(__i386__) && !defined(__aarch64__)
#error "cycles.h supports x86-64 and arm64 only"
#endif

typedef unsigned long long counter_t;

/* Present while the module is loaded; the 2011 path. */
#ifndef CYCLES_SYSFS_DIR
#define CYCLES_SYSFS_DIR	"/sys/devices/system/simple-pmu/simple-pmu0"
#endif

#define CYCLES_INLINE		inline __attribute__((always_inline))

/* arm64 event counters are PMEVCNTR0_EL0..PMEVCNTR30_EL0. */
#define CYCLES_MAX_EVENT_COUNTER	30
/* Index 31 in cycle_index / event_index: PMCCNTR_EL0, always 64 bits. */
#define CYCLES_CYCLE_COUNTER		31

#if defined(__x86_64__) || defined(__i386__)
/* Where the cpu PMU's rdpmc attribute is (cpu, or cpu_core/cpu_atom). */
#ifndef CYCLES_EVENT_SOURCE_DIR
#define CYCLES_EVENT_SOURCE_DIR	"/sys/bus/event_source/devices"
#endif
/* RDPMC ECX bit 30 selects the fixed-function counters. */
#define CYCLES_RDPMC_FIXED		(1U << 30)
/* The highest general and fixed counter numbers an index may name. */
#define CYCLES_MAX_GP_COUNTER		31
#define CYCLES_MAX_FIXED_COUNTER	15
/* Events of `events`, in perf's x86 raw encoding event | umask << 8. */
#define CYCLES_EVENT_INST_RETIRED	0xc0	/* INST_RETIRED.ANY */
#define CYCLES_EVENT_REF_CYCLES		0x300	/* CPU_CLK_UNHALTED.REF_TSC */
#else
/* The architected INST_RETIRED event, counted by default by the driver. */
#define CYCLES_EVENT_INST_RETIRED	0x08
#endif

/* The cached index of a counter, when it is not a counter: */
#define CYCLES_IDX_NONE		(-1)	/* none: not placed, not counted */
#define CYCLES_IDX_UNKNOWN	(-2)	/* sysfs not read yet */
#define CYCLES_IDX_PER_CPU	(-3)	/* CPUs differ: look this one up */

/* CPUs the cache holds (pin_cpu()'s cpu_set_t holds as many). */
#ifndef CYCLES_MAX_CPUS
#define CYCLES_MAX_CPUS		CPU_SETSIZE
#endif

/* A CPU's placement is re-read this often when it changes while read. */
#define CYCLES_READ_TRIES	4

/*
 * Read a small sysfs file into buf as a NUL-terminated string without its
 * trailing newline. Returns its length, or -1 if it cannot be read.
 */
static inline int cycles_read_file(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return (int)n;
}

/* An attribute of the driver's sysfs directory, as cycles_read_file(). */
static inline int cycles_read_attr(const char *name, char *buf, size_t size)
{
	char path[sizeof(CYCLES_SYSFS_DIR) + 64];
	size_t dir_len = sizeof(CYCLES_SYSFS_DIR) - 1;
	size_t name_len = strlen(name);

	if (name_len + dir_len + 2 > sizeof(path))
		return -1;
	memcpy(path, CYCLES_SYSFS_DIR, dir_len);
	path[dir_len] = '/';
	memcpy(path + dir_len + 1, name, name_len + 1);
	return cycles_read_file(path, buf, size);
}

/* Attribute `name` of directory cpuN, as cycles_read_file(). */
static inline int cycles_read_cpu_attr(int cpu, const char *name, char *buf,
				       size_t size)
{
	char rel[64];
	int n = snprintf(rel, sizeof(rel), "cpu%d/%s", cpu, name);

	if (n < 0 || (size_t)n >= sizeof(rel))
		return -1;
	return cycles_read_attr(rel, buf, size);
}

/*
 * A decimal attribute; def if it is absent (an older driver), -1 if it
 * holds anything but a number.
 */
static inline long cycles_attr_long(const char *name, long def)
{
	char buf[32], *end;
	long v;

	if (cycles_read_attr(name, buf, sizeof(buf)) < 0)
		return def;
	v = strtol(buf, &end, 0);
	if (end == buf || *end != '\0')
		return -1;
	return v;
}

/*
 * Parsers of the driver's attributes. Plain C: tested on any host.
 */

/*
 * Walk an `events` list ("0x8", "0x8,0x11", "none", ""): returns its
 * number of entries (0 for "none" or ""), or -1 if it is malformed; *pos
 * gets the position of @event in it (0 for the first), -1 if absent or
 * malformed.
 */
static inline int cycles_parse_events(const char *events, unsigned long event,
				      int *pos)
{
	const char *p = events;
	unsigned long ev;
	int n = 0;
	char *end;

	*pos = -1;
	if (!strcmp(events, "none") || !*events)
		return 0;
	for (;;) {
		if (*p < '0' || *p > '9')
			break;
		ev = strtoul(p, &end, 0);
		if (end == p || (*end != ',' && *end != '\0'))
			break;
		if (ev == event && *pos < 0)
			*pos = n;
		n++;
		if (!*end)
			return n;
		p = end + 1;
	}
	*pos = -1;
	return -1;
}

/* Position of @event in an `events` list; -1 if absent or malformed. */
static inline int cycles_event_position(const char *events,
					unsigned long event)
{
	int pos;

	return cycles_parse_events(events, event, &pos) < 0 ? -1 : pos;
}

/*
 * Whether @v is a counter index of this architecture or -1 (none). x86:
 * the RDPMC operand, n for general counter n, 1073741824 + n (bit 30) for
 * fixed counter n. arm64: 31 for PMCCNTR_EL0, n for PMEVCNTR<n>_EL0.
 */
static inline int cycles_index_valid(long v)
{
#if defined(__x86_64__) || defined(__i386__)
	const long fixed = (long)CYCLES_RDPMC_FIXED;

	return v == CYCLES_IDX_NONE ||
	       (v >= 0 && v <= CYCLES_MAX_GP_COUNTER) ||
	       (v >= fixed && v <= fixed + CYCLES_MAX_FIXED_COUNTER);
#else
	return v >= CYCLES_IDX_NONE && v <= CYCLES_CYCLE_COUNTER;
#endif
}

/*
 * A counter index in decimal (cycles_index_valid()); anything else is
 * malformed. 0 with *idx set, or -1.
 */
static inline int cycles_parse_index(const char *s, const char **endp,
				     int *idx)
{
	char *end;
	long v;

	if (!(*s == '-' || (*s >= '0' && *s <= '9')))
		return -1;
	v = strtol(s, &end, 10);
	if (end == s || !cycles_index_valid(v))
		return -1;
	*idx = (int)v;
	if (endp)
		*endp = end;
	return 0;
}

/*
 * Entry @pos of an event_index list ("3 4", "-1 2", "" for none) into
 * *idx. Returns the number of entries of the list (so the caller can
 * check it against `events`), or -1 if it is malformed; *idx is
 * CYCLES_IDX_NONE if @pos is negative or past the end.
 */
static inline int cycles_index_at(const char *list, int pos, int *idx)
{
	const char *p = list;
	int n = 0, v;

	*idx = CYCLES_IDX_NONE;
	for (;;) {
		while (*p == ' ')
			p++;
		if (!*p)
			return n;
		if (cycles_parse_index(p, &p, &v) < 0 ||
		    (*p != ' ' && *p != '\0'))
			return -1;
		if (n == pos)
			*idx = v;
		n++;
	}
}

/*
 * The counter index of @event on a CPU, from `events` and that CPU's
 * event_index: CYCLES_IDX_NONE if the event is not counted or not placed
 * there; CYCLES_IDX_UNKNOWN if the two lists do not belong together
 * (different lengths, malformed): read them again.
 */
static inline int cycles_event_index(const char *events,
				     const char *event_index,
				     unsigned long event)
{
	int pos, idx, count = cycles_parse_events(events, event, &pos);

	if (count < 0 || cycles_index_at(event_index, pos, &idx) != count)
		return CYCLES_IDX_UNKNOWN;
	return idx;
}

/*
 * The cache of what the driver published: per CPU the index of the cycle
 * counter, of INST_RETIRED and (x86) of the reference cycles, with the
 * generation they belong to, and the indices every CPU shares (or
 * CYCLES_IDX_PER_CPU, CYCLES_IDX_NONE, CYCLES_IDX_UNKNOWN).
 */
struct cycles_cpu_state {
	int cycle;
	int insn;
	int ref;			/* arm64: always CYCLES_IDX_NONE */
	unsigned long generation;	/* 0: could not be read */
};

struct cycles_state {
	int cycle;
	int insn;
	int ref;
	int nr_cpus;			/* entries of cpu[] read */
	struct cycles_cpu_state cpu[CYCLES_MAX_CPUS];
};

/* One per translation unit that uses it. */
static inline struct cycles_state *cycles_state(void)
{
	static struct cycles_state st = {
		CYCLES_IDX_UNKNOWN, CYCLES_IDX_UNKNOWN, CYCLES_IDX_UNKNOWN, 0,
		{ { 0, 0, 0, 0 } }
	};

	return &st;
}

/* cpuN/generation, or 0 if it cannot be read. */
static inline unsigned long cycles_cpu_generation(int cpu)
{
	char buf[32], *end;
	unsigned long v;

	if (cycles_read_cpu_attr(cpu, "generation", buf, sizeof(buf)) <= 0)
		return 0;
	v = strtoul(buf, &end, 10);
	return *end ? 0 : v;
}

/*
 * One CPU's indices as of one generation, into *c: the generation is read
 * before and after, and `events` (which the driver's lock orders with the
 * placement) by the caller around it. 0, or -1 with *c set to none.
 */
static inline int cycles_read_cpu(int cpu, const char *events,
				  struct cycles_cpu_state *c)
{
	char cyc[16], evi[256];
	unsigned long gen;
	const char *end;
	int tries, insn, ref, cycle;

	for (tries = 0; tries < CYCLES_READ_TRIES; tries++) {
		gen = cycles_cpu_generation(cpu);
		if (!gen || cycles_read_cpu_attr(cpu, "cycle_index", cyc,
						 sizeof(cyc)) < 0 ||
		    cycles_read_cpu_attr(cpu, "event_index", evi,
					 sizeof(evi)) < 0)
			break;
		if (cycles_parse_index(cyc, &end, &cycle) < 0 || *end)
			break;
		/* No cycle counter: user access is closed, events or not. */
		insn = cycle < 0 ? CYCLES_IDX_NONE :
		       cycles_event_index(events, evi,
					  CYCLES_EVENT_INST_RETIRED);
#ifdef CYCLES_EVENT_REF_CYCLES
		ref = cycle < 0 ? CYCLES_IDX_NONE :
		      cycles_event_index(events, evi, CYCLES_EVENT_REF_CYCLES);
#else
		ref = CYCLES_IDX_NONE;
#endif
		/* One list, two lookups: both UNKNOWN or neither. */
		if (insn != CYCLES_IDX_UNKNOWN &&
		    cycles_cpu_generation(cpu) == gen) {
			c->cycle = cycle;
			c->insn = insn;
			c->ref = ref;
			c->generation = gen;
			return 0;
		}
	}
	c->cycle = c->insn = c->ref = CYCLES_IDX_NONE;
	c->generation = 0;
	return -1;
}

/*
 * The indices every CPU with a cycle counter shares into st->cycle,
 * st->insn and st->ref; CYCLES_IDX_PER_CPU if they differ, CYCLES_IDX_NONE
 * if no CPU has one. CPUs without one (offline, not placed) do not count:
 * user access is closed there, so a read faults whatever index it uses
 * (arm64; on x86 it may read another counter instead: see the top of the
 * file), and perfmon_available() is 0 there.
 */
static inline void cycles_settle(struct cycles_state *st)
{
	int cpu, cycle = CYCLES_IDX_NONE, insn = CYCLES_IDX_NONE;
	int ref = CYCLES_IDX_NONE, seen = 0;

	for (cpu = 0; cpu < st->nr_cpus; cpu++) {
		const struct cycles_cpu_state *c = &st->cpu[cpu];

		if (c->cycle < 0)
			continue;
		if (!seen++) {
			cycle = c->cycle;
			insn = c->insn;
			ref = c->ref;
		} else if (c->cycle != cycle || c->insn != insn ||
			   c->ref != ref) {
			cycle = insn = ref = CYCLES_IDX_PER_CPU;
			break;
		}
	}
	st->cycle = cycle;
	st->insn = insn;
	st->ref = ref;
}

/* 1 + the highest N of the cpuN directories; 0 if there are none. */
static inline int cycles_count_cpus(void)
{
	struct dirent *d;
	DIR *dir = opendir(CYCLES_SYSFS_DIR);
	int nr = 0, n;
	char *end;

	if (!dir)
		return 0;
	while ((d = readdir(dir)) != NULL) {
		if (strncmp(d->d_name, "cpu", 3) || d->d_name[3] < '0' ||
		    d->d_name[3] > '9')
			continue;
		n = (int)strtol(d->d_name + 3, &end, 10);
		if (!*end && n >= nr && n < CYCLES_MAX_CPUS)
			nr = n + 1;
	}
	closedir(dir);
	return nr;
}

/*
 * Forget the cache and read every CPU's indices again. 0, or -1 if the
 * driver's directory (or its `events`) cannot be read: then no CPU has
 * counters (the module is not loaded, or is older than this header).
 */
static inline int cycles_refresh(void)
{
	struct cycles_state *st = cycles_state();
	char before[256], after[256];
	int cpu, tries;

	for (tries = 0; tries < CYCLES_READ_TRIES; tries++) {
		st->nr_cpus = 0;
		if (cycles_read_attr("events", before, sizeof(before)) < 0)
			break;
		st->nr_cpus = cycles_count_cpus();
		for (cpu = 0; cpu < st->nr_cpus; cpu++)
			cycles_read_cpu(cpu, before, &st->cpu[cpu]);
		/* Settings changed meanwhile: the positions may not match. */
		if (cycles_read_attr("events", after, sizeof(after)) >= 0 &&
		    !strcmp(before, after)) {
			cycles_settle(st);
			return st->nr_cpus ? 0 : -1;
		}
	}
	st->nr_cpus = 0;
	cycles_settle(st);
	return -1;
}

/* The cache, read first if it has not been. */
static inline struct cycles_state *cycles_loaded_state(void)
{
	struct cycles_state *st = cycles_state();

	if (st->cycle == CYCLES_IDX_UNKNOWN)
		cycles_refresh();
	return st;
}

/*
 * What the cache holds for @cpu: its cycle and INST_RETIRED counter
 * indices (CYCLES_IDX_NONE if none) and their generation (0 if unknown).
 * Returns 0, or -1 if the driver publishes nothing for @cpu.
 */
static inline int cycles_cpu_indices(int cpu, int *cycle, int *insn,
				     unsigned long *generation)
{
	struct cycles_state *st = cycles_loaded_state();
	int known = cpu >= 0 && cpu < st->nr_cpus;

	if (cycle)
		*cycle = known ? st->cpu[cpu].cycle : CYCLES_IDX_NONE;
	if (insn)
		*insn = known ? st->cpu[cpu].insn : CYCLES_IDX_NONE;
	if (generation)
		*generation = known ? st->cpu[cpu].generation : 0;
	return known ? 0 : -1;
}

/*
 * This CPU's generation, read from sysfs (0 if it cannot be read). If it
 * is not the one the cache holds for this CPU, this CPU's indices are read
 * again first, and the generation they belong to is returned. See the top
 * of the file for how to use it around a measurement (pinned).
 */
static inline unsigned long cycles_generation(void)
{
	struct cycles_state *st = cycles_loaded_state();
	char events[256];
	unsigned long gen;
	int cpu = sched_getcpu();

	if (cpu < 0)
		return 0;
	gen = cycles_cpu_generation(cpu);
	if (gen && !st->nr_cpus) {	/* loaded since the cache was filled */
		cycles_refresh();
		return cpu < st->nr_cpus ? st->cpu[cpu].generation : gen;
	}
	if (!gen || cpu >= st->nr_cpus || st->cpu[cpu].generation == gen)
		return gen;
	if (cycles_read_attr("events", events, sizeof(events)) < 0 ||
	    cycles_read_cpu(cpu, events, &st->cpu[cpu]) < 0) {
		cycles_settle(st);
		return gen;
	}
	cycles_settle(st);
	return st->cpu[cpu].generation;
}

/* The index the counter reads below use on this CPU (shared or its own). */
static inline int cycles_cycle_index(void)
{
	struct cycles_state *st = cycles_loaded_state();
	int idx;

	if (st->cycle != CYCLES_IDX_PER_CPU)
		return st->cycle;
	cycles_cpu_indices(sched_getcpu(), &idx, NULL, NULL);
	return idx;
}

static inline int cycles_insn_index(void)
{
	struct cycles_state *st = cycles_loaded_state();
	int idx;

	if (st->insn != CYCLES_IDX_PER_CPU)
		return st->insn;
	cycles_cpu_indices(sched_getcpu(), NULL, &idx, NULL);
	return idx;
}

/* x86: the reference cycles' index here; arm64: always CYCLES_IDX_NONE. */
static inline int cycles_ref_index(void)
{
	struct cycles_state *st = cycles_loaded_state();
	int cpu;

	if (st->ref != CYCLES_IDX_PER_CPU)
		return st->ref;
	cpu = sched_getcpu();
	return cpu >= 0 && cpu < st->nr_cpus ? st->cpu[cpu].ref :
	       CYCLES_IDX_NONE;
}

#if defined(__x86_64__) || defined(__i386__)

/* The fixed counters of 2011, read where the driver publishes nothing. */
#define CYCLES_FIXED_INST_RETIRED	0	/* INST_RETIRED.ANY */
#define CYCLES_FIXED_CORE_CYCLES	1	/* CPU_CLK_UNHALTED.THREAD */
#define CYCLES_FIXED_REF_CYCLES		2	/* CPU_CLK_UNHALTED.REF_TSC */

/* CPUID leaf 0xA, architectural performance monitoring */
#define CYCLES_CPUID_PERFMON		0xa

/* The cpu PMU's rdpmc attribute; cpu_core and cpu_atom on hybrid parts. */
#define CYCLES_RDPMC_ATTR	CYCLES_EVENT_SOURCE_DIR "/cpu/rdpmc"
#define CYCLES_RDPMC_ATTR_CORE	CYCLES_EVENT_SOURCE_DIR "/cpu_core/rdpmc"
#define CYCLES_RDPMC_ATTR_ATOM	CYCLES_EVENT_SOURCE_DIR "/cpu_atom/rdpmc"
#define CYCLES_RDPMC_ALWAYS	2

/* ECX is an input too: leaves 0x7, 0xB, 0x23... have subleaves. */
static inline void cycles_cpuid(unsigned int leaf, unsigned int subleaf,
				unsigned int regs[4])
{
	__asm__ __volatile__("cpuid"
			     : "=a" (regs[0]), "=b" (regs[1]),
			       "=c" (regs[2]), "=d" (regs[3])
			     : "0" (leaf), "2" (subleaf));
}

/*
 * LFENCE waits until every earlier instruction has completed locally and
 * keeps later ones from starting, so RDPMC/RDTSC cannot move across it.
 */
static CYCLES_INLINE void sync_core(void)
{
	__asm__ __volatile__("lfence" : : : "memory");
}

static CYCLES_INLINE counter_t cycles_rdpmc(unsigned int counter)
{
	unsigned int lo, hi;

	__asm__ __volatile__("rdpmc" : "=a" (lo), "=d" (hi) : "c" (counter)
			     : "memory");
	return ((counter_t)hi << 32) | lo;
}

/*
 * The counter at this CPU's cycle_index. Where the driver publishes none
 * (module not loaded, CPU not placed) this reads fixed counter 1 as in
 * 2011: it faults where user RDPMC is off.
 */
static CYCLES_INLINE counter_t unhalted_core(void)
{
	int idx = cycles_state()->cycle;

	if (__builtin_expect(idx < 0, 0)) {
		idx = cycles_cycle_index();
		if (idx < 0)
			idx = (int)(CYCLES_RDPMC_FIXED |
				    CYCLES_FIXED_CORE_CYCLES);
	}
	return cycles_rdpmc((unsigned int)idx);
}

/*
 * The counter of event 0xc0 (INST_RETIRED.ANY) on this CPU; fixed counter
 * 0, as in 2011, where the driver publishes none.
 */
static CYCLES_INLINE counter_t insn_retired(void)
{
	int idx = cycles_state()->insn;

	if (__builtin_expect(idx < 0, 0)) {
		idx = cycles_insn_index();
		if (idx < 0)
			idx = (int)(CYCLES_RDPMC_FIXED |
				    CYCLES_FIXED_INST_RETIRED);
	}
	return cycles_rdpmc((unsigned int)idx);
}

/*
 * The counter of event 0x300 (CPU_CLK_UNHALTED.REF_TSC) on this CPU; 0
 * where the driver publishes none (e.g. a CPU without fixed counter 2).
 */
static CYCLES_INLINE counter_t unhalted_ref(void)
{
	int idx = cycles_state()->ref;

	if (__builtin_expect(idx < 0, 0)) {
		idx = cycles_ref_index();
		if (idx < 0)
			return 0;
	}
	return cycles_rdpmc((unsigned int)idx);
}

/* Lots of caveats: the TSC counts time, not cycles, and is not ordered. */
static CYCLES_INLINE unsigned long long rdtsc(void)
{
	unsigned int lo, hi;

	__asm__ __volatile__("rdtsc" : "=a" (lo), "=d" (hi) : : "memory");
	return ((unsigned long long)hi << 32) | lo;
}

/*
 * RDTSCP waits for earlier instructions and also returns IA32_TSC_AUX in
 * ECX (Linux stores the CPU and node number there): *aux gets it.
 */
static CYCLES_INLINE unsigned long long rdtscp_aux(unsigned int *aux)
{
	unsigned int lo, hi, c;

	__asm__ __volatile__("rdtscp" : "=a" (lo), "=d" (hi), "=c" (c)
			     : : "memory");
	if (aux)
		*aux = c;
	return ((unsigned long long)hi << 32) | lo;
}

static CYCLES_INLINE unsigned long long rdtscp(void)
{
	return rdtscp_aux(NULL);
}

/*
 * A user RDPMC outside a task that mmapped a perf event faults unless the
 * cpu PMU's rdpmc attribute is 2 (kernels from 4.0 clear CR4.PCE on every
 * switch to another mm otherwise). Hybrid parts have cpu_core and cpu_atom
 * instead of cpu: every one present must be 2. None: an older kernel,
 * where the driver's CR4.PCE stays.
 */
static inline int cycles_rdpmc_allowed(void)
{
	static const char *const attrs[] = {
		CYCLES_RDPMC_ATTR, CYCLES_RDPMC_ATTR_CORE, CYCLES_RDPMC_ATTR_ATOM
	};
	char buf[16], *end;
	unsigned int i;

	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		if (cycles_read_file(attrs[i], buf, sizeof(buf)) < 0)
			continue;
		if (strtol(buf, &end, 10) != CYCLES_RDPMC_ALWAYS || *end)
			return 0;
	}
	return 1;
}

/* The architectural perfmon version: sysfs pmu_version, else CPUID 0xA. */
static inline int cycles_perfmon_version(void)
{
	unsigned int regs[4];
	long version = cycles_attr_long("pmu_version", 0);

	if (version > 0)
		return (int)version;
	cycles_cpuid(0, 0, regs);
	if (regs[0] < CYCLES_CPUID_PERFMON)
		return 0;
	cycles_cpuid(CYCLES_CPUID_PERFMON, 0, regs);
	return (int)(regs[0] & 0xff);
}

/*
 * NULL when this CPU's counters can be read (perfmon_available() > 0), else
 * which check failed: the module is loaded, has its counters on
 * (rdpmc_fixed 1, where present), user RDPMC is allowed, this CPU's
 * user_access (where present) is 1 and it has a cycle counter. Re-reads
 * the cache (cycles_refresh()). Never faults.
 */
static inline const char *cycles_unavailable_reason(void)
{
	char buf[16];
	int cpu, cycle;

	if (access(CYCLES_SYSFS_DIR, R_OK) < 0)
		return "module not loaded";
	if (cycles_attr_long("rdpmc_fixed", 1) != 1)
		return "rdpmc_fixed is not 1";
	if (!cycles_rdpmc_allowed())
		return "the cpu PMU's rdpmc is not 2";
	if (cycles_refresh() < 0)
		return "no counter placement published";
	cpu = sched_getcpu();
	if (cycles_read_cpu_attr(cpu, "user_access", buf, sizeof(buf)) >= 0 &&
	    strcmp(buf, "1"))
		return "user_access of this CPU is not 1";
	if (cycles_cpu_indices(cpu, &cycle, NULL, NULL) < 0 || cycle < 0)
		return "no cycle counter on this CPU";
	if (cycles_perfmon_version() <= 0)
		return "no architectural perfmon";
	return NULL;
}

/*
 * > 0 (the architectural perfmon version) when the driver's counters can
 * be read on this CPU (cycles_unavailable_reason() is NULL); 0 otherwise.
 */
static inline int perfmon_available(void)
{
	if (cycles_unavailable_reason())
		return 0;
	return cycles_perfmon_version();
}

/*
 * Frequency of rdtsc() in Hz when the CPU or hypervisor states it: CPUID
 * leaf 0x15 (crystal clock times TSC/crystal ratio), else the hypervisor
 * timing leaf 0x40000010 (KVM, VMware: EAX in kHz). 0 if neither does.
 */
static inline unsigned long long cycles_timer_frequency(void)
{
	unsigned int regs[4];

	cycles_cpuid(0, 0, regs);
	if (regs[0] >= 0x15) {
		cycles_cpuid(0x15, 0, regs);
		if (regs[0] && regs[1] && regs[2])
			return (unsigned long long)regs[2] * regs[1] / regs[0];
	}
	cycles_cpuid(1, 0, regs);
	if (regs[2] & (1U << 31)) {	/* hypervisor present */
		cycles_cpuid(0x40000000, 0, regs);
		if (regs[0] >= 0x40000010) {
			cycles_cpuid(0x40000010, 0, regs);
			if (regs[0])
				return (unsigned long long)regs[0] * 1000;
		}
	}
	return 0;
}

#elif defined(__aarch64__)

/* ISB: later instructions wait for earlier ones to complete. */
static CYCLES_INLINE void sync_core(void)
{
	__asm__ __volatile__("isb" : : : "memory");
}

static CYCLES_INLINE counter_t cycles_read_pmccntr(void)
{
	counter_t v;

	__asm__ __volatile__("mrs %0, pmccntr_el0" : "=r" (v) : : "memory");
	return v;
}

#define CYCLES_PMEVCNTR_CASE(n)						\
	case n:								\
		__asm__ __volatile__("mrs %0, pmevcntr" #n "_el0"	\
				     : "=r" (v) : : "memory");		\
		break

/*
 * Event counter n, read directly: going through PMSELR_EL0 and
 * PMXEVCNTR_EL0 would race with any other user of PMSELR on this CPU.
 * Returns 0 for n out of range.
 */
static CYCLES_INLINE counter_t cycles_read_pmevcntr(unsigned int n)
{
	counter_t v = 0;

	switch (n) {
	CYCLES_PMEVCNTR_CASE(0); CYCLES_PMEVCNTR_CASE(1);
	CYCLES_PMEVCNTR_CASE(2); CYCLES_PMEVCNTR_CASE(3);
	CYCLES_PMEVCNTR_CASE(4); CYCLES_PMEVCNTR_CASE(5);
	CYCLES_PMEVCNTR_CASE(6); CYCLES_PMEVCNTR_CASE(7);
	CYCLES_PMEVCNTR_CASE(8); CYCLES_PMEVCNTR_CASE(9);
	CYCLES_PMEVCNTR_CASE(10); CYCLES_PMEVCNTR_CASE(11);
	CYCLES_PMEVCNTR_CASE(12); CYCLES_PMEVCNTR_CASE(13);
	CYCLES_PMEVCNTR_CASE(14); CYCLES_PMEVCNTR_CASE(15);
	CYCLES_PMEVCNTR_CASE(16); CYCLES_PMEVCNTR_CASE(17);
	CYCLES_PMEVCNTR_CASE(18); CYCLES_PMEVCNTR_CASE(19);
	CYCLES_PMEVCNTR_CASE(20); CYCLES_PMEVCNTR_CASE(21);
	CYCLES_PMEVCNTR_CASE(22); CYCLES_PMEVCNTR_CASE(23);
	CYCLES_PMEVCNTR_CASE(24); CYCLES_PMEVCNTR_CASE(25);
	CYCLES_PMEVCNTR_CASE(26); CYCLES_PMEVCNTR_CASE(27);
	CYCLES_PMEVCNTR_CASE(28); CYCLES_PMEVCNTR_CASE(29);
	CYCLES_PMEVCNTR_CASE(30);
	default:
		break;
	}
	return v;
}

/* The counter of a cycle_index / event_index entry: 31 or PMEVCNTR<idx>. */
static CYCLES_INLINE counter_t cycles_read_counter(int idx)
{
	if (idx == CYCLES_CYCLE_COUNTER)
		return cycles_read_pmccntr();
	return cycles_read_pmevcntr((unsigned int)idx);
}

/*
 * Where the driver publishes no cycle counter for this CPU (module not
 * loaded, CPU not placed) this reads PMCCNTR_EL0 all the same: user access
 * is closed there, so it faults, as every read did in 2011 without the
 * module.
 */
static CYCLES_INLINE counter_t unhalted_core(void)
{
	int idx = cycles_state()->cycle;

	if (__builtin_expect(idx < 0, 0)) {
		idx = cycles_cycle_index();
		if (idx < 0)
			idx = CYCLES_CYCLE_COUNTER;
	}
	return cycles_read_counter(idx);
}

/* 0 where the driver counts no INST_RETIRED on this CPU. */
static CYCLES_INLINE counter_t insn_retired(void)
{
	int idx = cycles_state()->insn;

	if (__builtin_expect(idx < 0, 0)) {
		idx = cycles_insn_index();
		if (idx < 0)
			return 0;
	}
	return cycles_read_counter(idx);
}

/*
 * The generic timer's virtual count: constant rate (CNTFRQ_EL0), readable
 * at EL0 on Linux. Unordered, like RDTSC; use sync_core() or rdtscp().
 */
static CYCLES_INLINE unsigned long long rdtsc(void)
{
	unsigned long long v;

	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r" (v) : : "memory");
	return v;
}

/* As RDTSCP: wait for earlier instructions before reading. */
static CYCLES_INLINE unsigned long long rdtscp(void)
{
	unsigned long long v;

	__asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r" (v) : : "memory");
	return v;
}

/* arm64 has no reference-cycles counter: the generic timer is the closest. */
static CYCLES_INLINE counter_t unhalted_ref(void)
{
	return rdtsc();
}

/* Frequency of rdtsc() in Hz, from CNTFRQ_EL0 (set by firmware). */
static inline unsigned long long cycles_timer_frequency(void)
{
	unsigned long long v;

	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r" (v));
	return v;
}

/*
 * NULL when this CPU's counters can be read (perfmon_available() > 0), else
 * which check failed: the module is loaded, grants user access
 * (user_access 1) and holds a cycle counter on this CPU (cpuN/cycle_index
 * >= 0). Re-reads the cache (cycles_refresh()). Never faults.
 */
static inline const char *cycles_unavailable_reason(void)
{
	int cycle;

	if (access(CYCLES_SYSFS_DIR, R_OK) < 0)
		return "module not loaded";
	if (cycles_attr_long("user_access", 0) != 1)
		return "user_access is not 1";
	if (cycles_refresh() < 0)
		return "no counter placement published";
	if (cycles_cpu_indices(sched_getcpu(), &cycle, NULL, NULL) < 0 ||
	    cycle < 0)
		return "no cycle counter on this CPU";
	return NULL;
}

/*
 * > 0 (the PMU version, sysfs pmu_version) when the driver's counters can
 * be read on this CPU (cycles_unavailable_reason() is NULL); 0 otherwise.
 */
static inline int perfmon_available(void)
{
	long version;

	if (cycles_unavailable_reason())
		return 0;
	version = cycles_attr_long("pmu_version", 1);
	return version > 0 ? (int)version : 1;
}

#endif /* __aarch64__ */

/*
 * Pin the calling thread to the CPU it runs on; the old mask goes to
 * *oldcpus unless it is NULL. 0 on success, -1 with errno set.
 */
static inline int pin_cpu(cpu_set_t *oldcpus)
{
	cpu_set_t one;
	int cpu;

	if (oldcpus && sched_getaffinity(0, sizeof(*oldcpus), oldcpus) < 0)
		return -1;
	cpu = sched_getcpu();
	if (cpu < 0)
		return -1;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one);
}

/*
 * Give back the mask pin_cpu() saved; NULL (nothing saved) allows every
 * CPU again (the kernel keeps the thread within its cpuset).
 */
static inline void unpin_cpu(cpu_set_t *oldcpus)
{
	cpu_set_t all;

	if (!oldcpus) {
		memset(&all, 0xff, sizeof(all));
		oldcpus = &all;
	}
	sched_setaffinity(0, sizeof(*oldcpus), oldcpus);
}

#endif /* CYCLES_H */
