/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cycles.h - read the CPU's cycle and instruction counters from user space.
 *
 * The API of the 2011 simple-pmu cycles.h, unchanged in names, on x86-64
 * and arm64, now counting the calling thread by default:
 *
 *   counter_t            unsigned long long
 *   perfmon_available()  > 0 if this thread's counters can be read (below)
 *   sync_core()          keep work from moving across a counter read
 *   unhalted_core()      core cycles while not halted
 *   insn_retired()       instructions retired
 *   unhalted_ref()       reference cycles (x86; arm64: the generic timer)
 *   rdtsc(), rdtscp()    time-stamp counter, unordered / after prior work
 *   pin_cpu(), unpin_cpu()  keep the thread on one CPU while measuring
 *
 * Read paths, tried in this order when a thread first uses the header
 * (and again in a child after fork()):
 *
 *   CYCLES_PATH_PERF_MMAP  perf self-monitoring: this thread's own perf
 *       events (pid 0, cpu -1, user space only: exclude_kernel and
 *       exclude_hv, as the module's default ring and as perf_event_paranoid
 *       2 requires of unprivileged users), read with rdpmc / mrs through
 *       the event's mmap page exactly as include/uapi/linux/perf_event.h
 *       documents it and libperf's perf_mmap__read_self() does: retry while
 *       `lock` changes, `index` 0 means "not on a counter now" (then the
 *       reading comes from read(2)), the counter is sign-extended from
 *       `pmc_width` bits. Exact. A multiplexed event (time_running <
 *       time_enabled) is read with read(2): the page's times are stale.
 *       x86: needs the cpu PMU's rdpmc attribute at 1 (the kernel's
 *       default) or 2. arm64: Linux >= 5.17 and
 *       kernel.perf_user_access=1; the events ask with config1 bit 1.
 *   CYCLES_PATH_PERF_READ  the same events through read(2) where the mmap
 *       page grants no user read (x86 rdpmc 0, arm64 perf_user_access 0 or
 *       Linux < 5.17) and the module is not usable: exact, this thread, a
 *       system call per read.
 *   CYCLES_PATH_MODULE     the simple-pmu module's CPU-wide counters (all
 *       tasks on this CPU, through the indices it publishes in sysfs, see
 *       below): when asked for (CYCLES_SCOPE_CPU, cycles_set_scope()), or
 *       when perf_event_open() is refused (EACCES/EPERM: Debian's
 *       perf_event_paranoid 3 without CAP_PERFMON; ENOSYS: seccomp) or its
 *       page grants no user read. Its readings are ADVISORY on x86 and on
 *       arm64 before 5.17: perf may move the driver's event to another
 *       counter at any time and the driver sees it only at its next check,
 *       so a difference may mix two counters with nothing said. On arm64
 *       >= 5.17 a move revokes user access, so a read faults (caught,
 *       below: the reading is invalid) rather than read a moved counter;
 *       there only a pinned window (below) is CYCLES_EXACT, a single
 *       reading never (its cached index is not checked around it).
 *
 * Let in: loading the module opens its counters to nobody. Its sysfs
 * `access` says who may read them: "members", the threads (arm64) or
 * processes (x86) let in through its device node CYCLES_DEV_NODE
 * (/dev/simple-pmu), whose group and mode are the admin's choice (the
 * package's udev rule: group simple-pmu, mode 0660; without it root only);
 * or "everyone" (arm64: loaded with everyone=1, as in 2011; x86: the cpu
 * PMU's rdpmc attribute is 2, which lets every task RDPMC). A module
 * without `access` (older) is read as "everyone"; on x86 it then needs
 * rdpmc 2 (the module's reason says so).
 * Where `access` is "members", a thread whose path becomes the module's is
 * let in first. A thread that cannot open the node is not on the module
 * path: the module's reason (cycles_unavailable_reason()) names the node,
 * its group and mode, and the fix (an admin adds the user to the group,
 * who logs in again).
 *
 *   arm64, per thread: the node is opened, asked (SPMU_IOC_JOIN) and closed
 *   at once (the grant is the thread's, not the fd's; an open fd would keep
 *   the module from unloading). A new thread or a forked child is let in
 *   at its own first use; exec and a reload of the module drop it. After a
 *   guarded module-path read or window that faulted, the thread asks again,
 *   once (that reading or window stays invalid).
 *
 *   x86-64, per process: the node is opened, one page of it mapped
 *   (PROT_READ, MAP_SHARED, offset 0) and closed. While that mapping exists
 *   every thread of the process may RDPMC (the kernel's per-mm permission,
 *   as for a perf event's mmap page). The mapping has no pages: it is never
 *   touched (that would be SIGBUS). The first thread that needs it maps it,
 *   once for the process; a forked child has none (it keeps RDPMC until it
 *   execs, as perf's) and maps its own at its first use; exec ends it. The
 *   mapping holds the module (rmmod fails while a let-in process lives), so
 *   no reload drops it. A mapping refused with EPERM means perf allows no
 *   user RDPMC here: the reason names the cpu PMU's rdpmc attribute and the
 *   fix (1 where it is 0; 2, which is everyone, where perf keeps CPU-wide
 *   counters from user RDPMC below 2: Linux 7.x on Panther Cove and later).
 *
 * cycles_join() and cycles_leave() do it by hand, for programs that read
 * the counters themselves; on x86 cycles_leave() takes the whole process
 * out (every thread).
 *
 * Every reading says where it came from and what it is worth:
 *
 *   struct cycles_reading r;
 *   cycles_read(CYCLES_CORE, &r);   // CYCLES_CORE, CYCLES_INSN, CYCLES_REF
 *   r.value, r.path, r.flags: CYCLES_VALID (a value was read),
 *   CYCLES_EXACT (perf: on a counter the whole time the event was enabled;
 *   module: never for a single reading), CYCLES_MULTIPLEXED (perf: time_running <
 *   time_enabled, so the count misses what the thread did while the event
 *   was off its counter; not scaled: r.time_enabled and r.time_running let
 *   the caller estimate), CYCLES_FAULTED (the read faulted and was caught).
 *
 * The 2011 names return r.value, or 0 for a reading that is not valid.
 * They are meant to be used as in 2011: perfmon_available() > 0 first.
 * unhalted_ref() is 0 where perf has no ref-cycles event (AMD) and the
 * module publishes none.
 *
 * A window: one check at each edge, the bare instruction inside.
 *
 *	struct cycles_window w;
 *	if (cycles_window_begin(&w) == 0) {	// path, index, sequence
 *		a = cycles_window_read(&w, CYCLES_INSN);	// rdpmc / mrs
 *		work();
 *		b = cycles_window_read(&w, CYCLES_INSN);
 *		if (cycles_window_end(&w) & CYCLES_VALID)
 *			n = cycles_window_delta(&w, CYCLES_INSN, a, b);
 *	}
 *
 * cycles_window_end() returns 0 (invalid: discard the window) when its
 * begin failed, when perf's `lock` or `index` of any event changed (it was
 * moved, stopped, multiplexed, rescheduled: the raw values belong to
 * different counter states) or, on the module path, when this CPU or its
 * generation differs at the end from the begin (both taken on one CPU) or
 * a read faulted; else CYCLES_VALID, with CYCLES_EXACT on the perf path
 * and on the module path only for a pinned window on arm64 >= 5.17 (a move
 * to another CPU and back inside an unpinned window is not seen). Reads
 * inside a window are raw counter values: take differences with
 * cycles_window_delta() (modulo the counter's width).
 *
 * cycles_window_read() looks up, at each read, the register the counter
 * sits on (arm64: PMCCNTR_EL0 or one of 31 PMEVCNTR<n>_EL0, each its own
 * mrs: a compare and a jump table; x86: a load of the RDPMC operand). A
 * counter that has an architectural fixed register can be read as the
 * bare instruction alone, no load, no branch, when the window is begun
 * for it:
 *
 *	if (cycles_window_begin_fixed(&w, CYCLES_FIXED(CYCLES_CORE)) == 0) {
 *		a = cycles_window_read_fixed(&w, CYCLES_CORE);	// mrs / rdpmc
 *		work();
 *		b = cycles_window_read_fixed(&w, CYCLES_CORE);
 *		if (cycles_window_end(&w) & CYCLES_VALID)
 *			n = cycles_window_delta(&w, CYCLES_CORE, a, b);
 *	}
 *
 * The fixed registers: core cycles on arm64 PMCCNTR_EL0 (perf's mmap index
 * 32; perf puts a cycles event there when it is free; the module takes it
 * at load) and on x86 fixed counter 1 (RDPMC 0x40000001); x86 also has
 * instructions on fixed counter 0 and reference cycles on fixed counter 2.
 * The counter argument of cycles_window_read_fixed() must be a constant
 * with a fixed register here (anything else does not compile). The begin
 * fails (-1, and the window ends invalid) unless each counter of the mask
 * sits on its fixed register now: perf put this thread's cycles event on
 * a general counter (arm64: PMCCNTR_EL0 is taken, e.g. by the module; x86:
 * the NMI watchdog holds fixed counter 1), the module's counter is on
 * another register on this CPU, or the path has no user reads. Then use
 * cycles_window_begin() and cycles_window_read(). A move off the fixed
 * register during the window changes perf's `lock` and `index` (or the
 * module's generation or CPU): the end says 0, as for any window. Read
 * with cycles_window_read_fixed() only the counters named at the begin:
 * the end cannot see which reads were made.
 *
 * Never killed: reads that can fault (the module path: x86 RDPMC where
 * CR4.PCE is off, arm64 mrs where PMUSERENR was cleared) run under a guard.
 * While a module-path read or window is in progress, a SIGSEGV (x86) or
 * SIGILL (arm64) handler is installed; a fault the kernel raises at this
 * thread's counter read instruction is skipped (the read yields 0) and
 * the reading or window is invalid (CYCLES_FAULTED). Every other signal
 * goes to the handler that was installed before (SA_SIGINFO or not), or
 * takes its default action; the previous handler is put back when the
 * last guarded read of the process ends, unless the program installed
 * another meanwhile (that one stays). A program that installs its own
 * handler for these signals while a guarded read is in progress in another
 * thread replaces the guard (then a fault is the program's, as in 2011).
 * The guard runs on the program's alternate signal stack if it has one
 * (SA_ONSTACK). Single-threaded, each guarded module read installs and
 * removes the handler (two sigaction calls); use a window to pay that once.
 * The perf path is guarded too, from a thread's setup to its close: perf
 * grants the access itself at the owning thread's sched-in, but root can
 * take it back at any instruction (x86 rdpmc 0, arm64 perf_user_access 0
 * clear it on every CPU at once). A read that faults there is taken again
 * with read(2) (CYCLES_FAULTED set, the value exact); a window in which
 * one faulted ends invalid.
 *
 * Legacy: a program that defines CYCLES_2011_READS (with CYCLES_SCOPE_CPU)
 * before including this header gets 2011's module-path reads: unguarded
 * (a fault reaches the program, which must catch it), and where the driver
 * publishes no counter, x86 fixed counters 1 and 0 (arm64 PMCCNTR_EL0) are
 * read as in 2011 although they may hold another user's count. Only for
 * programs that catch the fault themselves (simple_pmu's _native.c until
 * it reads through cycles_read()); never the default.
 *
 * Choosing the scope: define CYCLES_SCOPE_CPU before including this header
 * to make CPU-wide module counters every thread's default, or call
 * cycles_set_scope(CYCLES_SCOPE_CPU_ID / CYCLES_SCOPE_THREAD_ID) in a thread
 * (it re-chooses that thread's path; not while a window of the thread's
 * perf path is open: EBUSY). cycles_path() says which one a thread uses.
 *
 * perfmon_available(): in 2011 the architectural perfmon version (CPUID
 * 0xA), i.e. "the fixed counters exist and user RDPMC is on". Now: > 0
 * when this thread has a path that reads cycles (the perfmon version
 * where known: module pmu_version, else x86 CPUID 0xA; 1 where none is
 * known, e.g. AMD through perf), 0 otherwise. cycles_unavailable_reason()
 * is then NULL, else a text naming every path's failure and what would fix
 * it (the sysctl, CAP_PERFMON, the module). cycles_path_note() says why a
 * thread is not on perf user reads even when another path works.
 *
 * State: one per thread (perf events, mmap pages, path), in thread-local
 * storage, set up at the thread's first use, closed at thread exit (a
 * pthread key destructor) and in a forked child (pthread_atfork; a child
 * made by a raw clone() or vfork() must not use the header). The module's
 * placement cache, the fault guard (its handler, and the program's
 * handler it chains to) and (x86) the let-in mapping are one per program.
 * All are weak definitions in this header, merged into one by the linker:
 * no library to link, so the 2011 tcyc.c still builds with a plain
 * `cc tcyc.c`. Shared objects built with
 * -fvisibility=hidden each get their own copy (then each keeps its own
 * per-thread events: correct, if wasteful; but two such guards whose
 * module-path windows overlap in time can save each other as the handler
 * to chain to: give the cycles_* symbols default visibility there).
 *
 * The module's sysfs ABI, as read here: the driver takes its counters from
 * perf (pinned per-CPU kernel events), and perf decides, per CPU, which
 * hardware counter each one lands in. The driver publishes that, per CPU:
 *   cpuN/cycle_index   the counter of core cycles, -1 = none
 *   cpuN/event_index   one such index per entry of `events`, same order
 *   cpuN/generation    changes with any of them, when the CPU goes offline
 *                      and online, when settings change, when perf
 *                      reloads a counter (seen at the driver's next check)
 *                      or the driver reopens user access, and on arm64
 *                      when a CPU PM exit reloads a 32-bit counter
 * sysfs is read once and cached: when every CPU has the same indices (the
 * usual case) a read costs a compare and the read instruction; otherwise
 * it looks the current CPU up (sched_getcpu()) first. Where the driver
 * publishes no counter for this CPU, a module-path reading is invalid;
 * nothing else is read in its place.
 *
 * x86-64: an index is the ECX operand of RDPMC: 1073741824 + n (bit 30)
 * for fixed counter n, n for general counter n; INST_RETIRED is event 0xc0
 * of `events` and the reference cycles 0x300 (perf's raw encoding event |
 * umask << 8). arm64: 31 for PMCCNTR_EL0, n for PMEVCNTR<n>_EL0 (read with
 * mrs of that register, never through PMSELR_EL0); INST_RETIRED is 0x08;
 * rdtsc, rdtscp and unhalted_ref read the generic timer CNTVCT_EL0
 * (CNTFRQ_EL0 Hz). Counter widths: module-path values are taken modulo
 * 2^width (arm64 event counters are event_width bits, 32 or 64; PMCCNTR is
 * 64); perf-path values are 64-bit counts.
 *
 * Module path, measuring by hand (cycles_generation() also brings the
 * cached indices of this CPU up to date; the window API does this for you):
 *
 *	pin_cpu(&old);
 *	g = cycles_generation();
 *	a = insn_retired();
 *	work();
 *	b = insn_retired();
 *	if (cycles_generation() != g)	// moved, reloaded, replugged: junk
 *		retry or discard;
 *	unpin_cpu(&old);
 *
 * An unchanged generation does not prove b - a exact on x86 or on arm64
 * before 5.17 (see ADVISORY above).
 *
 * Define _GNU_SOURCE before the first #include of the file that includes
 * this header (sched_getcpu() and the CPU_SET macros need it). Define
 * CYCLES_SYSFS_DIR (the driver's directory), CYCLES_DEV_NODE (its device
 * node) or CYCLES_EVENT_SOURCE_DIR (x86: where the cpu PMU's rdpmc
 * attribute is) before including it to use other files (tests).
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
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/perf_event.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "cycles.h supports x86-64 and arm64 only"
#endif

typedef unsigned long long counter_t;

/* Present while the module is loaded. */
#ifndef CYCLES_SYSFS_DIR
#define CYCLES_SYSFS_DIR	"/sys/devices/system/simple-pmu/simple-pmu0"
#endif

/* The module's device node, through which a reader is let in. */
#ifndef CYCLES_DEV_NODE
#define CYCLES_DEV_NODE		"/dev/simple-pmu"
#endif
/*
 * Its ioctls (drivers/arm64/pmu.h): let the calling thread in, take it out.
 * arm64 only: x86 lets a process in by a mapping of the node (ENOTTY).
 */
#define CYCLES_IOC_JOIN		_IO(0xB9, 0x01)
#define CYCLES_IOC_LEAVE	_IO(0xB9, 0x02)
/* The node's group in the package's udev rule (named where stat cannot). */
#define CYCLES_DEV_GROUP	"simple-pmu"

#define CYCLES_INLINE		inline __attribute__((always_inline))
/* One definition per program, whatever the number of translation units. */
#define CYCLES_WEAK		__attribute__((weak))
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define CYCLES_TLS		_Thread_local
#else
#define CYCLES_TLS		__thread
#endif

/* arm64 event counters are PMEVCNTR0_EL0..PMEVCNTR30_EL0. */
#define CYCLES_MAX_EVENT_COUNTER	30
/* Index 31 in cycle_index / event_index: PMCCNTR_EL0, always 64 bits. */
#define CYCLES_CYCLE_COUNTER		31

#if defined(__aarch64__) && !defined(CYCLES_PERF_USER_ACCESS)
/*
 * arm_pmuv3's sysctl: it exists where perf revokes EL0 access when it moves
 * a counter (Linux 5.17 on, and any kernel the feature was backported to).
 */
#define CYCLES_PERF_USER_ACCESS	"/proc/sys/kernel/perf_user_access"
#endif

#if defined(__x86_64__)
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

/*
 * CPUs the module cache holds; CPUs above it read nothing on that path.
 * Not a setting: the cache is one weak object for the whole program, and
 * translation units that sized it differently would overflow each other.
 */
#ifdef CYCLES_MAX_CPUS
#error "cycles.h: CYCLES_MAX_CPUS is fixed (weak objects must agree in size)"
#endif
#define CYCLES_MAX_CPUS		1024

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

/*
 * One per program: a weak definition in every translation unit that
 * includes this header, merged into one by the linker (and, across shared
 * objects with default visibility, by the dynamic linker).
 */
CYCLES_WEAK struct cycles_state cycles_module_cache = {
	CYCLES_IDX_UNKNOWN, CYCLES_IDX_UNKNOWN, CYCLES_IDX_UNKNOWN, 0,
	{ { 0, 0, 0, 0 } }
};
/* Serialises refills of the cache; reads of it take no lock. */
CYCLES_WEAK pthread_mutex_t cycles_module_lock = PTHREAD_MUTEX_INITIALIZER;
#if defined(__x86_64__)
/*
 * x86: this process's mapping of the module's node, which lets it in
 * (NULL: none), one per program as the cache; set and cleared under
 * cycles_module_lock. Never touched: it has no pages.
 */
CYCLES_WEAK void *cycles_let_in_map;
#endif

static inline struct cycles_state *cycles_state(void)
{
	return &cycles_module_cache;
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
static inline int cycles_refresh_locked(void)
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

static inline int cycles_refresh(void)
{
	int rc;

	pthread_mutex_lock(&cycles_module_lock);
	rc = cycles_refresh_locked();
	pthread_mutex_unlock(&cycles_module_lock);
	return rc;
}

/*
 * cycles_refresh(), and @cpu's cycle counter index in what it read into
 * *cycle (CYCLES_IDX_NONE: none, or nothing published for @cpu), under
 * the same lock: until a refill is done, other threads that look without
 * the lock find no CPU in the cache.
 */
static inline int cycles_refresh_cpu(int cpu, int *cycle)
{
	struct cycles_state *st = cycles_state();
	int rc;

	pthread_mutex_lock(&cycles_module_lock);
	rc = cycles_refresh_locked();
	*cycle = cpu >= 0 && cpu < st->nr_cpus ? st->cpu[cpu].cycle :
		 CYCLES_IDX_NONE;
	pthread_mutex_unlock(&cycles_module_lock);
	return rc;
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
static inline unsigned long cycles_generation_locked(int cpu)
{
	struct cycles_state *st = cycles_state();
	char events[256];
	unsigned long gen;

	gen = cycles_cpu_generation(cpu);
	if (gen && !st->nr_cpus) {	/* loaded since the cache was filled */
		cycles_refresh_locked();
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

static inline unsigned long cycles_generation(void)
{
	unsigned long gen;
	int cpu = sched_getcpu();

	if (cpu < 0)
		return 0;
	cycles_loaded_state();
	pthread_mutex_lock(&cycles_module_lock);
	gen = cycles_generation_locked(cpu);
	pthread_mutex_unlock(&cycles_module_lock);
	return gen;
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


/*
 * The counter read instructions. A counter is named by its "hw" operand:
 * x86 the RDPMC ECX (also perf's mmap page index - 1), arm64 31 for
 * PMCCNTR_EL0, n for PMEVCNTR<n>_EL0 (perf's index - 1 as well).
 */
#define CYCLES_HW_NONE		(~0U)

#if defined(__x86_64__)

/* The cpu PMU's rdpmc attribute; cpu_core and cpu_atom on hybrid parts. */
#define CYCLES_RDPMC_ATTR	CYCLES_EVENT_SOURCE_DIR "/cpu/rdpmc"
#define CYCLES_RDPMC_ATTR_CORE	CYCLES_EVENT_SOURCE_DIR "/cpu_core/rdpmc"
#define CYCLES_RDPMC_ATTR_ATOM	CYCLES_EVENT_SOURCE_DIR "/cpu_atom/rdpmc"
#define CYCLES_RDPMC_ALWAYS	2

/* CPUID leaf 0xA, architectural performance monitoring */
#define CYCLES_CPUID_PERFMON		0xa

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
 * The bits an RDPMC of @hw returns that count (CPUID 0xA: EDX[12:5] for the
 * fixed counters, EAX[23:16] for the general ones); 48 where CPUID says
 * nothing usable, the width of every Intel counter perf drives today.
 */
static inline unsigned int cycles_x86_counter_width(unsigned int hw)
{
	unsigned int regs[4], w;

	cycles_cpuid(0, 0, regs);
	if (regs[0] < CYCLES_CPUID_PERFMON)
		return 48;
	cycles_cpuid(CYCLES_CPUID_PERFMON, 0, regs);
	w = hw & CYCLES_RDPMC_FIXED ? (regs[3] >> 5) & 0xff : (regs[0] >> 16) & 0xff;
	return w >= 1 && w <= 64 ? w : 48;
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

static CYCLES_INLINE counter_t cycles_hw_read(unsigned int hw)
{
	return cycles_rdpmc(hw);
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

static CYCLES_INLINE counter_t cycles_hw_read(unsigned int hw)
{
	return cycles_read_counter((int)hw);
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

/* Frequency of rdtsc() in Hz, from CNTFRQ_EL0 (set by firmware). */
static inline unsigned long long cycles_timer_frequency(void)
{
	unsigned long long v;

	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r" (v));
	return v;
}

#endif

/*
 * The perf mmap page reader, as include/uapi/linux/perf_event.h documents
 * it (and libperf's perf_mmap__read_self()). Pure: the page and the read
 * instruction are parameters, so tests run it against a page in memory.
 * A compiler barrier is enough: a task-bound event's page is rewritten
 * only on the CPU the owning thread runs on, by code that interrupts it.
 */
#define cycles_barrier()	__asm__ __volatile__("" : : : "memory")

typedef counter_t (*cycles_hw_read_fn)(unsigned int hw, void *arg);

/*
 * A counter this header has a read instruction for. perf may publish
 * others (arm64 >= 6.x: index 33, the instruction counter; x86: bit 29,
 * metrics): those readings come from read(2), never from a read that
 * would yield a made-up 0.
 */
static CYCLES_INLINE int cycles_hw_known(unsigned int hw)
{
#if defined(__x86_64__)
	return hw < 32 || (hw & ~31U) == (1U << 30);	/* general, fixed */
#else
	return hw <= 31;	/* PMEVCNTR0..30_EL0, PMCCNTR_EL0 */
#endif
}

struct cycles_page_value {
	counter_t value;		/* offset + the sign-extended counter */
	unsigned long long time_enabled;
	unsigned long long time_running;
	unsigned int seq;		/* `lock` the value belongs to */
	unsigned int hw;		/* index - 1; CYCLES_HW_NONE: index 0 */
	unsigned int retries;		/* times `lock` changed under us */
};

/* The low @width bits of @v as a signed number (width 1..64). */
static CYCLES_INLINE long long cycles_sign_extend(counter_t v,
						  unsigned int width)
{
	unsigned int shift;

	if (width == 0 || width >= 64)
		return (long long)v;
	shift = 64 - width;
	return (long long)(v << shift) >> shift;
}

/*
 * Read one event's count from its mmap page @pc, the counter through
 * @rd(hw, @arg). 0: out->value is the count now. 1: `index` is 0, names
 * a counter this header cannot read, or user reads are off
 * (cap_user_rdpmc 0, checked inside the `lock` loop, before `index` is
 * used: the kernel clears it when root turns user reads off, and the
 * read instruction would fault): the event is not on a counter this
 * thread may read, out->value is `offset` alone (the count when the event
 * last stopped; read(2) gives the count now).
 */
static CYCLES_INLINE int cycles_page_read(const volatile struct perf_event_mmap_page *pc,
					  cycles_hw_read_fn rd, void *arg,
					  struct cycles_page_value *out)
{
	unsigned int seq, idx, width;
	unsigned long long count, enabled, running;
	int user;

	out->retries = 0;
	for (;;) {
		seq = pc->lock;
		cycles_barrier();
		enabled = pc->time_enabled;
		running = pc->time_running;
		idx = pc->index;
		count = (unsigned long long)pc->offset;
		user = pc->cap_user_rdpmc && idx && cycles_hw_known(idx - 1);
		if (user) {
			width = pc->pmc_width;
			count += (counter_t)cycles_sign_extend(rd(idx - 1, arg),
							       width);
		}
		cycles_barrier();
		if (pc->lock == seq)
			break;
		out->retries++;
	}
	out->value = count;
	out->time_enabled = enabled;
	out->time_running = running;
	out->seq = seq;
	out->hw = user ? idx - 1 : CYCLES_HW_NONE;
	return user ? 0 : 1;
}

/*
 * Per-thread state.
 */
enum cycles_counter {
	CYCLES_CORE,			/* core cycles */
	CYCLES_INSN,			/* instructions retired */
	CYCLES_REF,			/* reference cycles (x86) */
	CYCLES_NR_COUNTERS
};

enum cycles_path_id {
	CYCLES_PATH_NONE,		/* nothing can be read */
	CYCLES_PATH_PERF_MMAP,		/* perf self-monitoring, user reads */
	CYCLES_PATH_PERF_READ,		/* perf self-monitoring, read(2) */
	CYCLES_PATH_MODULE,		/* simple-pmu's CPU-wide counters */
};

#define CYCLES_SCOPE_THREAD_ID	0
#define CYCLES_SCOPE_CPU_ID	1

/* struct cycles_reading flags, and cycles_window_end()'s result. */
#define CYCLES_VALID		0x1	/* a value was read */
#define CYCLES_EXACT		0x2	/* exactly the count it names */
#define CYCLES_MULTIPLEXED	0x4	/* perf: off its counter for a while */
#define CYCLES_FAULTED		0x8	/* the read faulted (caught) */

struct cycles_reading {
	counter_t value;		/* 0 unless CYCLES_VALID */
	unsigned long long time_enabled;	/* perf paths, in ns */
	unsigned long long time_running;
	int path;			/* enum cycles_path_id */
	unsigned int flags;
	int cpu;			/* module path: the CPU read on */
	unsigned int hw;		/* the counter read (or that faulted) */
};

struct cycles_thread {
	int ready;			/* set up in this thread */
	int scope_set;			/* cycles_set_scope() was called */
	int scope;
	int path;			/* enum cycles_path_id */
	int perf_errno;			/* perf_event_open()'s, 0: opened */
	int user_read;			/* the page grants user reads */
	int module_exact;		/* cycles_module_exact() */
	int fd[CYCLES_NR_COUNTERS];	/* -1: none */
	struct perf_event_mmap_page *pc[CYCLES_NR_COUNTERS];
	unsigned int epoch;		/* + 1 each time the events close */
	int windows;			/* perf windows begun, not yet ended */
	int perf_guard;			/* the perf path's guard is on */
	volatile sig_atomic_t guarding;	/* guards on (perf path, module read) */
	volatile sig_atomic_t faulted;	/* it faulted (and was skipped) */
	volatile unsigned int faults;	/* faults skipped, ever (perf path) */
	volatile unsigned int fault_hw;	/* the counter whose read faulted */
	int joined;			/* let in (x86: the process, as this
					   thread last saw it) */
	char join_reason[512];		/* why it could not be let in */
	char reason[1024];
};

CYCLES_WEAK CYCLES_TLS struct cycles_thread cycles_tls;
CYCLES_WEAK pthread_once_t cycles_once = PTHREAD_ONCE_INIT;
CYCLES_WEAK pthread_key_t cycles_key;

/*
 * The guard: module-path reads can fault when another party closed user
 * access. A fault raised by the kernel at this thread's counter read while
 * it guards is skipped: the instruction yields 0 and t->faulted is set.
 */
CYCLES_WEAK pthread_mutex_t cycles_guard_lock = PTHREAD_MUTEX_INITIALIZER;
CYCLES_WEAK int cycles_guard_users;
CYCLES_WEAK struct sigaction cycles_guard_old;

#if defined(__x86_64__)
#define CYCLES_GUARD_SIGNAL	SIGSEGV		/* #GP: RDPMC with CR4.PCE off */

/* RDPMC (0f 33) at the faulting RIP: skip it, as if it returned 0. */
static inline int cycles_guard_skip(ucontext_t *uc, unsigned int *hw)
{
	greg_t *r = uc->uc_mcontext.gregs;
	const unsigned char *ip = (const unsigned char *)r[REG_RIP];

	if (ip[0] != 0x0f || ip[1] != 0x33)
		return 0;
	*hw = (unsigned int)r[REG_RCX];
	r[REG_RAX] = 0;
	r[REG_RDX] = 0;
	r[REG_RIP] += 2;
	return 1;
}
#else
#define CYCLES_GUARD_SIGNAL	SIGILL		/* EL0 PMU access closed */

/*
 * MRS of PMCCNTR_EL0 (op0 3, op1 3, CRn 9, CRm 13, op2 0) or of
 * PMEVCNTR<n>_EL0 (CRn 14, CRm 8..11) at the faulting PC: skip it.
 */
static inline int cycles_guard_skip(ucontext_t *uc, unsigned int *hw)
{
	const uint32_t insn = *(const uint32_t *)uc->uc_mcontext.pc;
	unsigned int crn = (insn >> 12) & 0xf, crm = (insn >> 8) & 0xf;
	unsigned int op2 = (insn >> 5) & 0x7, rt = insn & 0x1f;

	if ((insn & 0xffff0000U) != 0xd53b0000U)
		return 0;
	if (crn == 9 && crm == 13 && op2 == 0)
		*hw = CYCLES_CYCLE_COUNTER;
	else if (crn == 14 && crm >= 8 && crm <= 11)
		*hw = ((crm & 3) << 3) | op2;
	else
		return 0;
	if (rt != 31)
		uc->uc_mcontext.regs[rt] = 0;
	uc->uc_mcontext.pc += 4;
	return 1;
}
#endif

/*
 * One handler for the whole program, like the state it reads: a weak
 * definition, so that every translation unit installs, compares and
 * chains the same function. (A static copy per unit let one unit's
 * handler become the saved "old" one of another's, or of itself: a fault
 * of the program's then chained round forever.)
 */
CYCLES_WEAK __attribute__((noinline)) void
cycles_guard_handler(int sig, siginfo_t *si, void *uc);

CYCLES_WEAK __attribute__((noinline)) void
cycles_guard_handler(int sig, siginfo_t *si, void *uc)
{
	struct cycles_thread *t = &cycles_tls;
	const struct sigaction *old = &cycles_guard_old;
	unsigned int hw;

	/* si_code > 0: raised by the kernel for an instruction, not sent. */
	if (t->guarding && si->si_code > 0 &&
	    cycles_guard_skip((ucontext_t *)uc, &hw)) {
		t->fault_hw = hw;
		t->faulted = 1;
		t->faults++;
		return;
	}
	if ((old->sa_flags & SA_SIGINFO) &&
	    old->sa_sigaction != cycles_guard_handler) {
		old->sa_sigaction(sig, si, uc);
	} else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	} else {
		/* The default action (ignoring a fault is not possible). */
		signal(sig, SIG_DFL);
		if (si->si_code <= 0)
			raise(sig);
		/* a fault: returning re-executes it, now without a handler */
	}
}

/* Start guarding this thread's reads (process-wide handler, counted). */
static inline void cycles_guard_begin(struct cycles_thread *t)
{
	struct sigaction sa;

	pthread_mutex_lock(&cycles_guard_lock);
	if (cycles_guard_users++ == 0) {
		struct sigaction prev;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = cycles_guard_handler;
		/* On the program's alternate stack if it has one. */
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		/* Still ours (another copy of the header left it): keep the old. */
		if (sigaction(CYCLES_GUARD_SIGNAL, &sa, &prev) == 0 &&
		    !((prev.sa_flags & SA_SIGINFO) &&
		      prev.sa_sigaction == cycles_guard_handler))
			cycles_guard_old = prev;
	}
	pthread_mutex_unlock(&cycles_guard_lock);
	if (t->guarding == 0)	/* else an outer guard's fault stays seen */
		t->faulted = 0;
	cycles_barrier();
	t->guarding++;
	cycles_barrier();
}

/* Stop guarding; 1 if a read faulted meanwhile. */
static inline int cycles_guard_end(struct cycles_thread *t)
{
	cycles_barrier();
	if (t->guarding > 0)
		t->guarding--;
	cycles_barrier();
	pthread_mutex_lock(&cycles_guard_lock);
	if (cycles_guard_users > 0 && --cycles_guard_users == 0) {
		struct sigaction now;

		/* A handler the program installed meanwhile stays. */
		if (sigaction(CYCLES_GUARD_SIGNAL, NULL, &now) == 0 &&
		    (now.sa_flags & SA_SIGINFO) &&
		    now.sa_sigaction == cycles_guard_handler)
			sigaction(CYCLES_GUARD_SIGNAL, &cycles_guard_old, NULL);
	}
	pthread_mutex_unlock(&cycles_guard_lock);
	return t->faulted;
}

/* Close this thread's events: at thread exit, in a forked child, on re-setup. */
static inline void cycles_thread_close(struct cycles_thread *t)
{
	int i;

	for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
		if (t->pc[i])
			munmap(t->pc[i], (size_t)sysconf(_SC_PAGESIZE));
		if (t->fd[i] >= 0)
			close(t->fd[i]);
		t->pc[i] = NULL;
		t->fd[i] = -1;
	}
	if (t->perf_guard) {
		t->perf_guard = 0;
		cycles_guard_end(t);
	}
	/* Windows on these pages end invalid without touching them. */
	t->epoch++;
	t->windows = 0;
	t->ready = 0;
}

static inline void cycles_thread_exit(void *p)
{
	cycles_thread_close((struct cycles_thread *)p);
}

/*
 * The child of fork() inherits the parent thread's fds and mappings: they
 * count the parent. Drop them; the child's first read opens its own.
 */
static inline void cycles_atfork_child(void)
{
	/* Taken in the parent around fork() (prepare): free again here. */
	pthread_mutex_unlock(&cycles_module_lock);
	pthread_mutex_unlock(&cycles_guard_lock);
	/* The child's only thread: the guards counted are its own. */
	cycles_guard_users = cycles_tls.guarding;
	/* The grant was the parent thread's: the child asks at its first use. */
	cycles_tls.joined = 0;
#if defined(__x86_64__)
	/*
	 * The mapping is not copied (the kernel's VM_DONTCOPY): the child has
	 * none to unmap. It keeps RDPMC until it execs, and maps its own at
	 * its first use (then the module counts it).
	 */
	cycles_let_in_map = NULL;
#endif
	if (cycles_tls.ready)
		cycles_thread_close(&cycles_tls);
}

/*
 * Around fork(): no other thread may hold a lock the child would then find
 * taken forever (the child's close of the events ends the perf guard).
 */
static inline void cycles_atfork_prepare(void)
{
	pthread_mutex_lock(&cycles_guard_lock);
	pthread_mutex_lock(&cycles_module_lock);
}

static inline void cycles_atfork_parent(void)
{
	pthread_mutex_unlock(&cycles_module_lock);
	pthread_mutex_unlock(&cycles_guard_lock);
}

static inline void cycles_init_once(void)
{
	pthread_key_create(&cycles_key, cycles_thread_exit);
	pthread_atfork(cycles_atfork_prepare, cycles_atfork_parent,
		       cycles_atfork_child);
}

/*
 * Letting a reader in (see the top of the file).
 */

/* 1 if the loaded module reads only for members (sysfs access "members"). */
static inline int cycles_members_only(void)
{
	char buf[16];

	return cycles_read_attr("access", buf, sizeof(buf)) >= 0 &&
	       !strcmp(buf, "members");
}

#if defined(__aarch64__)
/*
 * One ioctl on the node, which is closed at once: 0, or with errno -1 if
 * the node cannot be opened, -2 if the ioctl failed.
 */
static inline int cycles_dev_ioctl(unsigned long request)
{
	int fd, rc, err;

	fd = open(CYCLES_DEV_NODE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = ioctl(fd, request);
	err = errno;
	close(fd);
	errno = err;
	return rc < 0 ? -2 : 0;
}

/* Let the calling thread in: as cycles_dev_ioctl(). */
static inline int cycles_dev_let_in(void)
{
	return cycles_dev_ioctl(CYCLES_IOC_JOIN);
}
#else
/*
 * Let this process in, once: map one page of the node (never touched) and
 * close it; the mapping is the grant. 0 (also when it is mapped already),
 * or with errno -1 if the node cannot be opened, -2 if the mapping was
 * refused (EPERM: perf allows no user RDPMC here; EINVAL, ENODEV, ENOMEM).
 */
static inline int cycles_dev_let_in(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd, err, rc = 0;
	void *p;

	pthread_mutex_lock(&cycles_module_lock);
	if (cycles_let_in_map)
		goto out;
	fd = open(CYCLES_DEV_NODE, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -1;
		goto out;
	}
	p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	errno = err;
	if (p == MAP_FAILED)
		rc = -2;
	else
		cycles_let_in_map = p;
out:
	err = errno;
	pthread_mutex_unlock(&cycles_module_lock);
	errno = err;
	return rc;
}

/* Take this process out: unmap its mapping, if any. 0, or -1 with errno. */
static inline int cycles_dev_let_out(void)
{
	void *p;
	int rc = 0;

	pthread_mutex_lock(&cycles_module_lock);
	p = cycles_let_in_map;
	cycles_let_in_map = NULL;
	if (p && munmap(p, (size_t)sysconf(_SC_PAGESIZE)) < 0)
		rc = -1;
	pthread_mutex_unlock(&cycles_module_lock);
	return rc;
}
#endif

/*
 * Let the caller in, for a program that reads the counters itself: 0 when
 * it may read now (let in, or the module reads for everyone: access
 * "everyone", or no `access` at all), else -1 with errno: EACCES or EPERM
 * (this user may not open the node), ENOENT (no node, or no module). arm64
 * lets the calling thread in; x86 the whole process (every thread), where
 * the mapping may also be refused: EPERM (perf allows no user RDPMC:
 * cycles_unavailable_reason() says why), ENODEV, ENOMEM.
 */
static inline int cycles_join(void)
{
	/* A forked child must forget the grant: the atfork handlers. */
	pthread_once(&cycles_once, cycles_init_once);
	if (access(CYCLES_SYSFS_DIR, F_OK) < 0) {
		errno = ENOENT;
		return -1;
	}
	if (!cycles_members_only())
		return 0;
	if (cycles_dev_let_in() < 0)
		return -1;
	cycles_tls.joined = 1;
	return 0;
}

/*
 * Take the caller out: 0 (also where nobody needs letting in), or -1 with
 * errno. arm64: the calling thread; on the module path the header lets it
 * in again at the next read that faults. x86: the whole process (its
 * mapping is unmapped: every thread's RDPMC faults from now on, caught on
 * the module path); the header lets it in again at the next
 * perfmon_available() or choice of path. Choose another scope to stay out.
 */
static inline int cycles_leave(void)
{
	cycles_tls.joined = 0;
#if defined(__x86_64__)
	return cycles_dev_let_out();
#else
	if (!cycles_members_only())
		return 0;
	return cycles_dev_ioctl(CYCLES_IOC_LEAVE) < 0 ? -1 : 0;
#endif
}

#if defined(__x86_64__)
/*
 * x86: why perf refused the mapping (EPERM), and the fix: no user RDPMC at
 * all (a cpu PMU's rdpmc attribute is 0), else a kernel that keeps
 * CPU-wide counters from user RDPMC unless rdpmc is 2 (it is not).
 */
static inline void cycles_rdpmc_refused(char *buf, size_t size)
{
	static const char *const attrs[] = {
		CYCLES_RDPMC_ATTR, CYCLES_RDPMC_ATTR_CORE, CYCLES_RDPMC_ATTR_ATOM
	};
	const char *seen = NULL;
	char v[16];
	unsigned int i;

	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		if (cycles_read_file(attrs[i], v, sizeof(v)) < 0)
			continue;
		if (!seen)
			seen = attrs[i];
		if (!strcmp(v, "0")) {
			snprintf(buf, size, "not let in: " CYCLES_DEV_NODE
				 " refused to let this process in (EPERM): "
				 "perf allows no user RDPMC (%s is 0); an admin "
				 "writes 1 to it (echo 1 > %s; cpu_core and "
				 "cpu_atom on hybrid parts)", attrs[i],
				 attrs[i]);
			return;
		}
	}
	snprintf(buf, size, "not let in: " CYCLES_DEV_NODE " refused to let "
		 "this process in (EPERM): this kernel lets user RDPMC read "
		 "CPU-wide counters only at rdpmc 2 (Linux 7.x on Panther "
		 "Cove and later); an admin writes 2 to %s (cpu_core and "
		 "cpu_atom on hybrid parts), which lets every task read "
		 "them (access everyone)", seen ? seen : CYCLES_RDPMC_ATTR);
}
#endif

/*
 * Why this reader was not let in, and the fix: @failed and @err are
 * cycles_dev_let_in()'s result and errno. The node's group and mode come
 * from the node itself.
 */
static inline void cycles_join_reason(int failed, int err, char *buf,
				      size_t size)
{
	struct group gr, *g = NULL;
	const char *group = CYCLES_DEV_GROUP;
	unsigned int mode = 0660, gid = 1;
	char grbuf[4096];
	struct stat st;

#if defined(__x86_64__)
	if (failed == -2 && err == EPERM) {
		cycles_rdpmc_refused(buf, size);
		return;
	}
	if (failed == -2) {
		snprintf(buf, size, "not let in: " CYCLES_DEV_NODE " refused "
			 "to let this process in (%s)", strerror(err));
		return;
	}
#endif
	if (failed == -2) {
		snprintf(buf, size, "not let in: " CYCLES_DEV_NODE " refused "
			 "to let this thread in (%s)", strerror(err));
		return;
	}
	if (err == ENOENT) {
		snprintf(buf, size, "not let in: the module has no "
			 CYCLES_DEV_NODE " (udev not running? a container "
			 "needs the node passed in)");
		return;
	}
	if (err != EACCES && err != EPERM) {
		snprintf(buf, size, "not let in: " CYCLES_DEV_NODE " cannot "
			 "be opened (%s)", strerror(err));
		return;
	}
	if (stat(CYCLES_DEV_NODE, &st) == 0) {
		mode = st.st_mode & 07777;
		gid = st.st_gid;
		if (getgrgid_r(st.st_gid, &gr, grbuf, sizeof(grbuf), &g) == 0 &&
		    g)
			group = g->gr_name;
	}
	if (gid != 0 && (mode & S_IRGRP))
		snprintf(buf, size, "not let in: " CYCLES_DEV_NODE " (group %s, "
			 "mode %04o) cannot be opened by this user; an admin "
			 "adds the user to group %s (adduser USER %s), who then "
			 "logs in again", group, mode, group, group);
	else
		snprintf(buf, size, "not let in: " CYCLES_DEV_NODE " (group %s, "
			 "mode %04o) cannot be opened by this user; an admin "
			 "gives it a group (the package's udev rule: group "
			 CYCLES_DEV_GROUP ", mode 0660) and adds the user to "
			 "it, who then logs in again", group, mode);
}

/*
 * NULL if this reader is let in or need not be (access is not "members"),
 * else why not (valid until its next call). Asks at most once per call:
 * arm64 for this thread, unless it was let in; x86 for the process, unless
 * it is mapped already (then without a system call).
 */
static inline const char *cycles_thread_join(struct cycles_thread *t)
{
	int rc;

#if defined(__aarch64__)
	if (t->joined)
		return NULL;
#endif
	if (!cycles_members_only())
		return NULL;
	rc = cycles_dev_let_in();
	if (rc == 0) {
		t->joined = 1;
		return NULL;
	}
	t->joined = 0;
	cycles_join_reason(rc, errno, t->join_reason, sizeof(t->join_reason));
	return t->join_reason;
}

/*
 * After a guarded module-path read or window that faulted (never in the
 * handler). arm64: the grant may be gone (the module was reloaded), so ask
 * again, once. A fault for another reason (perf withdrew access for a
 * while) costs the same system calls and changes nothing. x86: nothing to
 * ask: the process's mapping holds the module (no reload while it exists)
 * and outlives the fault, which is perf's (rdpmc written 0) or follows
 * cycles_leave().
 */
static inline void cycles_rejoin(struct cycles_thread *t)
{
#if defined(__aarch64__)
	t->joined = 0;
	(void)cycles_thread_join(t);
#else
	(void)t;
#endif
}

#if defined(__x86_64__)
static const unsigned long long cycles_perf_config[CYCLES_NR_COUNTERS] = {
	PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
	PERF_COUNT_HW_REF_CPU_CYCLES,
};
#define CYCLES_PERF_COUNTERS	3
#else
/* arm64 has no reference cycles; unhalted_ref() is the generic timer. */
static const unsigned long long cycles_perf_config[CYCLES_NR_COUNTERS] = {
	PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS, 0,
};
#define CYCLES_PERF_COUNTERS	2
/* config1 bit 1: ask perf for EL0 reads (Linux >= 5.17, arm_pmuv3). */
#define CYCLES_ARM64_USER_READ	0x2
#endif

/* One task-bound, user-space-only event of this thread; -1 with errno. */
static inline int cycles_perf_open(unsigned long long config, int group)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = config;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED |
			   PERF_FORMAT_TOTAL_TIME_RUNNING;
#if defined(__aarch64__)
	attr.config1 = CYCLES_ARM64_USER_READ;
#endif
	return (int)syscall(SYS_perf_event_open, &attr, 0, -1, group,
			    PERF_FLAG_FD_CLOEXEC);
}

/*
 * kernel.perf_user_access on arm64: 1, 0, or -1 if it cannot be read
 * (before 5.17 there is none). Unused on x86.
 */
static inline int cycles_arm64_access(void)
{
#if defined(__aarch64__)
	char buf[16];

	if (cycles_read_file("/proc/sys/kernel/perf_user_access", buf,
			     sizeof(buf)) <= 0)
		return -1;
	return buf[0] == '1' && !buf[1];
#else
	return -1;
#endif
}

/*
 * Whether an event's page grants this thread user reads, for choosing the
 * path once: from the capability, not from the momentary `index` (0 also
 * when the event is not scheduled right now; then that one read goes to
 * read(2)). x86: cap_user_rdpmc follows the rdpmc attribute. arm64: it is
 * 1 for any event that asked (config1 bit 1) even when perf_user_access is
 * 0 (index then stays 0), so the sysctl decides; unreadable: the index.
 */
static inline int cycles_page_user_read(const volatile struct perf_event_mmap_page *pc,
					int arm64_access)
{
	if (!pc->cap_user_rdpmc)
		return 0;
#if defined(__x86_64__)
	(void)arm64_access;
	return 1;
#else
	return arm64_access == 1 || (arm64_access < 0 && pc->index);
#endif
}

/*
 * This thread's events, one group led by cycles (so a window sees the
 * group on or off its counters together). 0 with t->user_read set if the
 * page grants user reads; -1 with t->perf_errno if cycles cannot be opened.
 */
static inline int cycles_perf_setup(struct cycles_thread *t)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;
	int i, fd;

	for (i = 0; i < CYCLES_PERF_COUNTERS; i++) {
		/*
		 * cycles leads instructions (on the PMU together or not at
		 * all); reference cycles goes alone: it needs one particular
		 * counter on x86, and a group is only as placeable as its
		 * hardest member.
		 */
		fd = cycles_perf_open(cycles_perf_config[i],
				      i && i != CYCLES_REF ? t->fd[0] : -1);
		if (fd < 0) {
			if (i == 0) {
				t->perf_errno = errno;
				return -1;
			}
			continue;	/* e.g. no ref-cycles on AMD */
		}
		t->fd[i] = fd;
		p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED)
			t->pc[i] = (struct perf_event_mmap_page *)p;
	}
	t->perf_errno = 0;
	t->user_read = t->pc[0] &&
		       cycles_page_user_read(t->pc[0], cycles_arm64_access());
	return 0;
}

static inline const char *cycles_module_reason(void);
static inline int cycles_module_exact(void);

/* Choose this thread's path (see the top of the file). */
static inline void cycles_thread_setup(struct cycles_thread *t)
{
	int i;

	pthread_once(&cycles_once, cycles_init_once);
	for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
		t->fd[i] = -1;
		t->pc[i] = NULL;
	}
	t->perf_errno = 0;
	t->user_read = 0;
	if (!t->scope_set) {
#ifdef CYCLES_SCOPE_CPU
		t->scope = CYCLES_SCOPE_CPU_ID;
#else
		t->scope = CYCLES_SCOPE_THREAD_ID;
#endif
	}
	t->path = CYCLES_PATH_NONE;
	if (t->scope == CYCLES_SCOPE_THREAD_ID &&
	    cycles_perf_setup(t) == 0 && t->user_read) {
		t->path = CYCLES_PATH_PERF_MMAP;
		/* Root may turn user reads off at any instruction. */
		cycles_guard_begin(t);
		t->perf_guard = 1;
	} else if (!cycles_module_reason()) {
		/*
		 * Our own events would only get in the way: on arm64 >= 5.17
		 * perf clears EL0 access at their every sched-in.
		 */
		cycles_thread_close(t);
		t->path = CYCLES_PATH_MODULE;
	} else if (t->scope == CYCLES_SCOPE_THREAD_ID && t->fd[0] >= 0) {
		t->path = CYCLES_PATH_PERF_READ;
	}
	t->module_exact = t->path == CYCLES_PATH_MODULE &&
			  cycles_module_exact();
	t->ready = 1;
	pthread_setspecific(cycles_key, t);
}

/* This thread's state, set up at its first use. */
static CYCLES_INLINE struct cycles_thread *cycles_thread(void)
{
	struct cycles_thread *t = &cycles_tls;

	if (__builtin_expect(!t->ready, 0))
		cycles_thread_setup(t);
	return t;
}

/* The path this thread reads from (enum cycles_path_id). */
static inline int cycles_path(void)
{
	return cycles_thread()->path;
}

static inline const char *cycles_path_name(int path)
{
	switch (path) {
	case CYCLES_PATH_PERF_MMAP:
		return "perf self-monitoring (user read)";
	case CYCLES_PATH_PERF_READ:
		return "perf self-monitoring (read(2))";
	case CYCLES_PATH_MODULE:
		return "simple-pmu module (CPU-wide)";
	default:
		return "none";
	}
}

/*
 * Count this thread (CYCLES_SCOPE_THREAD_ID, the default) or this CPU
 * through the module (CYCLES_SCOPE_CPU_ID) from now on; returns the path.
 * -1 with errno EBUSY, changing nothing, while a perf-path window of this
 * thread is open (begun, not ended): re-choosing closes the events and
 * unmaps the pages that window reads.
 */
static inline int cycles_set_scope(int scope)
{
	struct cycles_thread *t = &cycles_tls;

	if (t->ready && t->windows > 0) {
		errno = EBUSY;
		return -1;
	}
	if (t->ready)
		cycles_thread_close(t);
	t->scope = scope;
	t->scope_set = 1;
	return cycles_path();
}


/*
 * The module path.
 */

/* The module's index of @which on this CPU (CYCLES_IDX_NONE: none). */
static inline int cycles_module_index(int which)
{
	switch (which) {
	case CYCLES_CORE:
		return cycles_cycle_index();
	case CYCLES_INSN:
		return cycles_insn_index();
	default:
		return cycles_ref_index();
	}
}

/*
 * Module readings are exact only where a move of the driver's counter
 * revokes user access (arm64 with perf_user_access, 5.17 on: the read
 * faults instead); on x86 and older arm64 kernels a move is seen at the
 * driver's next check only. The same test as simple_pmu's.
 */
static inline int cycles_module_exact(void)
{
#if defined(__aarch64__)
	return access(CYCLES_PERF_USER_ACCESS, F_OK) == 0;
#else
	return 0;
#endif
}

#ifdef CYCLES_2011_READS
/*
 * Legacy opt-in (see the top of the file): 2011's read, unguarded, of the
 * counters 2011 used where the driver publishes none. They may not be the
 * driver's; the reading is never exact.
 */
static inline int cycles_module_read_2011(int which, struct cycles_reading *r)
{
	int idx = cycles_module_index(which);

	r->path = CYCLES_PATH_MODULE;
	r->cpu = sched_getcpu();
	if (idx < 0) {
#if defined(__x86_64__)
		if (which == CYCLES_REF)
			return -1;
		idx = (int)(CYCLES_RDPMC_FIXED | (which == CYCLES_CORE));
#else
		if (which != CYCLES_CORE)
			return -1;
		idx = CYCLES_CYCLE_COUNTER;
#endif
	}
	r->hw = (unsigned int)idx;
	r->value = cycles_hw_read((unsigned int)idx);
	r->flags = CYCLES_VALID;
	return 0;
}
#endif

static inline int cycles_module_read(struct cycles_thread *t, int which,
				     struct cycles_reading *r)
{
	int cpu = sched_getcpu();	/* before the index: a move is seen */
	int idx = cycles_module_index(which);

#ifdef CYCLES_2011_READS
	(void)t;
	(void)idx;
	return cycles_module_read_2011(which, r);
#endif
	r->path = CYCLES_PATH_MODULE;
	r->cpu = cpu;
	if (idx < 0)
		return -1;	/* nothing of ours to read: nothing is read */
	r->hw = (unsigned int)idx;
	cycles_guard_begin(t);
	r->value = cycles_hw_read((unsigned int)idx);
	if (cycles_guard_end(t)) {
		r->value = 0;
		r->hw = t->fault_hw;
		r->flags = CYCLES_FAULTED;
		cycles_rejoin(t);
		return -1;
	}
	/* Moved between the index lookup and the read: another CPU's. */
	if (sched_getcpu() != r->cpu) {
		r->value = 0;
		return -1;
	}
	/*
	 * Never exact: the cached index is not checked against the
	 * generation around a single read (that would cost sysfs reads
	 * each time), so it may be stale. Exactness needs a window.
	 */
	r->flags = CYCLES_VALID;
	return 0;
}

/* read(2) of a perf event: exact, a system call. */
static inline int cycles_perf_read(struct cycles_thread *t, int which,
				   struct cycles_reading *r)
{
	unsigned long long v[3];

	r->path = CYCLES_PATH_PERF_READ;
	if (t->fd[which] < 0 || read(t->fd[which], v, sizeof(v)) != sizeof(v))
		return -1;
	r->value = v[0];
	r->time_enabled = v[1];
	r->time_running = v[2];
	if (v[2] == 0 && v[1] != 0) {	/* never on the PMU: no count at all */
		r->value = 0;
		r->flags = CYCLES_MULTIPLEXED;
		return -1;
	}
	r->flags = CYCLES_VALID | (v[1] == v[2] ? CYCLES_EXACT :
				   CYCLES_MULTIPLEXED);
	return 0;
}

/*
 * A reading from one perf mmap page (cycles_page_read()) into *r: 0 with
 * CYCLES_VALID|CYCLES_EXACT; 1 if the event is not on a counter this
 * thread may read, or was off its counter for part of the time it was
 * enabled (use read(2)). The page's time_enabled/time_running are as of
 * perf's last update of the page (current only with cap_user_time and the
 * time fields, which this reader does not use): equal there, with the
 * event on its counter since, they are equal now, so the exact case needs
 * no more; a multiplexed event's times and flags come from read(2).
 */
static CYCLES_INLINE int cycles_read_page(const volatile struct perf_event_mmap_page *pc,
					  cycles_hw_read_fn rd, void *arg,
					  struct cycles_reading *r)
{
	struct cycles_page_value pv;

	if (cycles_page_read(pc, rd, arg, &pv) ||
	    pv.time_enabled != pv.time_running)
		return 1;
	r->path = CYCLES_PATH_PERF_MMAP;
	r->value = pv.value;
	r->time_enabled = pv.time_enabled;
	r->time_running = pv.time_running;
	r->hw = pv.hw;
	r->flags = CYCLES_VALID | CYCLES_EXACT;
	return 0;
}

static CYCLES_INLINE counter_t cycles_hw_read_cb(unsigned int hw, void *arg)
{
	(void)arg;
	return cycles_hw_read(hw);
}

/*
 * One reading of @which (CYCLES_CORE, CYCLES_INSN, CYCLES_REF) on this
 * thread's path into *r. 0 if r->flags has CYCLES_VALID, else -1.
 */
static CYCLES_INLINE int cycles_read(int which, struct cycles_reading *r)
{
	struct cycles_thread *t = cycles_thread();
	const struct perf_event_mmap_page *pc = t->pc[which];

	memset(r, 0, sizeof(*r));
	r->path = t->path;
	r->cpu = -1;
	r->hw = CYCLES_HW_NONE;
	if (__builtin_expect(t->path == CYCLES_PATH_PERF_MMAP && pc != NULL,
			     1)) {
		unsigned int faults = t->faults;

		if (__builtin_expect(cycles_read_page(pc, cycles_hw_read_cb,
						      NULL, r) == 0 &&
				     t->faults == faults, 1))
			return 0;
		if (t->faults != faults) {	/* user reads were turned off */
			int rc = cycles_perf_read(t, which, r);

			r->flags |= CYCLES_FAULTED;
			return rc;
		}
		return cycles_perf_read(t, which, r);	/* index 0, mux */
	}
	if (t->path == CYCLES_PATH_PERF_READ || t->path == CYCLES_PATH_PERF_MMAP)
		return cycles_perf_read(t, which, r);
	if (t->path == CYCLES_PATH_MODULE)
		return cycles_module_read(t, which, r);
#ifdef CYCLES_2011_READS
	if (t->scope == CYCLES_SCOPE_CPU_ID)	/* read, and fault, as in 2011 */
		return cycles_module_read(t, which, r);
#endif
	return -1;
}

/* The value of a reading of @which, 0 if it is not valid. */
/*
 * The 2011 names were bare instructions: they leave errno as it was, also
 * when the first call of a thread makes setup system calls that fail.
 */
static CYCLES_INLINE counter_t cycles_value(int which)
{
	struct cycles_reading r;
	int saved = errno;

	cycles_read(which, &r);
	errno = saved;
	return r.value;
}

/* Core cycles of this thread (or, on the module path, of this CPU). */
static CYCLES_INLINE counter_t unhalted_core(void)
{
	return cycles_value(CYCLES_CORE);
}

/* Instructions retired, as unhalted_core(). */
static CYCLES_INLINE counter_t insn_retired(void)
{
	return cycles_value(CYCLES_INSN);
}

#if defined(__x86_64__)
/* Reference cycles, as unhalted_core(); 0 where there are none (AMD). */
static CYCLES_INLINE counter_t unhalted_ref(void)
{
	return cycles_value(CYCLES_REF);
}
#else
/* arm64 has no reference-cycles counter: the generic timer is the closest. */
static CYCLES_INLINE counter_t unhalted_ref(void)
{
	return rdtsc();
}
#endif

/*
 * Windows.
 */
struct cycles_window {
	int path;
	int begun;			/* begin succeeded: end may be valid */
	unsigned int fixed;		/* CYCLES_FIXED() mask asked at begin */
	unsigned int on_fixed;		/* the counters on their fixed register */
	int guarded;			/* module path: the guard is on */
	int pinned;			/* module path: affinity is one CPU */
	int cpu;			/* module path */
	unsigned long generation;	/* module path */
	unsigned int hw[CYCLES_NR_COUNTERS];	/* CYCLES_HW_NONE: no read */
	unsigned int width[CYCLES_NR_COUNTERS];
	unsigned int seq[CYCLES_NR_COUNTERS];
	const struct perf_event_mmap_page *pc[CYCLES_NR_COUNTERS];
	unsigned int epoch;		/* perf path: the thread's events' */
	unsigned int faults;		/* perf path: the thread's, at begin */
	long switches;			/* module path: context switches at begin */
	long switches_end;		/* ... and at a valid end */
};

/* A counter's bit in the mask of cycles_window_begin_fixed(). */
#define CYCLES_FIXED(which)	(1U << (which))

#if defined(__x86_64__)
/* Fixed counters: 0 instructions, 1 core cycles, 2 reference cycles. */
#define CYCLES_FIXED_COUNTERS	(CYCLES_FIXED(CYCLES_CORE) |		\
				 CYCLES_FIXED(CYCLES_INSN) |		\
				 CYCLES_FIXED(CYCLES_REF))
#define CYCLES_FIXED_HW(which)						\
	(CYCLES_RDPMC_FIXED | ((which) == CYCLES_CORE ? 1U :		\
			       (which) == CYCLES_INSN ? 0U : 2U))
#else
/* PMCCNTR_EL0 counts core cycles; the event counters have no fixed role. */
#define CYCLES_FIXED_COUNTERS	CYCLES_FIXED(CYCLES_CORE)
#define CYCLES_FIXED_HW(which)	((void)(which), CYCLES_CYCLE_COUNTER)
#endif

/*
 * 0, or a build error when @which is not a constant or names a counter
 * without a fixed register here (a bit-field's width must be a constant,
 * and not negative).
 */
#define CYCLES_FIXED_CHECK(which)					\
	(0 * sizeof(struct {						\
		int cycles_fixed_counter :				\
			((which) >= 0 && (which) < CYCLES_NR_COUNTERS &&	\
			 ((CYCLES_FIXED_COUNTERS >> (which)) & 1)) ? 1 : -1; \
	}))

/* The fixed register of @which (a constant): the bare instruction. */
#if defined(__x86_64__)
#define cycles_fixed_read(which)					\
	cycles_rdpmc((unsigned int)(CYCLES_FIXED_HW(which) +		\
				    CYCLES_FIXED_CHECK(which)))
#else
#define cycles_fixed_read(which)					\
	(CYCLES_FIXED_CHECK(which) + cycles_read_pmccntr())
#endif

/* The hw operand of @which's fixed register, CYCLES_HW_NONE if none. */
static inline unsigned int cycles_fixed_hw(int which)
{
	if (which < 0 || which >= CYCLES_NR_COUNTERS ||
	    !((CYCLES_FIXED_COUNTERS >> which) & 1))
		return CYCLES_HW_NONE;
	return CYCLES_FIXED_HW(which);
}

/* The mask of @w's counters that sit on their fixed register. */
static inline unsigned int cycles_window_on_fixed(const struct cycles_window *w)
{
	unsigned int mask = 0;
	int i;

	for (i = 0; i < CYCLES_NR_COUNTERS; i++)
		if (w->hw[i] != CYCLES_HW_NONE && w->hw[i] == cycles_fixed_hw(i))
			mask |= CYCLES_FIXED(i);
	return mask;
}

/* Sample `lock`, `index` and `pmc_width` of one page, consistently. */
static inline void cycles_window_page(struct cycles_window *w, int i)
{
	const volatile struct perf_event_mmap_page *pc = w->pc[i];
	unsigned int seq, idx, width;
	int user;

	do {
		seq = pc->lock;
		cycles_barrier();
		idx = pc->index;
		user = pc->cap_user_rdpmc && idx && cycles_hw_known(idx - 1);
		width = pc->pmc_width;
		cycles_barrier();
	} while (pc->lock != seq);
	w->seq[i] = seq;
	w->hw[i] = user ? idx - 1 : CYCLES_HW_NONE;
	w->width[i] = width;
}

/*
 * Sample every mapped page of a perf-path window (w->pc[]); mark it begun
 * only if each one is on a counter this thread may read now, there is a
 * cycles page and each counter of w->fixed sits on its fixed register.
 * 0, or -1 (the window is invalid: its end says 0).
 */
static inline int cycles_window_pages(struct cycles_window *w)
{
	int i;

	w->begun = 0;
	for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
		if (!w->pc[i]) {
			w->hw[i] = CYCLES_HW_NONE;
			continue;
		}
		cycles_window_page(w, i);
		/* Not on a counter now: nothing to read raw. */
		if (w->hw[i] == CYCLES_HW_NONE)
			return -1;
	}
	if (!w->pc[CYCLES_CORE])
		return -1;
	w->on_fixed = cycles_window_on_fixed(w);
	if (w->fixed & ~w->on_fixed)
		return -1;
	w->begun = 1;
	return 0;
}

/*
 * Begin a window: resolve the path, the counters and their sequence. 0 if
 * reads can be made in it (cycles_window_read()), -1 if this thread's path
 * offers none (perf read(2), nothing at all) or cycles is not on a counter
 * now. Pin the thread on the module path (pin_cpu()): an unpinned module
 * window is never CYCLES_EXACT, since a move to another CPU and back
 * between its edges cannot be seen (a move that stays is: its end says 0).
 */
/* This thread's context switches so far (voluntary and not). */
static inline long cycles_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return -1;
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

static inline int cycles_window_begin_mask(struct cycles_window *w,
					   unsigned int fixed)
{
	struct cycles_thread *t = cycles_thread();
	struct cycles_state *st;
	cpu_set_t set;
	int i, idx, tries;

	memset(w, 0, sizeof(*w));
	w->fixed = fixed;
	w->path = t->path;
	w->cpu = -1;
	for (i = 0; i < CYCLES_NR_COUNTERS; i++)
		w->hw[i] = CYCLES_HW_NONE;
	if (t->path == CYCLES_PATH_PERF_MMAP) {
		for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
			w->pc[i] = t->pc[i];
			if (!w->pc[i] && t->fd[i] >= 0)
				return -1;	/* open but not mapped */
		}
		if (cycles_window_pages(w) < 0)
			return -1;
		/* The pages stay mapped until it ends (cycles_set_scope). */
		w->epoch = t->epoch;
		w->faults = t->faults;	/* a read in it that faults counts */
		t->windows++;
		return 0;
	}
	if (t->path != CYCLES_PATH_MODULE)
		return -1;
	/*
	 * The CPU, its generation and its indices, all of one CPU: taken
	 * again if the thread moved meanwhile. A move and back between
	 * begin and end cannot be seen here; only a pinned window can be
	 * exact (below).
	 */
	st = cycles_loaded_state();
	for (tries = 0;; tries++) {
		w->cpu = sched_getcpu();
		if (tries == CYCLES_READ_TRIES || w->cpu < 0)
			return -1;
		pthread_mutex_lock(&cycles_module_lock);
		w->generation = cycles_generation_locked(w->cpu);
		for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
			idx = CYCLES_IDX_NONE;
			if (w->cpu < st->nr_cpus)
				idx = i == CYCLES_CORE ? st->cpu[w->cpu].cycle :
				      i == CYCLES_INSN ? st->cpu[w->cpu].insn :
				      st->cpu[w->cpu].ref;
			w->hw[i] = idx >= 0 ? (unsigned int)idx :
				   CYCLES_HW_NONE;
			w->width[i] = 64;
		}
		pthread_mutex_unlock(&cycles_module_lock);
		if (sched_getcpu() == w->cpu)
			break;
	}
	w->pinned = sched_getaffinity(0, sizeof(set), &set) == 0 &&
		    CPU_COUNT(&set) == 1;
#if defined(__aarch64__)
	if (w->hw[CYCLES_INSN] != CYCLES_HW_NONE &&
	    w->hw[CYCLES_INSN] != CYCLES_CYCLE_COUNTER) {
		long ew = cycles_attr_long("event_width", 32);

		w->width[CYCLES_INSN] = ew > 0 && ew <= 64 ? (unsigned int)ew : 32;
	}
#else
	for (i = 0; i < CYCLES_NR_COUNTERS; i++)
		if (w->hw[i] != CYCLES_HW_NONE)
			w->width[i] = cycles_x86_counter_width(w->hw[i]);
#endif
	w->on_fixed = cycles_window_on_fixed(w);
	if (!w->generation || w->hw[CYCLES_CORE] == CYCLES_HW_NONE ||
	    (w->fixed & ~w->on_fixed))
		return -1;
	w->switches = cycles_switches();
	w->switches_end = w->switches;
	cycles_guard_begin(t);
	w->guarded = 1;
	w->epoch = t->epoch;
	w->begun = 1;
	return 0;
}

static inline int cycles_window_begin(struct cycles_window *w)
{
	return cycles_window_begin_mask(w, 0);
}

/*
 * Begin a window whose reads of the counters in @fixed (CYCLES_FIXED(),
 * or-ed) are cycles_window_read_fixed(): as cycles_window_begin(), and -1
 * unless each of them sits on its fixed register now (w->on_fixed says
 * which do). A failed begin needs no end; its end says 0.
 */
static inline int cycles_window_begin_fixed(struct cycles_window *w,
					    unsigned int fixed)
{
	return cycles_window_begin_mask(w, fixed);
}

/*
 * A raw counter value inside a window: the read instruction of the
 * counter's register, chosen at run time. 0 for a counter the window has
 * none of. Only differences mean anything.
 */
static CYCLES_INLINE counter_t cycles_window_read(const struct cycles_window *w,
						  int which)
{
#if defined(__x86_64__)
	if (__builtin_expect(w->hw[which] == CYCLES_HW_NONE, 0))
		return 0;
#endif
	/* arm64: CYCLES_HW_NONE is no register: the switch's 0. */
	return cycles_hw_read(w->hw[which]);
}

/*
 * A raw value of @which (a constant: CYCLES_CORE; x86 also CYCLES_INSN,
 * CYCLES_REF) inside a window begun with cycles_window_begin_fixed() for
 * it: the bare instruction of its fixed register, nothing else.
 */
#define cycles_window_read_fixed(w, which)	((void)(w), cycles_fixed_read(which))

/* b - a for two reads of @which in one window, modulo its width. */
static inline counter_t cycles_window_delta(const struct cycles_window *w,
					    int which, counter_t a, counter_t b)
{
	unsigned int width = w->width[which];

	if (width == 0 || width >= 64)
		return b - a;
	return (b - a) & ((1ULL << width) - 1);
}

/*
 * End a window (once): 0 if it is invalid or its begin failed (discard
 * what was read in it), else CYCLES_VALID, with CYCLES_EXACT where the
 * path is exact. A counter the window has none of (w->hw[which] ==
 * CYCLES_HW_NONE, e.g. no reference cycles) reads 0 in a valid window:
 * check w->hw[which] before using its delta.
 */
static inline unsigned int cycles_window_end(struct cycles_window *w)
{
	struct cycles_thread *t = &cycles_tls;
	int i, faulted;

	cycles_barrier();
	if (w->guarded) {
		w->guarded = 0;
		faulted = cycles_guard_end(t);
	} else {
		faulted = 0;
	}
	/* A window whose begin failed read nothing: never valid. */
	if (!w->begun)
		return 0;
	if (w->path == CYCLES_PATH_PERF_MMAP) {
		/* Its pages were unmapped since (a forked child): invalid. */
		if (w->epoch != t->epoch)
			return 0;
		w->begun = 0;		/* a second end says 0 */
		t->windows--;
		if (t->faults != w->faults)	/* user reads were turned off */
			return 0;
		for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
			const volatile struct perf_event_mmap_page *pc = w->pc[i];

			/* perf writes `index` under `lock`: both, to be sure. */
			if (pc && (pc->lock != w->seq[i] ||
				   pc->index != w->hw[i] + 1))
				return 0;
		}
		return CYCLES_VALID | CYCLES_EXACT;
	}
	if (w->path != CYCLES_PATH_MODULE)
		return 0;
	w->begun = 0;		/* the guard is off: a second end says 0 */
	if (faulted) {
		cycles_rejoin(t);
		return 0;
	}
	if (sched_getcpu() != w->cpu ||
	    cycles_cpu_generation(w->cpu) != w->generation)
		return 0;
	/*
	 * Unpinned, a move to another CPU and back would go unseen. If the
	 * thread was switched out meanwhile, another task's work is in the
	 * CPU's counts: valid for the CPU, not this window's exact count. And
	 * while this thread had perf events with user reads (its path is
	 * perf's now, or its events were re-chosen meanwhile), perf granted
	 * it the counters itself: a moved counter stayed readable, no fault.
	 */
	w->switches_end = cycles_switches();
	return CYCLES_VALID | (t->module_exact && w->pinned &&
			       w->epoch == t->epoch &&
			       w->switches == w->switches_end &&
			       !(t->ready && t->path == CYCLES_PATH_PERF_MMAP) ?
			       CYCLES_EXACT : 0);
}

/*
 * Availability.
 */
#if defined(__x86_64__)
/*
 * For a module without `access` (older), which lets no process in: a user
 * RDPMC outside a process that mapped a perf event faults unless the cpu
 * PMU's rdpmc attribute is 2 (kernels from 4.0 clear CR4.PCE on every
 * switch to another mm otherwise). Hybrid parts have
 * cpu_core and cpu_atom instead of cpu: every one present must be 2.
 * None: an older kernel, where the driver's CR4.PCE stays.
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
 * NULL when the module's counters can be read on this CPU, else which
 * check failed: the module is loaded, has its counters on (rdpmc_fixed 1,
 * where present), user RDPMC is allowed (a module without `access`: rdpmc
 * 2), this CPU's user_access (where present) is 1, it has a cycle counter,
 * and this process is let in (where access is "members", it is let in now
 * if it was not; the reason then says why it cannot be). Re-reads the
 * cache (cycles_refresh()). Never faults.
 */
static inline const char *cycles_module_reason(void)
{
	char buf[16];
	int cpu, cycle;

	if (access(CYCLES_SYSFS_DIR, R_OK) < 0)
		return "module not loaded";
	if (cycles_attr_long("rdpmc_fixed", 1) != 1)
		return "rdpmc_fixed is not 1";
	if (cycles_read_attr("access", buf, sizeof(buf)) < 0 &&
	    !cycles_rdpmc_allowed())
		return "the cpu PMU's rdpmc is not 2";
	cpu = sched_getcpu();
	if (cycles_refresh_cpu(cpu, &cycle) < 0)
		return "no counter placement published";
	if (cycles_read_cpu_attr(cpu, "user_access", buf, sizeof(buf)) >= 0 &&
	    strcmp(buf, "1"))
		return "user_access of this CPU is not 1";
	if (cycle < 0)
		return "no cycle counter on this CPU";
	if (cycles_perfmon_version() <= 0)
		return "no architectural perfmon";
	return cycles_thread_join(&cycles_tls);
}

/* What would let perf grant user reads here. */
#define CYCLES_PERF_USER_READ_FIX \
	"the cpu PMU's rdpmc attribute is 0 (echo 1 > " CYCLES_RDPMC_ATTR ")"
#else
/* The PMU version: sysfs pmu_version (1 = PMUv3, 4 = v3p1, ...), else 1. */
static inline int cycles_perfmon_version(void)
{
	long version = cycles_attr_long("pmu_version", 1);

	return version > 0 ? (int)version : 1;
}

/*
 * NULL when the module's counters can be read on this CPU, else which
 * check failed: the module is loaded, grants user access (user_access 1),
 * holds a cycle counter on this CPU (cpuN/cycle_index >= 0) and lets this
 * thread in (where access is "members", the thread is let in now if it
 * was not; the reason then says why it cannot be). Re-reads the cache
 * (cycles_refresh()). Never faults.
 */
static inline const char *cycles_module_reason(void)
{
	int cycle;

	if (access(CYCLES_SYSFS_DIR, R_OK) < 0)
		return "module not loaded";
	if (cycles_attr_long("user_access", 0) != 1)
		return "user_access is not 1";
	if (cycles_refresh_cpu(sched_getcpu(), &cycle) < 0)
		return "no counter placement published";
	if (cycle < 0)
		return "no cycle counter on this CPU";
	return cycles_thread_join(&cycles_tls);
}

#define CYCLES_PERF_USER_READ_FIX \
	"perf grants no EL0 reads (Linux >= 5.17 with sysctl " \
	"kernel.perf_user_access=1 does)"
#endif

/*
 * The checks choose again where nothing could be read or the module was
 * (it may have been loaded or reconfigured since); a perf path stays.
 */
static inline void cycles_thread_recheck(struct cycles_thread *t)
{
	if (t->path == CYCLES_PATH_NONE || t->path == CYCLES_PATH_MODULE) {
		cycles_thread_close(t);
		cycles_thread_setup(t);
	}
}

/* Why perf_event_open() failed, and what would fix it. */
static inline void cycles_perf_reason(int err, char *buf, size_t size)
{
	long paranoid = -9;
	char p[16];

	if (cycles_read_file("/proc/sys/kernel/perf_event_paranoid", p,
			     sizeof(p)) > 0)
		paranoid = strtol(p, NULL, 10);
	switch (err) {
	case EACCES:
	case EPERM:
		snprintf(buf, size, "perf_event_open refused (%s; "
			 "kernel.perf_event_paranoid is %ld): set sysctl "
			 "kernel.perf_event_paranoid=2 or grant CAP_PERFMON",
			 strerror(err), paranoid);
		break;
	case ENOSYS:
		snprintf(buf, size, "perf_event_open blocked (ENOSYS: a "
			 "seccomp profile, e.g. a container's, or an emulator "
			 "without it)");
		break;
	case ENOENT:
	case EOPNOTSUPP:
	case ENODEV:
		snprintf(buf, size, "perf has no hardware cycles event here "
			 "(%s: no PMU, or a VM without a virtual PMU)",
			 strerror(err));
		break;
	default:
		snprintf(buf, size, "perf_event_open failed (%s)",
			 strerror(err));
	}
}

/*
 * NULL when this thread has a path to read cycles from (perfmon_available()
 * > 0), else every path's failure and its remedy. Never faults. The text
 * stays valid until this thread's next call.
 */
static inline const char *cycles_unavailable_reason(void)
{
	struct cycles_thread *t = cycles_thread();
	const char *mod;
	char perf[256];
	int n;

	cycles_thread_recheck(t);
	if (t->path != CYCLES_PATH_NONE)
		return NULL;
	mod = cycles_module_reason();
	/* CPU-wide: the module's own check, worded as it always was. */
	if (t->scope == CYCLES_SCOPE_CPU_ID)
		return mod ? mod : "no cycle counter on this CPU";
	if (t->perf_errno)
		cycles_perf_reason(t->perf_errno, perf, sizeof(perf));
	else
		snprintf(perf, sizeof(perf), "%s", CYCLES_PERF_USER_READ_FIX);
	n = snprintf(t->reason, sizeof(t->reason), "perf: %s; module: %s%s",
		     perf, mod ? mod : "usable now",
		     mod && !strcmp(mod, "module not loaded") ?
		     " (modprobe simple-pmu)" : "");
	(void)n;
	return t->reason;
}

/*
 * NULL when this thread reads through perf user reads (the exact, cheap
 * path), else why not and what would enable it, even where another path
 * works (read(2) on arm64 before 5.17, the module). Valid until this
 * thread's next call of it or of cycles_unavailable_reason().
 */
static inline const char *cycles_path_note(void)
{
	struct cycles_thread *t = cycles_thread();

	if (t->path == CYCLES_PATH_PERF_MMAP)
		return NULL;
	if (t->scope == CYCLES_SCOPE_CPU_ID)
		return "CPU-wide counters asked for (CYCLES_SCOPE_CPU)";
	if (t->perf_errno)
		cycles_perf_reason(t->perf_errno, t->reason, sizeof(t->reason));
	else
		snprintf(t->reason, sizeof(t->reason), "%s",
			 CYCLES_PERF_USER_READ_FIX);
	return t->reason;
}

/*
 * > 0 when this thread can read cycles (see the top of the file for what
 * the number is, against 2011's meaning), 0 otherwise. On the module path
 * it re-checks the module (as in 2011) and re-reads its placement.
 */
static inline int perfmon_available(void)
{
	int saved = errno;	/* as cycles_value() */
	struct cycles_thread *t = cycles_thread();
	int v = 0;

	cycles_thread_recheck(t);
	if (t->path != CYCLES_PATH_NONE &&
	    (t->path != CYCLES_PATH_MODULE || !cycles_module_reason())) {
		v = cycles_perfmon_version();
		if (v <= 0)
			v = 1;
	}
	errno = saved;
	return v;
}

/*
 * A CPU mask as large as the kernel's: cpu_set_t holds 1024 CPUs, and
 * sched_{get,set}affinity() refuse a mask smaller than the kernel's.
 */
static inline cpu_set_t *cycles_cpu_alloc(size_t *size)
{
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	int n = conf > CPU_SETSIZE ? (int)conf : CPU_SETSIZE;
	cpu_set_t *set;

	for (;;) {
		set = CPU_ALLOC(n);
		if (!set)
			return NULL;
		*size = CPU_ALLOC_SIZE(n);
		if (sched_getaffinity(0, *size, set) == 0 || errno != EINVAL ||
		    n > (1 << 22))
			return set;
		CPU_FREE(set);
		n *= 2;
	}
}

/* The mask pin_cpu() saved where *oldcpus is too small for it. */
CYCLES_WEAK CYCLES_TLS cpu_set_t *cycles_saved_mask;
CYCLES_WEAK CYCLES_TLS size_t cycles_saved_size;

/*
 * Pin the calling thread to the CPU it runs on; the old mask goes to
 * *oldcpus unless it is NULL (on a host with more CPUs than a cpu_set_t
 * holds, the thread keeps it, and unpin_cpu(oldcpus) restores it). 0 on
 * success, -1 with errno set.
 */
static inline int pin_cpu(cpu_set_t *oldcpus)
{
	cpu_set_t *one;
	size_t size;
	int cpu, rc;

	if (oldcpus) {
		if (sched_getaffinity(0, sizeof(*oldcpus), oldcpus) < 0) {
			if (errno != EINVAL)
				return -1;
			CPU_FREE(cycles_saved_mask);
			cycles_saved_mask = cycles_cpu_alloc(&cycles_saved_size);
			if (!cycles_saved_mask)
				return -1;
			CPU_ZERO(oldcpus);
		}
	}
	cpu = sched_getcpu();
	if (cpu < 0)
		return -1;
	one = CPU_ALLOC(cpu + 1);
	if (!one)
		return -1;
	size = CPU_ALLOC_SIZE(cpu + 1);
	CPU_ZERO_S(size, one);
	CPU_SET_S(cpu, size, one);
	rc = sched_setaffinity(0, size, one);
	CPU_FREE(one);
	return rc;
}

/*
 * Give back the mask pin_cpu() saved; NULL (nothing saved) allows every
 * CPU again (the kernel keeps the thread within its cpuset).
 */
static inline void unpin_cpu(cpu_set_t *oldcpus)
{
	cpu_set_t *all;
	size_t size;

	if (oldcpus && CPU_COUNT(oldcpus) == 0 && cycles_saved_mask) {
		sched_setaffinity(0, cycles_saved_size, cycles_saved_mask);
		CPU_FREE(cycles_saved_mask);
		cycles_saved_mask = NULL;
		return;
	}
	if (oldcpus) {
		sched_setaffinity(0, sizeof(*oldcpus), oldcpus);
		return;
	}
	all = cycles_cpu_alloc(&size);
	if (!all)
		return;
	memset(all, 0xff, size);
	sched_setaffinity(0, size, all);
	CPU_FREE(all);
}

#endif /* CYCLES_H */
