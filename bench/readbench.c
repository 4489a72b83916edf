// SPDX-License-Identifier: GPL-2.0
/*
 * readbench: what one read of a counter or clock costs, for every read path
 * available where it runs, side by side in one process pinned to one CPU.
 *
 *   readbench [--runs R] [--ms T]       nanoseconds: JSON on stdout
 *   (each mode: --cpu C runs on CPU C, else on the CPU it starts on)
 *   readbench --insns [--reads N] [--windows W]
 *                                       instructions retired, counted by the
 *                                       simple-pmu driver's own instruction
 *                                       counter (read raw at its published
 *                                       index, CPU-wide) where the module is
 *                                       loaded, else by a perf instructions
 *                                       event of this thread (user space,
 *                                       read(2)): one line a path
 *   readbench --once N                  each available path's loop once, N
 *                                       reads (for valgrind --tool=callgrind)
 *
 * Paths: cycles.h's reads: the module's CPU-wide counter through
 * cycles_read() (guarded: `driver`), a read inside a window on the module
 * path (`window-cpu`) and on the perf self-monitoring path (`window`), the
 * fixed-register read inside a window begun for it on each
 * (`window-cpu-fixed`, `window-fixed`: cycles_window_read_fixed(), the
 * read the 1.2x goal is about; it needs cycles on PMCCNTR_EL0 / fixed
 * counter 1, so `window-fixed` runs only where the module does not hold
 * it), and cycles_read() on the self-monitoring path outside a window
 * (`selfmon`: the seqlock read of the mmap page);
 * the bare instruction (RDPMC / mrs PMCCNTR_EL0 alone), RDTSC, RDTSCP, LFENCE;RDTSC (x86-64),
 * CNTVCT_EL0 (arm64), clock_gettime(CLOCK_MONOTONIC) through the vDSO, perf
 * read(2) of a perf event fd, and perf mmap self-monitoring: the seqlock read
 * of the event's mmap page as include/uapi/linux/perf_event.h documents it
 * and libperf does it, with RDPMC / mrs when the page says cap_user_rdpmc.
 * A path that cannot run here is listed with the reason its probe found.
 *
 * Each path is one loop function with the read inlined, so a window of N reads
 * costs N reads plus the loop; the same loop without a read (`empty`) is
 * measured beside each and subtracted. The statistics (median, spread, ratio)
 * are computed by the caller (pmubuild/bench/bench.py) from the raw samples printed.
 *
 * Also built static for the test guests (tests/guest/src/readbench.c is a
 * link to this file): tests/guest/arm64/45-bench-icount.sh runs --insns.
 */
#define _GNU_SOURCE 1
/* Each path sets the scope it reads (path.scope): cycles_set_scope(). */
#include <cycles.h>

#include <errno.h>
#include <linux/perf_event.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#define DEFAULT_RUNS		11
#define DEFAULT_MS		10
#define DEFAULT_READS		100
#define DEFAULT_WINDOWS		7
#define MAX_RUNS		101
#define MAX_WINDOWS		101
#define REASON_LEN		200
/* arm64: perf_event_attr.config1 bit 1 asks for user reads (format "rdpmc"). */
#define PERF_ARM64_RDPMC	(1ull << 1)
/* How long a faulting counter read is retried (the driver re-grants access). */
#define FAULT_WAIT_NS		3000000000ull

/* Keeps the compiler from merging or dropping loop iterations. */
#define BARRIER()	__asm__ __volatile__("" : : : "memory")

static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A read that faults (no user access) jumps back here instead of dying. */
static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_armed;

static void on_fault(int sig)
{
	if (!fault_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	siglongjmp(fault_jmp, sig);
}

static void catch_faults(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fault;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGILL, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
}

/* ---- perf: one task-bound cycles event, its fd and its mmap page ---- */

static int perf_fd = -1;
static struct perf_event_mmap_page *perf_page;
static char perf_reason[REASON_LEN];

static const char *errno_name(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case ENODEV: return "ENODEV";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EINVAL: return "EINVAL";
	case ENOSYS: return "ENOSYS";
	case EBUSY: return "EBUSY";
	default: return "errno";
	}
}

/*
 * Open the cycles event of this thread once, counting user space only, with
 * arm64's config1 bit 1 (the arm PMU's `rdpmc` format, config1:1: user access
 * for this event, honoured when kernel.perf_user_access is 1, from 5.17).
 * NULL when open, else why not.
 */
static const char *perf_open(void)
{
	struct perf_event_attr attr;
	int e;

	if (perf_fd >= 0)
		return NULL;
	if (perf_reason[0])
		return perf_reason;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
#if defined(__aarch64__)
	attr.config1 = PERF_ARM64_RDPMC;
#endif
	perf_fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (perf_fd < 0 && attr.config1 && (errno == EINVAL || errno == EOPNOTSUPP)) {
		attr.config1 = 0;	/* a kernel that refuses the rdpmc bit */
		perf_fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	}
	if (perf_fd < 0) {
		e = errno;
		snprintf(perf_reason, sizeof(perf_reason),
			 "%sperf_event_open cycles: %s (%s)",
			 e == ENOENT || e == ENODEV ? "no PMU: " : "",
			 errno_name(e), strerror(e));
		return perf_reason;
	}
	return NULL;
}

static const char *probe_perf_read(void)
{
	uint64_t v;

	if (perf_open())
		return perf_reason;
	if (read(perf_fd, &v, sizeof(v)) != sizeof(v))
		return "read of the perf event fd failed";
	return NULL;
}

static char mmap_reason[REASON_LEN];

static const char *probe_perf_mmap(void)
{
	void *p;

	if (perf_open())
		return perf_reason;
	if (!perf_page) {
		p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED,
			 perf_fd, 0);
		if (p == MAP_FAILED) {
			snprintf(mmap_reason, sizeof(mmap_reason),
				 "mmap of the perf event: %s", strerror(errno));
			return mmap_reason;
		}
		perf_page = p;
	}
	if (!perf_page->cap_user_rdpmc) {
#if defined(__aarch64__)
		return "the perf mmap page says cap_user_rdpmc 0 (kernel.perf_user_access "
		       "is 0, or a kernel before 5.17)";
#else
		return "the perf mmap page says cap_user_rdpmc 0 (the cpu PMU's rdpmc "
		       "attribute is 0)";
#endif
	}
	if (!perf_page->index)
		return "the perf event is not on a counter (index 0)";
	return NULL;
}

/* ---- the reads, each inlined into its loop ---- */

#if defined(__x86_64__)
static CYCLES_INLINE uint64_t hw_counter(unsigned int idx)
{
	return cycles_rdpmc(idx);
}
#else
static CYCLES_INLINE uint64_t hw_counter(unsigned int idx)
{
	return cycles_read_counter((int)idx);
}
#endif

/*
 * The user-space read of include/uapi/linux/perf_event.h (struct
 * perf_event_mmap_page) and libperf's perf_mmap__read_self(): retry while the
 * kernel updates the page (lock odd or changed), count = offset + the
 * counter's value sign-extended from pmc_width bits.
 */
static CYCLES_INLINE uint64_t perf_mmap_read(volatile struct perf_event_mmap_page *pc)
{
	uint32_t seq, idx;
	uint64_t count, pmc;
	uint16_t width;

	do {
		seq = pc->lock;
		BARRIER();
		idx = pc->index;
		count = (uint64_t)pc->offset;
		if (pc->cap_user_rdpmc && idx) {
			width = pc->pmc_width;
			pmc = hw_counter(idx - 1);
			pmc <<= 64 - width;
			count += (uint64_t)((int64_t)pmc >> (64 - width));
		}
		BARRIER();
	} while (pc->lock != seq);
	return count;
}

#if defined(__x86_64__)
static int bare_index;	/* the index the bare instruction reads (RDPMC) */
#endif

#define LOOP(name, read)						\
static __attribute__((noinline)) void run_##name(long n)		\
{									\
	uint64_t acc = 0;						\
	long i;								\
									\
	for (i = 0; i < n; i++) {					\
		acc += (read);						\
		BARRIER();						\
	}								\
	sink = acc;							\
}

/* The window the window paths read in: begun before, ended after (prepare()). */
static struct cycles_window bench_win;

LOOP(empty, (uint64_t)i)
LOOP(driver, unhalted_core())
LOOP(selfmon, unhalted_core())
LOOP(window, cycles_window_read(&bench_win, CYCLES_CORE))
LOOP(window_cpu, cycles_window_read(&bench_win, CYCLES_CORE))
LOOP(window_fixed, cycles_window_read_fixed(&bench_win, CYCLES_CORE))
LOOP(window_cpu_fixed, cycles_window_read_fixed(&bench_win, CYCLES_CORE))
#if defined(__x86_64__)
LOOP(bare, cycles_rdpmc((unsigned int)bare_index))
LOOP(rdtsc, rdtsc())
LOOP(rdtscp, rdtscp())
LOOP(lfence_rdtsc, (sync_core(), rdtsc()))
#else
LOOP(bare, cycles_read_pmccntr())
LOOP(cntvct, rdtsc())
#endif
LOOP(clock_gettime, ({ struct timespec ts;
		       clock_gettime(CLOCK_MONOTONIC, &ts);
		       (uint64_t)ts.tv_nsec; }))
LOOP(perf_read, ({ uint64_t v = 0;
		   if (read(perf_fd, &v, sizeof(v)) != sizeof(v))
			   v = 0;
		   v; }))
LOOP(perf_mmap, perf_mmap_read(perf_page))

/* ---- probes: NULL when the path can run here, else why not ---- */

static char driver_reason[REASON_LEN];

#define SCOPE_ANY	(-1)

/* This thread's cycles.h scope, changed only when a path needs another. */
static int bench_scope = SCOPE_ANY;

static void use_scope(int scope)
{
	if (scope != SCOPE_ANY && scope != bench_scope) {
		cycles_set_scope(scope);
		bench_scope = scope;
	}
}

/* One read of each kind must not fault: the driver's, then the bare one. */
static const char *probe_driver(void)
{
	const char *why;
	volatile int step = 0;

	use_scope(CYCLES_SCOPE_CPU_ID);
	why = cycles_unavailable_reason();
	if (why) {
		snprintf(driver_reason, sizeof(driver_reason), "simple-pmu: %.*s", (int)sizeof(driver_reason) - 13, why);
		return driver_reason;
	}
	fault_armed = 1;
	if (sigsetjmp(fault_jmp, 1)) {
		fault_armed = 0;
		snprintf(driver_reason, sizeof(driver_reason),
			 "simple-pmu: the %s read faulted", step ? "bare" : "driver's");
		return driver_reason;
	}
	sink = unhalted_core();
	step = 1;
#if defined(__x86_64__)
	bare_index = cycles_cycle_index();
	sink = cycles_rdpmc((unsigned int)bare_index);
#else
	sink = cycles_read_pmccntr();
#endif
	fault_armed = 0;
	return NULL;
}

static const char *probe_selfmon(void);

static int module_loaded(void)
{
	return access(CYCLES_SYSFS_DIR, F_OK) == 0;
}

/*
 * Without the module: the instruction alone, with the EL0 access perf
 * grants this thread for its self-monitoring events (cycles.h's, on the
 * thread scope); x86: RDPMC of the index perf gives this thread's cycles.
 */
static const char *probe_bare_self(void)
{
	struct cycles_window w;
	const char *why = probe_selfmon();
	volatile int ok = 0;

	if (why)
		return why;
	if (cycles_window_begin(&w) < 0)
		return "cycles_window_begin() failed: cycles is not on a counter now";
	cycles_window_end(&w);
#if defined(__x86_64__)
	bare_index = (int)w.hw[CYCLES_CORE];
#endif
	fault_armed = 1;
	if (!sigsetjmp(fault_jmp, 1)) {
#if defined(__x86_64__)
		sink = cycles_rdpmc((unsigned int)bare_index);
#else
		sink = cycles_read_pmccntr();
#endif
		ok = 1;
	}
	fault_armed = 0;
	return ok ? NULL : "the bare read faulted (no user access)";
}

static const char *probe_bare(void)
{
#if defined(__aarch64__)
	int idx;
#endif
	const char *why;

	if (!module_loaded())
		return probe_bare_self();
#if defined(__aarch64__)
	idx = cycles_cycle_index();
#endif
	why = probe_driver();

	if (why)
		return why;
#if defined(__aarch64__)
	if (idx != CYCLES_CYCLE_COUNTER)
		return "simple-pmu's cycle counter is not PMCCNTR_EL0 on this CPU";
#endif
	return NULL;
}

static const char *probe_always(void)
{
	return NULL;
}

static char selfmon_reason[REASON_LEN];

/* cycles.h on the thread scope: perf self-monitoring with user reads. */
static const char *probe_selfmon(void)
{
	const char *why;

	use_scope(CYCLES_SCOPE_THREAD_ID);
	if (cycles_path() == CYCLES_PATH_PERF_MMAP)
		return NULL;
	why = cycles_path_note();
	snprintf(selfmon_reason, sizeof(selfmon_reason), "cycles.h reads through %s: %.120s",
		 cycles_path_name(cycles_path()), why ? why : "");
	return selfmon_reason;
}

static const char *probe_window(void)
{
	const char *why = probe_selfmon();

	if (why)
		return why;
	if (cycles_window_begin(&bench_win) < 0)
		return "cycles_window_begin() failed (an event not on a counter now)";
	cycles_window_end(&bench_win);
	return NULL;
}

/* Where cycles is for a fixed window that could not begin, and why. */
#if defined(__x86_64__)
#define FIXED_NAME	"fixed counter 1 (RDPMC 0x40000001)"
#else
#define FIXED_NAME	"PMCCNTR_EL0"
#endif

static char fixed_reason[REASON_LEN];

static const char *not_fixed(const char *path)
{
	unsigned int hw = bench_win.hw[CYCLES_CORE];

	if (cycles_window_begin(&bench_win) < 0)
		return "cycles_window_begin() failed";
	cycles_window_end(&bench_win);
	snprintf(fixed_reason, sizeof(fixed_reason),
		 "%s: cycles is not on " FIXED_NAME " here but on hw %u%s", path,
		 hw, module_loaded() && !strcmp(path, "perf") ?
		 " (the module holds it)" : "");
	return fixed_reason;
}

static const char *probe_window_fixed(void)
{
	const char *why = probe_selfmon();

	if (why)
		return why;
	if (cycles_window_begin_fixed(&bench_win, CYCLES_FIXED(CYCLES_CORE)) < 0)
		return not_fixed("perf");
	cycles_window_end(&bench_win);
	return NULL;
}

static const char *probe_window_cpu_fixed(void)
{
	const char *why = probe_driver();

	if (why)
		return why;
	use_scope(CYCLES_SCOPE_CPU_ID);
	if (cycles_window_begin_fixed(&bench_win, CYCLES_FIXED(CYCLES_CORE)) < 0)
		return not_fixed("module");
	cycles_window_end(&bench_win);
	return NULL;
}

static const char *probe_window_cpu(void)
{
	const char *why = probe_driver();

	if (why)
		return why;
	use_scope(CYCLES_SCOPE_CPU_ID);
	if (cycles_window_begin(&bench_win) < 0)
		return "cycles_window_begin() failed on the module path";
	cycles_window_end(&bench_win);
	return NULL;
}

static const char *probe_vdso(void)
{
	if (!getauxval(AT_SYSINFO_EHDR))
		return "no vDSO in this process (clock_gettime would be a system call)";
	return NULL;
}

#if defined(__x86_64__)
static const char *probe_rdtscp(void)
{
	unsigned int regs[4];

	cycles_cpuid(0x80000001, 0, regs);
	return regs[3] & (1U << 27) ? NULL : "the CPU has no RDTSCP (CPUID 0x80000001 EDX bit 27)";
}
#endif

static __attribute__((unused)) const char *not_x86(void)
{
	return "x86-64 only";
}

static __attribute__((unused)) const char *not_arm64(void)
{
	return "arm64 only";
}

struct path {
	const char *name;
	const char *what;
	const char *(*probe)(void);
	void (*run)(long n);
	int perf;	/* opens perf: run after the driver's reads (arm64: a perf
			 * event's start closes the driver's user access a while) */
	int scope;	/* the cycles.h scope it reads, or SCOPE_ANY */
	int window;	/* reads inside bench_win, begun around its runs:
			 * WINDOW, or FIXED (begun for the fixed read of cycles) */
};

#define WINDOW	1
#define FIXED	2

#if defined(__x86_64__)
#define X86(fn)		fn
#define ARM64(fn)	NULL
#define ARM64_PROBE	not_arm64
#define X86_PROBE(p)	p
#else
#define X86(fn)		NULL
#define ARM64(fn)	fn
#define ARM64_PROBE	probe_always
#define X86_PROBE(p)	not_x86
#endif

#define CPU_SCOPE	CYCLES_SCOPE_CPU_ID
#define THREAD_SCOPE	CYCLES_SCOPE_THREAD_ID

static const struct path paths[] = {
	{ "driver", "cycles.h cycles_read(), module path (guarded)", probe_driver, run_driver, 0,
	  CPU_SCOPE, 0 },
	{ "window-cpu", "cycles.h cycles_window_read(), module path", probe_window_cpu,
	  run_window_cpu, 0, CPU_SCOPE, WINDOW },
	{ "window-cpu-fixed", "cycles.h cycles_window_read_fixed(), module path",
	  probe_window_cpu_fixed, run_window_cpu_fixed, 0, CPU_SCOPE, FIXED },
#if defined(__x86_64__)
	{ "bare", "RDPMC of the published index alone", probe_bare, run_bare, 0, SCOPE_ANY, 0 },
#else
	{ "bare", "mrs PMCCNTR_EL0 alone", probe_bare, run_bare, 0, SCOPE_ANY, 0 },
#endif
	{ "rdtsc", "RDTSC", X86_PROBE(probe_always), X86(run_rdtsc), 0, SCOPE_ANY, 0 },
	{ "rdtscp", "RDTSCP", X86_PROBE(probe_rdtscp), X86(run_rdtscp), 0, SCOPE_ANY, 0 },
	{ "lfence-rdtsc", "LFENCE;RDTSC", X86_PROBE(probe_always), X86(run_lfence_rdtsc), 0, SCOPE_ANY, 0 },
	{ "cntvct", "mrs CNTVCT_EL0", ARM64_PROBE, ARM64(run_cntvct), 0, SCOPE_ANY, 0 },
	{ "clock_gettime", "clock_gettime(CLOCK_MONOTONIC), vDSO", probe_vdso,
	  run_clock_gettime, 0, SCOPE_ANY, 0 },
	/*
	 * cycles.h's events before readbench's own (perf-mmap, perf-read):
	 * perf gives PMCCNTR_EL0 to the first cycles event of the thread.
	 */
	{ "selfmon", "cycles.h cycles_read(), perf self-monitoring path", probe_selfmon,
	  run_selfmon, 1, THREAD_SCOPE, 0 },
	{ "window", "cycles.h cycles_window_read(), perf self-monitoring path", probe_window,
	  run_window, 1, THREAD_SCOPE, WINDOW },
	{ "window-fixed", "cycles.h cycles_window_read_fixed(), perf self-monitoring path",
	  probe_window_fixed, run_window_fixed, 1, THREAD_SCOPE, FIXED },
	{ "perf-mmap", "perf mmap self-monitoring (seqlock + RDPMC/mrs)", probe_perf_mmap,
	  run_perf_mmap, 1, SCOPE_ANY, 0 },
	{ "perf-read", "perf read(2) of the event fd", probe_perf_read, run_perf_read, 1,
	  SCOPE_ANY, 0 },
};

/*
 * Before a path's runs: its scope, and for a window path the window (its
 * begin and end stay outside the measured loops). 0, or -1 if the window
 * cannot begin.
 */
static int prepare(const struct path *p)
{
	use_scope(p->scope);
	if (p->window &&
	    cycles_window_begin_fixed(&bench_win, p->window == FIXED ?
				      CYCLES_FIXED(CYCLES_CORE) : 0) < 0)
		return -1;
	return 0;
}

/* After them: whether the window held (1), did not (0), or there was none (-1). */
static int finish(const struct path *p)
{
	if (!p->window)
		return -1;
	return cycles_window_end(&bench_win) & CYCLES_VALID ? 1 : 0;
}

#define NR_PATHS	(sizeof(paths) / sizeof(paths[0]))

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "readbench: bad %s: %s (%ld..%ld)\n", what, s, lo, hi);
		exit(2);
	}
	return v;
}

static double window_ns(void (*run)(long), long n)
{
	uint64_t t0 = now_ns();

	run(n);
	return (double)(now_ns() - t0);
}

/* Reads per window so that one window takes about ms milliseconds. */
static long calibrate(void (*run)(long), long ms)
{
	long n = 1000;
	double t;

	for (;;) {
		t = window_ns(run, n);
		if (t >= (double)ms * 1e5 || n >= (1L << 30))
			break;
		n *= 4;
	}
	n = (long)((double)n * (double)ms * 1e6 / (t > 1 ? t : 1));
	return n < 1000 ? 1000 : n;
}

static void header(const char *unit)
{
	int cpu = sched_getcpu();

	printf("{\"tool\": \"readbench\", \"unit\": \"%s\", \"arch\": ", unit);
#if defined(__x86_64__)
	json_string("x86_64");
#else
	json_string("aarch64");
#endif
	printf(", \"cpu\": %d", cpu);
}

static int bench_ns(long runs, long ms)
{
	const struct path *p;
	const char *why;
	double path_ns[MAX_RUNS], loop_ns[MAX_RUNS];
	long n, r;
	unsigned int i;

	header("ns");
	printf(", \"runs\": %ld, \"window_ms\": %ld, \"paths\": [", runs, ms);
	for (i = 0; i < NR_PATHS; i++) {
		p = &paths[i];
		why = p->probe();
		printf("%s\n  {\"name\": ", i ? "," : "");
		json_string(p->name);
		printf(", \"what\": ");
		json_string(p->what);
		if (why) {
			printf(", \"available\": false, \"reason\": ");
			json_string(why);
			printf("}");
			continue;
		}
		if (prepare(p) < 0) {
			printf(", \"available\": false, \"reason\": \"the window could not "
			       "begin\"}");
			continue;
		}
		n = calibrate(p->run, ms);
		for (r = 0; r < runs; r++) {
			loop_ns[r] = window_ns(run_empty, n) / (double)n;
			path_ns[r] = window_ns(p->run, n) / (double)n;
		}
		finish(p);
		printf(", \"available\": true, \"reads\": %ld, \"read_ns\": [", n);
		for (r = 0; r < runs; r++)
			printf("%s%.3f", r ? ", " : "", path_ns[r]);
		printf("], \"loop_ns\": [");
		for (r = 0; r < runs; r++)
			printf("%s%.3f", r ? ", " : "", loop_ns[r]);
		printf("]}");
	}
	printf("\n]}\n");
	return 0;
}

/*
 * ---- instructions, counted by the driver's INST_RETIRED counter ----
 *
 * The instrument reads the module's counter raw at its published index,
 * whatever scope this thread's cycles.h state is in (the paths change it),
 * under this program's fault handler; the generation around each window
 * says whether the index still holds.
 *
 * Without the module (so that cycles.h's self-monitoring cycles event can
 * have PMCCNTR_EL0, which the module holds while loaded): a perf
 * instructions event of this thread, user space only, read with read(2);
 * its time_enabled and time_running around each window say whether it
 * counted all of it. Its EL0 instructions around the reads are the same
 * in every window: the 2n - n difference cancels them, as the module
 * instrument's.
 */

static uint64_t insn_mask = ~0ull;
static unsigned int instr_hw = CYCLES_HW_NONE;
static int instr_fd = -1;	/* the perf instrument, -1: the module's */
static char instr_reason[REASON_LEN];

/* Open the perf instrument: NULL, or why not. */
static const char *perf_instrument_open(void)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_INSTRUCTIONS;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED |
			   PERF_FORMAT_TOTAL_TIME_RUNNING;
	instr_fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (instr_fd < 0) {
		snprintf(instr_reason, sizeof(instr_reason),
			 "simple-pmu: module not loaded, and perf_event_open "
			 "instructions: %s", strerror(errno));
		return instr_reason;
	}
	return NULL;
}

/* The perf instrument's count, *dt its time_enabled - time_running. */
static CYCLES_INLINE uint64_t perf_instrument(uint64_t *dt)
{
	uint64_t v[3] = { 0, 0, 1 };

	if (read(instr_fd, v, sizeof(v)) != sizeof(v))
		v[0] = 0;
	*dt = v[1] - v[2];
	return v[0];
}

static CYCLES_INLINE uint64_t instrument(void)
{
	return cycles_hw_read(instr_hw);
}

/* This CPU's generation, and the instrument's index as of it; 0 if none. */
static unsigned long instrument_generation(void)
{
	unsigned long gen = cycles_generation();
	int idx = cycles_insn_index();

	instr_hw = idx >= 0 ? (unsigned int)idx : CYCLES_HW_NONE;
	return instr_hw == CYCLES_HW_NONE ? 0 : gen;
}

/*
 * Instructions retired by run(n) on this CPU, as insn_retired() counts them:
 * the smallest of `windows` windows within one generation (QEMU's count is
 * global: the other vCPU can only add). A window whose read faults (perf
 * just closed user access) is done again once reads work; 0 if they do not
 * come back within FAULT_WAIT_NS.
 */
static uint64_t insns_of(void (*run)(long), long n, long windows)
{
	volatile uint64_t best = ~0ull, start = now_ns();
	volatile long w = 0;
	uint64_t a, b;
	unsigned long gen;

	fault_armed = 1;
	if (sigsetjmp(fault_jmp, 1)) {
		if (now_ns() - start > FAULT_WAIT_NS) {
			fault_armed = 0;
			return 0;
		}
	}
	while (instr_fd >= 0 && w < windows) {
		uint64_t da, db;

		a = perf_instrument(&da);
		run(n);
		b = perf_instrument(&db);
		if (!a || !b) {
			fault_armed = 0;
			return 0;
		}
		if (da != db)	/* off its counter for part of the window */
			continue;
		if (b - a < best)
			best = b - a;
		w++;
	}
	while (w < windows) {
		gen = instrument_generation();
		if (!gen) {
			fault_armed = 0;
			return 0;
		}
		a = instrument();
		run(n);
		b = instrument();
		if (cycles_generation() != gen)
			continue;
		if (((b - a) & insn_mask) < best)
			best = (b - a) & insn_mask;
		w++;
	}
	fault_armed = 0;
	return best;
}

/*
 * The cost of one read, exactly: a window of 2n reads minus one of n reads
 * cancels what a window costs besides its reads (the calls, the reads of the
 * instrument), and the same difference of the empty loop is subtracted.
 */
static int insns_path(const struct path *p, long reads, long windows)
{
	uint64_t e1, e2, p1, p2;
	int held;

	if (prepare(p) < 0) {
		printf("unavailable path=%s reason=the window could not begin\n", p->name);
		return 0;
	}
	e1 = insns_of(run_empty, reads, windows);
	e2 = insns_of(run_empty, 2 * reads, windows);
	p1 = insns_of(p->run, reads, windows);
	p2 = insns_of(p->run, 2 * reads, windows);
	held = finish(p);
	if (!e1 || !e2 || !p1 || !p2) {
		printf("unavailable path=%s reason=the instrument's reads kept %s\n", p->name,
		       instr_fd >= 0 ? "failing" : "faulting");
		return 1;
	}
	/* A window's validity does not change what a read costs: said, not used. */
	printf("path=%s window=%llu window2=%llu empty=%llu empty2=%llu per_read=%.2f%s\n",
	       p->name, (unsigned long long)p1, (unsigned long long)p2,
	       (unsigned long long)e1, (unsigned long long)e2,
	       (((double)p2 - (double)p1) - ((double)e2 - (double)e1)) / (double)reads,
	       held < 0 ? "" : held ? " window_valid=1" : " window_valid=0");
	return 0;
}

/* The driver's first read, retried while perf keeps its access closed. */
static const char *probe_instrument(void)
{
	uint64_t start = now_ns();
	const char *why;

	if (!module_loaded())
		return perf_instrument_open();
	while ((why = probe_driver()) != NULL && strstr(why, "faulted") &&
	       now_ns() - start < FAULT_WAIT_NS)
		;
	if (!why && !instrument_generation())
		why = "simple-pmu publishes no INST_RETIRED counter on this CPU";
	return why;
}

static int bench_insns(long reads, long windows)
{
	const struct path *p;
	const char *why;
	unsigned int i, pass;
	int rc = 0;

	why = probe_instrument();
	if (why) {
		printf("unavailable path=instrument reason=%s\n", why);
		return 3;
	}
	if (cycles_attr_long("event_width", 64) == 32)
		insn_mask = 0xffffffffull;
	printf("ring=%ld reads=%ld windows=%ld cpu=%d instrument=%s\n",
	       cycles_attr_long("ring", -1), reads, windows, sched_getcpu(),
	       instr_fd >= 0 ? "perf" : "module");
	/* The perf paths last: their events close the driver's access a while. */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < NR_PATHS; i++) {
			p = &paths[i];
			if (p->perf != (int)pass)
				continue;
			why = p->probe();
			if (why)
				printf("unavailable path=%s reason=%s\n", p->name, why);
			else
				rc |= insns_path(p, reads, windows);
		}
	}
	return rc;
}

static int run_once(long reads)
{
	unsigned int i;

	run_empty(reads);
	for (i = 0; i < NR_PATHS; i++) {
		if (paths[i].probe()) {
			printf("unavailable path=%s reason=%s\n", paths[i].name, paths[i].probe());
			continue;
		}
		if (prepare(&paths[i]) < 0) {
			printf("unavailable path=%s reason=the window could not begin\n",
			       paths[i].name);
			continue;
		}
		paths[i].run(reads);
		finish(&paths[i]);
		/* The loop's function: run_ and the name with '-' as '_'. */
		printf("ran path=%s function=run_", paths[i].name);
		for (const char *c = paths[i].name; *c; c++)
			putchar(*c == '-' ? '_' : *c);
		putchar('\n');
	}
	return 0;
}

int main(int argc, char **argv)
{
	long runs = DEFAULT_RUNS, ms = DEFAULT_MS, reads = DEFAULT_READS;
	long windows = DEFAULT_WINDOWS, once = 0, cpu = -1;
	int insns = 0, i;
	cpu_set_t old;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--insns")) {
			insns = 1;
		} else if (i + 1 < argc && !strcmp(argv[i], "--runs")) {
			runs = parse_long(argv[++i], "--runs", 1, MAX_RUNS);
		} else if (i + 1 < argc && !strcmp(argv[i], "--ms")) {
			ms = parse_long(argv[++i], "--ms", 1, 10000);
		} else if (i + 1 < argc && !strcmp(argv[i], "--reads")) {
			reads = parse_long(argv[++i], "--reads", 1, 100000000);
		} else if (i + 1 < argc && !strcmp(argv[i], "--windows")) {
			windows = parse_long(argv[++i], "--windows", 1, MAX_WINDOWS);
		} else if (i + 1 < argc && !strcmp(argv[i], "--cpu")) {
			cpu = parse_long(argv[++i], "--cpu", 0, CPU_SETSIZE - 1);
		} else if (i + 1 < argc && !strcmp(argv[i], "--once")) {
			once = parse_long(argv[++i], "--once", 1, 100000000);
		} else {
			fprintf(stderr, "usage: readbench [--cpu C] [--runs R] [--ms T] | --insns "
				"[--reads N] [--windows W] | --once N\n");
			return 2;
		}
	}
	catch_faults();
	if (cpu >= 0) {
		CPU_ZERO(&old);
		CPU_SET((int)cpu, &old);
		if (sched_setaffinity(0, sizeof(old), &old) < 0) {
			perror("readbench: --cpu");
			return 2;
		}
	} else if (pin_cpu(&old) < 0) {
		perror("readbench: pin_cpu");
		return 2;
	}
	if (once)
		return run_once(once);
	if (insns)
		return bench_insns(reads, windows);
	return bench_ns(runs, ms);
}
