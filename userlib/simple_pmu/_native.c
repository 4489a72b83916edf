// SPDX-License-Identifier: GPL-2.0-only
/*
 * simple_pmu._native - the instructions Python cannot issue itself.
 *
 * Counter reads through include/cycles.h (the simple-pmu driver), the
 * time-stamp counter / generic timer, perf_event_open() and perf
 * self-monitoring through the event's mmap page, CPUID, and the two fixed
 * loops (known_loop, xor_loop) whose cost is known in advance.
 *
 * Counter reads go through cycles.h only: driver_*() and DriverSpan are its
 * module path (cycles_read() and the window API with the scope set to CPU),
 * Window is its window API on the path of the scope asked for, and
 * PerfPage.read() is its mmap-page reader (cycles_page_read()) on a page the
 * Python library opened itself. Nothing is read where the module publishes
 * no counter of its own (no 2011 fallback to fixed counters). A counter read
 * that faults (the module path; the perf path once root turns user reads
 * off) is caught by cycles.h's guard (the instruction is skipped) and
 * raised as simple_pmu.errors.CounterFault, or makes the window invalid;
 * PerfPage.read() runs under that guard too.
 *
 * guarded_tsc() has a guard of its own here (RDTSC is no counter read
 * cycles.h skips): a fault inside it is raised as CounterFault instead
 * of killing the process. That handler acts only on a fault raised by the
 * kernel in the thread inside such a read; any other SIGILL/SIGSEGV goes to
 * the handler that was installed before (Python's faulthandler, or the
 * default action). The exceptions are the classes of simple_pmu.errors
 * (imported at load), so one hierarchy rooted in simple_pmu.Error covers
 * Python and C.
 *
 * Needs no generated file; a native or cross build is one line:
 *   aarch64-linux-gnu-gcc -O2 -shared -fPIC -I$PYINC -Iinclude \
 *       userlib/simple_pmu/_native.c -o _native.cpython-311-aarch64-linux-gnu.so
 */
#define _GNU_SOURCE 1
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>

/*
 * Every thread of this extension starts on the module's CPU-wide path
 * (driver_*(), DriverSpan); a Window of scope "thread" switches its thread
 * to perf self-monitoring (use_scope()).
 */
#define CYCLES_SCOPE_CPU 1
#include "cycles.h"

#if defined(__x86_64__)
#define NATIVE_ARCH	"x86_64"
#elif defined(__aarch64__)
#define NATIVE_ARCH	"aarch64"
#else
#error "simple_pmu._native supports x86-64 and arm64 only"
#endif

#define compiler_barrier()	__asm__ __volatile__("" : : : "memory")

static PyObject *ulonglong(unsigned long long v)
{
	return PyLong_FromUnsignedLongLong(v);
}

/* Fast reads: METH_NOARGS, one instruction plus the int object. */

static PyObject *native_tsc(PyObject *mod, PyObject *unused)
{
	return ulonglong(rdtsc());
}

static PyObject *native_tsc_ordered(PyObject *mod, PyObject *unused)
{
	return ulonglong(rdtscp());
}

/*
 * Guarded reads. Reads run with the GIL held, so one thread at a time is in
 * a guarded read: a global jump buffer plus the owning thread suffice, and
 * the fast path costs a sigsetjmp without signal mask (no system call).
 */
static PyObject *CounterFault, *CounterUnavailable;
static volatile sig_atomic_t guard_installed;
static struct sigaction guard_old_ill, guard_old_segv;
static sigjmp_buf guard_env;
static volatile sig_atomic_t guard_active;
static pthread_t guard_owner;

/*
 * Not a guarded read: step aside for good. The handler found at install
 * time is put back; a fault re-executes the instruction and reaches it (or
 * the default action), a sent signal is sent again.
 */
static void guard_chain(int sig, siginfo_t *info)
{
	sigaction(sig, sig == SIGILL ? &guard_old_ill : &guard_old_segv, NULL);
	guard_installed = 0;
	if (info->si_code <= 0)
		raise(sig);
}

static void guard_handler(int sig, siginfo_t *info, void *uctx)
{
	if (guard_active && info->si_code > 0 &&
	    pthread_equal(guard_owner, pthread_self())) {
		guard_active = 0;
		siglongjmp(guard_env, sig);
	}
	guard_chain(sig, info);
}

/*
 * Install the handler for SIGILL and SIGSEGV unless it is there already,
 * keeping the one it replaces for guard_chain(). Something may have
 * replaced it since (faulthandler.disable() restores what it found), so
 * guard() checks again.
 */
static int guard_install_one(int sig, struct sigaction *old)
{
	struct sigaction sa, cur;

	if (sigaction(sig, NULL, &cur) < 0)
		return -1;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == guard_handler)
		return 0;
	/*
	 * cycles.h's guard is on (a module window is open in some thread): it
	 * puts back what it replaced when its last user ends; installing over
	 * it now would make the two handlers each other's predecessor.
	 */
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == cycles_guard_handler)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_handler;
	/* NODEFER: leaving by siglongjmp must not leave the signal blocked. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, old);
}

static int guard_install(void)
{
	if (guard_install_one(SIGILL, &guard_old_ill) < 0 ||
	    guard_install_one(SIGSEGV, &guard_old_segv) < 0) {
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	guard_installed = 1;
	return 0;
}

static PyObject *native_guard(PyObject *mod, PyObject *unused)
{
	if (guard_install() < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* Raise CounterFault("reading WHAT ... raised SIG: WHY") with .signal set. */
static PyObject *guard_fault_why(const char *what, int sig, const char *why)
{
	const char *name = sig == SIGILL ? "SIGILL" : "SIGSEGV";
	PyObject *err, *signame;

	err = PyObject_CallFunction(
		CounterFault, "N", PyUnicode_FromFormat(
		"reading %s on CPU %d raised %s: %s", what, sched_getcpu(), name,
		why));
	if (!err)
		return NULL;
	signame = PyUnicode_FromString(name);
	if (signame && PyObject_SetAttrString(err, "signal", signame) == 0)
		PyErr_SetObject(CounterFault, err);
	Py_XDECREF(signame);
	Py_DECREF(err);
	return NULL;
}

/* The module path's fault: user access is off on that CPU. */
static PyObject *guard_fault(const char *what, int sig)
{
	return guard_fault_why(what, sig, "user access to the counters is off "
			       "there (module not loaded, or perf used the PMU "
			       "on that CPU less than 2 * recheck_ms ago)");
}

/* v = expr, unless it faults: then return the CounterFault exception. */
#define GUARDED_READ(v, expr, what)					\
	do {								\
		int sig_;						\
		if (!guard_installed && guard_install() < 0)		\
			return NULL;					\
		guard_owner = pthread_self();				\
		sig_ = sigsetjmp(guard_env, 0);				\
		if (sig_)						\
			return guard_fault(what, sig_);			\
		guard_active = 1;					\
		compiler_barrier();					\
		(v) = (expr);						\
		compiler_barrier();					\
		guard_active = 0;					\
	} while (0)

/*
 * The scope this thread's cycles.h state was last set to: cycles_set_scope()
 * closes and reopens the thread's events, so it is called only on a change.
 * A forked child keeps the value, as cycles.h keeps the scope.
 */
static __thread int native_scope = CYCLES_SCOPE_CPU_ID;

static int use_scope(int scope)
{
	if (native_scope != scope) {
		if (cycles_set_scope(scope) < 0) {
			PyErr_Format(CounterUnavailable, "a Window of scope "
				     "\"%s\" is open in this thread (begun, not "
				     "ended): end it first (choosing the other "
				     "scope would unmap the pages it reads)",
				     native_scope == CYCLES_SCOPE_CPU_ID ?
				     "cpu" : "thread");
			return -1;
		}
		native_scope = scope;
	}
	/* No path yet: the module may have been loaded since (re-check). */
	if (cycles_path() == CYCLES_PATH_NONE)
		perfmon_available();
	return 0;
}

/* CounterUnavailable("reading WHAT on CPU n: why") for a reading not valid. */
static PyObject *driver_unavailable(const char *what)
{
	const char *why = cycles_unavailable_reason();

	PyErr_Format(CounterUnavailable, "reading %s on CPU %d: %s", what,
		     sched_getcpu(), why ? why :
		     "the module publishes no such counter on this CPU");
	return NULL;
}

/* The module's counter @which on this CPU, through cycles_read(). */
static PyObject *driver_read(int which, const char *what)
{
	struct cycles_reading r;

	if (use_scope(CYCLES_SCOPE_CPU_ID) < 0)
		return NULL;
	if (cycles_read(which, &r) == 0)
		return ulonglong(r.value);
	if (r.flags & CYCLES_FAULTED)
		return guard_fault(what, CYCLES_GUARD_SIGNAL);
	return driver_unavailable(what);
}

static PyObject *native_driver_cycles(PyObject *mod, PyObject *unused)
{
	return driver_read(CYCLES_CORE, "the cycle counter");
}

static PyObject *native_driver_instructions(PyObject *mod, PyObject *unused)
{
	return driver_read(CYCLES_INSN, "the instructions counter");
}

/* The timer, guarded: RDTSC faults under PR_SET_TSC, CNTVCT_EL0 without
 * CNTKCTL_EL1.EL0VCTEN. For trial reads; tsc() stays the fast path. */
static PyObject *native_guarded_tsc(PyObject *mod, PyObject *unused)
{
	unsigned long long v;

	GUARDED_READ(v, rdtsc(), "the timer");
	return ulonglong(v);
}

static PyObject *native_driver_generation(PyObject *mod, PyObject *unused)
{
	return PyLong_FromUnsignedLong(cycles_generation());
}

static PyObject *native_driver_refresh(PyObject *mod, PyObject *unused)
{
	return PyLong_FromLong(cycles_refresh());
}

static PyObject *native_driver_indices(PyObject *mod, PyObject *unused)
{
	int cpu = sched_getcpu();

	return Py_BuildValue("(iii)", cpu, cycles_cycle_index(),
			     cycles_insn_index());
}

static PyObject *native_driver_ref_cycles(PyObject *mod, PyObject *unused)
{
	if (use_scope(CYCLES_SCOPE_CPU_ID) < 0)
		return NULL;
	return ulonglong(unhalted_ref());
}

static PyObject *native_driver_available(PyObject *mod, PyObject *unused)
{
	if (use_scope(CYCLES_SCOPE_CPU_ID) < 0)
		return NULL;
	return PyLong_FromLong(perfmon_available());
}

static PyObject *native_timer_frequency(PyObject *mod, PyObject *unused)
{
	return ulonglong(cycles_timer_frequency());
}

static PyObject *native_current_cpu(PyObject *mod, PyObject *unused)
{
	int cpu = sched_getcpu();

	if (cpu < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	return PyLong_FromLong(cpu);
}

static PyObject *native_cpuid(PyObject *mod, PyObject *args)
{
	unsigned int leaf, subleaf = 0;

	if (!PyArg_ParseTuple(args, "I|I:cpuid", &leaf, &subleaf))
		return NULL;
#if defined(__x86_64__)
	{
		unsigned int r[4];

		cycles_cpuid(leaf, subleaf, r);
		return Py_BuildValue("(IIII)", r[0], r[1], r[2], r[3]);
	}
#else
	PyErr_SetString(PyExc_NotImplementedError,
			"cpuid: x86 only (this is " NATIVE_ARCH ")");
	return NULL;
#endif
}

/*
 * The known loop: exactly two instructions per iteration on both arches,
 *   x86-64:  1: sub $1, %reg ; jnz 1b
 *   arm64:   1: subs xN, xN, #1 ; b.ne 1b
 * so instructions retired around known_loop(n) are 2n plus a constant of
 * the call path (the same for every n).
 */
static void known_loop_run(unsigned long long n)
{
#if defined(__x86_64__)
	__asm__ __volatile__("1:\n\t"
			     "sub $1, %0\n\t"
			     "jnz 1b"
			     : "+r" (n) : : "cc");
#else
	__asm__ __volatile__("1:\n\t"
			     "subs %0, %0, #1\n\t"
			     "b.ne 1b"
			     : "+r" (n) : : "cc");
#endif
}

static PyObject *native_known_loop(PyObject *mod, PyObject *arg)
{
	unsigned long long n = PyLong_AsUnsignedLongLong(arg);

	if (n == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	/* The body runs before the test: 0 would mean 2^64 iterations. */
	if (n == 0) {
		PyErr_SetString(PyExc_ValueError,
				"known_loop: n must be at least 1");
		return NULL;
	}
	known_loop_run(n);
	Py_RETURN_NONE;
}

/*
 * The dependent-XOR loop of the mhz method: each XOR needs the result of
 * the one before (a ^= b, then b ^= a), so a core retires one per cycle,
 * no more, no less. The loop counter runs beside the chain; the caller
 * subtracts a 50-XOR run from a 250-XOR run of the same count, which
 * cancels it along with every other fixed cost. Aligned to 64 bytes so the
 * chain does not straddle cache lines differently from build to build.
 */
#if defined(__x86_64__)
#define XOR_PAIR	"xor %1, %0\n\txor %0, %1\n\t"
#define XOR_COUNT_DOWN	"sub $1, %2\n\tjnz 1b"
#else
#define XOR_PAIR	"eor %0, %0, %1\n\teor %1, %1, %0\n\t"
#define XOR_COUNT_DOWN	"subs %2, %2, #1\n\tb.ne 1b"
#endif

#define XOR_LOOP(pairs, count)						\
	do {								\
		unsigned long a = 1, b = 2;				\
		__asm__ __volatile__(".p2align 6\n"			\
				     "1:\n\t"				\
				     ".rept " #pairs "\n\t"		\
				     XOR_PAIR				\
				     ".endr\n\t"			\
				     XOR_COUNT_DOWN			\
				     : "+r" (a), "+r" (b), "+r" (count)	\
				     : : "cc");				\
	} while (0)

static PyObject *native_xor_loop(PyObject *mod, PyObject *args)
{
	unsigned long long count;
	unsigned int length;

	if (!PyArg_ParseTuple(args, "KI:xor_loop", &count, &length))
		return NULL;
	if (count == 0) {
		PyErr_SetString(PyExc_ValueError,
				"xor_loop: count must be at least 1");
		return NULL;
	}
	if (length == 50) {
		XOR_LOOP(25, count);
	} else if (length == 250) {
		XOR_LOOP(125, count);
	} else {
		PyErr_Format(PyExc_ValueError,
			     "xor_loop: length must be 50 or 250, not %u",
			     length);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *native_perf_open(PyObject *mod, PyObject *args,
				  PyObject *kwargs)
{
	static char *kwlist[] = { "type", "config", "config1",
				  "exclude_kernel", "exclude_hv", "pid",
				  "cpu", "group_fd", "read_format", NULL };
	struct perf_event_attr attr;
	unsigned int type;
	unsigned long long config, config1 = 0, read_format = 0;
	int exclude_kernel = 1, exclude_hv = 1, pid = 0, cpu = -1;
	int group_fd = -1;
	long fd;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "IK|KppiiiK:perf_open",
					 kwlist, &type, &config, &config1,
					 &exclude_kernel, &exclude_hv, &pid,
					 &cpu, &group_fd, &read_format))
		return NULL;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = type;
	attr.config = config;
	attr.config1 = config1;
	attr.exclude_kernel = exclude_kernel;
	attr.exclude_hv = exclude_hv;
	/* PERF_FORMAT_*: with GROUP, read(2) of the leader returns every
	 * member's count after nr and the times, as perf stat reads them. */
	attr.read_format = read_format;
	fd = syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd,
		     PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	return PyLong_FromLong(fd);
}

/*
 * PerfPage: the first page of a perf event's mmap, for self-monitoring.
 * The caller keeps the fd open while the page is in use.
 * owner: the process that mapped it, as a count of forks (fork_count, raised in
 * every child by a pthread_atfork handler: no system call per read). perf's mmap is
 * not inherited (VM_DONTCOPY), so in a forked child the address is unmapped or, later,
 * something else's: there the page is forgotten, never munmap()ed (close, dealloc)
 * and never read.
 */
static volatile unsigned long fork_count;

static void count_fork(void)
{
	fork_count++;
}

typedef struct {
	PyObject_HEAD
	struct perf_event_mmap_page *page;
	size_t size;
	unsigned long owner;
} PerfPage;

static int perfpage_init(PerfPage *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "fd", NULL };
	long psize = sysconf(_SC_PAGESIZE);
	void *p;
	int fd;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i:PerfPage", kwlist,
					 &fd))
		return -1;
	if (self->page) {
		PyErr_SetString(PyExc_ValueError, "PerfPage: already mapped");
		return -1;
	}
	p = mmap(NULL, (size_t)psize, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	self->page = p;
	self->size = (size_t)psize;
	self->owner = fork_count;
	return 0;
}

static void perfpage_unmap(PerfPage *self)
{
	if (self->page) {
		if (self->owner == fork_count)
			munmap(self->page, self->size);
		self->page = NULL;
	}
}

/* The page is usable here: mapped, and by this process (not inherited by fork). */
static int perfpage_usable(PerfPage *self)
{
	if (self->page && self->owner != fork_count)
		self->page = NULL; /* forgotten, see PerfPage */
	if (!self->page) {
		PyErr_SetString(PyExc_ValueError,
				"PerfPage: closed (or mapped by the parent "
				"of this forked process)");
		return 0;
	}
	return 1;
}

static void perfpage_dealloc(PerfPage *self)
{
	perfpage_unmap(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *perfpage_close(PerfPage *self, PyObject *unused)
{
	perfpage_unmap(self);
	Py_RETURN_NONE;
}

static counter_t perfpage_hw_read(unsigned int hw, void *arg)
{
	(void)arg;
	return cycles_hw_read(hw);	/* perf's index - 1: x86 RDPMC operand, arm64 31 = PMCCNTR */
}

/* cycles.h's reader of the page (the one cycles_read() uses): 1 if user reads work. */
static int perfpage_count(const volatile struct perf_event_mmap_page *pc,
			  unsigned long long *count)
{
	struct cycles_page_value v;
	int rc = cycles_page_read(pc, perfpage_hw_read, NULL, &v);

	*count = v.value;
	return rc == 0;
}

static PyObject *perfpage_read(PerfPage *self, PyObject *unused)
{
	unsigned long long count;
	unsigned int faults;
	int ok;

	if (!perfpage_usable(self))
		return NULL;
	/*
	 * cycles.h's guard, not GUARDED_READ: while a thread of this process
	 * is on cycles.h's perf path its guard stays installed, and it is the
	 * handler a fault of this read reaches.
	 */
	faults = cycles_tls.faults;
	cycles_guard_begin(&cycles_tls);
	ok = perfpage_count(self->page, &count);
	cycles_guard_end(&cycles_tls);
	if (cycles_tls.faults != faults)
		return guard_fault_why("the perf event's counter",
				       CYCLES_GUARD_SIGNAL, "perf's user reads "
				       "were turned off meanwhile (sysctl "
				       "kernel.perf_user_access 0 on arm64, "
				       "/sys/bus/event_source/devices/cpu/rdpmc "
				       "0 on x86): read(2) still counts");
	if (!ok) {
		PyErr_SetString(CounterUnavailable,
				"perf event not readable from user space now "
				"(cap_user_rdpmc 0 or index 0): use read(2)");
		return NULL;
	}
	return ulonglong(count);
}

static PyObject *perfpage_info(PerfPage *self, PyObject *unused)
{
	volatile struct perf_event_mmap_page *pc = self->page;
	unsigned int seq;
	PyObject *d;

	if (!perfpage_usable(self))
		return NULL;
	pc = self->page;
	do {
		seq = pc->lock;
		compiler_barrier();
		d = Py_BuildValue(
			"{s:I,s:I,s:L,s:K,s:K,s:i,s:i,s:i,s:i,s:H,s:H,s:I,s:K}",
			"version", pc->version,
			"index", pc->index,
			"offset", (long long)pc->offset,
			"time_enabled", (unsigned long long)pc->time_enabled,
			"time_running", (unsigned long long)pc->time_running,
			"cap_user_rdpmc", (int)pc->cap_user_rdpmc,
			"cap_user_time", (int)pc->cap_user_time,
			"cap_user_time_zero", (int)pc->cap_user_time_zero,
			"cap_user_time_short", (int)pc->cap_user_time_short,
			"pmc_width", pc->pmc_width,
			"time_shift", pc->time_shift,
			"time_mult", pc->time_mult,
			"time_zero", (unsigned long long)pc->time_zero);
		compiler_barrier();
		if (!d || pc->lock == seq)
			break;
		Py_DECREF(d);
	} while (1);
	return d;
}

static PyMethodDef perfpage_methods[] = {
	{ "read", (PyCFunction)perfpage_read, METH_NOARGS,
	  "read() -> int\n--\n\nThe event's count, read in user space (RDPMC or "
	  "mrs) under the page's seqlock. CounterUnavailable when the page does "
	  "not allow it now, CounterFault if the read faults." },
	{ "info", (PyCFunction)perfpage_info, METH_NOARGS,
	  "info() -> dict\n--\n\nA consistent snapshot of the page's fields "
	  "(index, cap_user_rdpmc, pmc_width, time_mult, ...)." },
	{ "close", (PyCFunction)perfpage_close, METH_NOARGS,
	  "close() -> None\n--\n\nUnmap the page (the fd stays open)." },
	{ NULL }
};

static PyTypeObject PerfPageType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "simple_pmu._native.PerfPage",
	.tp_doc = "PerfPage(fd)\n--\n\nThe mmap page of an open perf event, "
		  "for self-monitoring reads.",
	.tp_basicsize = sizeof(PerfPage),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)perfpage_init,
	.tp_dealloc = (destructor)perfpage_dealloc,
	.tp_methods = perfpage_methods,
};

/*
 * DriverSpan: the four reads of a measurement on the module path, with no
 * Python object made between the first and the last: start() reads
 * instructions then cycles, stop() cycles then instructions, both into this
 * struct (returning None), so what runs between them is the same every time
 * and the instructions counted around known_loop(n) are exactly 2n plus a
 * constant.
 *
 * The reads are a cycles.h window of scope CPU: start() first makes one
 * guarded cycles_read() (a fault raises CounterFault, so measure() can wait
 * for the module to re-grant access), then cycles_window_begin() (this CPU,
 * its generation and counter indices), then the two reads; stop() reads and
 * ends the window. info()["valid"] is what cycles_window_end() said: 0 when
 * the CPU or its generation changed or a read faulted (the values are junk);
 * info()["exact"] too: 0 also when the thread was switched out in between
 * (info()["switched"]), as the CPU's counts then hold other tasks' work.
 */
typedef struct {
	PyObject_HEAD
	int insn;
	int open, started, stopped;
	unsigned int flags;
	unsigned long gen1;
	int switched;		/* the thread was switched out inside */
	struct cycles_window w;
	counter_t i0, c0, c1, i1;
} DriverSpan;

static int driverspan_init(DriverSpan *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "instructions", NULL };
	int insn = 1;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:DriverSpan", kwlist, &insn))
		return -1;
	self->insn = insn;
	self->open = self->started = self->stopped = 0;
	return 0;
}

static void driverspan_close(DriverSpan *self)
{
	if (self->open) {
		self->flags = cycles_window_end(&self->w);
		self->open = 0;
	}
}

static void driverspan_dealloc(DriverSpan *self)
{
	driverspan_close(self);	/* the guard is counted: give it back */
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *driverspan_start(DriverSpan *self, PyObject *unused)
{
	struct cycles_reading r;

	driverspan_close(self);
	self->started = self->stopped = 0;
	self->i0 = self->i1 = self->c0 = self->c1 = 0;
	self->flags = 0;
	self->gen1 = 0;
	self->switched = 0;
	if (use_scope(CYCLES_SCOPE_CPU_ID) < 0)
		return NULL;
	if (cycles_read(CYCLES_CORE, &r) < 0) {
		if (r.flags & CYCLES_FAULTED)
			return guard_fault("the cycle counter", CYCLES_GUARD_SIGNAL);
		return driver_unavailable("the cycle counter");
	}
	if (cycles_window_begin(&self->w) < 0)
		return driver_unavailable("the module's counters");
	self->open = 1;
	if (self->insn)
		self->i0 = cycles_window_read(&self->w, CYCLES_INSN);
	self->c0 = cycles_window_read(&self->w, CYCLES_CORE);
	self->started = 1;
	Py_RETURN_NONE;
}

static PyObject *driverspan_stop(DriverSpan *self, PyObject *unused)
{
	if (!self->open) {
		PyErr_SetString(PyExc_RuntimeError, "DriverSpan.stop: start() first");
		return NULL;
	}
	self->c1 = cycles_window_read(&self->w, CYCLES_CORE);
	if (self->insn)
		self->i1 = cycles_window_read(&self->w, CYCLES_INSN);
	driverspan_close(self);
	/* The counts the window's end compared (equal unless it got that far). */
	self->switched = self->w.switches != self->w.switches_end;
	self->gen1 = cycles_generation();
	self->stopped = self->started;
	Py_RETURN_NONE;
}

static PyObject *driverspan_values(DriverSpan *self, PyObject *unused)
{
	if (!self->stopped) {
		PyErr_SetString(PyExc_RuntimeError,
				"DriverSpan.values: start() and stop() first");
		return NULL;
	}
	return Py_BuildValue("(KKKK)", self->c0, self->c1, self->i0, self->i1);
}

static int hw_index(unsigned int hw)
{
	return hw == CYCLES_HW_NONE ? -1 : (int)hw;
}

static PyObject *driverspan_info(DriverSpan *self, PyObject *unused)
{
	if (!self->stopped) {
		PyErr_SetString(PyExc_RuntimeError,
				"DriverSpan.info: start() and stop() first");
		return NULL;
	}
	return Py_BuildValue("{s:i,s:i,s:i,s:k,s:k,s:i,s:i,s:i}", "cpu", self->w.cpu,
			     "cycle_index", hw_index(self->w.hw[CYCLES_CORE]),
			     "insn_index", hw_index(self->w.hw[CYCLES_INSN]),
			     "generation_before", self->w.generation,
			     "generation_after", self->gen1,
			     "valid", !!(self->flags & CYCLES_VALID),
			     "exact", !!(self->flags & CYCLES_EXACT),
			     "switched", self->switched);
}

static PyMethodDef driverspan_methods[] = {
	{ "start", (PyCFunction)driverspan_start, METH_NOARGS,
	  "start() -> None\n--\n\nBegin a module window; read instructions (if "
	  "counted) then cycles. CounterFault if access is off, "
	  "CounterUnavailable if the module has no counter here." },
	{ "stop", (PyCFunction)driverspan_stop, METH_NOARGS,
	  "stop() -> None\n--\n\nRead cycles then instructions; end the window." },
	{ "values", (PyCFunction)driverspan_values, METH_NOARGS,
	  "values() -> tuple\n--\n\nThe raw reads (c0, c1, i0, i1); i0, i1 are "
	  "0 without instructions." },
	{ "info", (PyCFunction)driverspan_info, METH_NOARGS,
	  "info() -> dict\n--\n\ncpu, cycle_index and insn_index (the "
	  "counters read; -1 none), generation_before and generation_after "
	  "(this CPU's generation at start and after stop), valid (1: the "
	  "window held: same CPU, same generation, no fault), exact and "
	  "switched (1: the thread was switched out in between, so other "
	  "tasks' work on the CPU is in the counts: not exact)." },
	{ NULL }
};

static PyTypeObject DriverSpanType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "simple_pmu._native.DriverSpan",
	.tp_doc = "DriverSpan(instructions=True)\n--\n\nThe driver's counters "
		  "read around a block with no allocation in between.",
	.tp_basicsize = sizeof(DriverSpan),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)driverspan_init,
	.tp_dealloc = (destructor)driverspan_dealloc,
	.tp_methods = driverspan_methods,
};

/*
 * Window: cycles.h's window API for Python, on the path of its scope
 * (0 thread: perf self-monitoring; 1 cpu: the module). begin() resolves
 * the path, counters and sequence once; cycles() and instructions() are the
 * bare read instruction plus the int object; end() validates (perf's `lock`
 * unchanged; the module's CPU and generation unchanged, no fault) and
 * returns cycles.h's flags, 0 for invalid. A window belongs to the thread
 * that began it (cycles.h's state and guard are per thread) and to its
 * process: reads elsewhere raise, and in a forked child end() says invalid
 * without touching the parent's pages (not mapped there).
 */
enum { WIN_IDLE, WIN_OPEN, WIN_FAILED, WIN_ENDED };

typedef struct {
	PyObject_HEAD
	int scope;
	int state;
	unsigned int flags;
	pthread_t owner;
	unsigned long forks;
	struct cycles_window w;
	char reason[512];	/* why begin() failed or end() said invalid */
} Window;

static int window_init(Window *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "scope", NULL };
	int scope = CYCLES_SCOPE_THREAD_ID;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|i:Window", kwlist, &scope))
		return -1;
	if (scope != CYCLES_SCOPE_THREAD_ID && scope != CYCLES_SCOPE_CPU_ID) {
		PyErr_Format(PyExc_ValueError, "Window: scope %d is not 0 (thread) "
			     "or 1 (cpu)", scope);
		return -1;
	}
	if (self->state == WIN_OPEN) {
		PyErr_SetString(PyExc_RuntimeError, "Window: open");
		return -1;
	}
	self->scope = scope;
	self->state = WIN_IDLE;
	self->reason[0] = 0;
	return 0;
}

static int window_here(Window *self)
{
	return self->forks == fork_count &&
	       pthread_equal(self->owner, pthread_self());
}

/* End an open window; 0 (invalid) in a forked child. */
static unsigned int window_finish(Window *self)
{
	unsigned int flags = 0;

	if (self->forks != fork_count) {
		/* The module path's guard count came with the fork: give it back. */
		if (self->w.path == CYCLES_PATH_MODULE)
			cycles_window_end(&self->w);
		snprintf(self->reason, sizeof(self->reason), "the window was begun "
			 "in the parent of this forked process");
	} else {
		flags = cycles_window_end(&self->w);
		if (!(flags & CYCLES_VALID))
			snprintf(self->reason, sizeof(self->reason), "%s",
				 self->w.path == CYCLES_PATH_MODULE ?
				 "the module's counters changed during the window "
				 "(the thread left its CPU, the CPU's generation "
				 "changed, or a read faulted)" :
				 "perf moved, stopped or multiplexed the events "
				 "during the window (their mmap page's lock changed)");
	}
	self->state = WIN_ENDED;
	self->flags = flags;
	return flags;
}

static void window_dealloc(Window *self)
{
	if (self->state == WIN_OPEN && window_here(self))
		window_finish(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Why no window could begin on this thread's path. */
static void window_why_not(Window *self)
{
	const char *why;
	int path = cycles_path();

	switch (path) {
	case CYCLES_PATH_PERF_MMAP:
		why = "an event is not on a counter now (index 0: perf "
		      "multiplexed or has not scheduled it); begin again";
		break;
	case CYCLES_PATH_PERF_READ:
		why = cycles_path_note();
		break;
	case CYCLES_PATH_MODULE:
		why = "the module publishes no cycle counter on this CPU, or "
		      "its generation cannot be read";
		break;
	default:
		why = cycles_unavailable_reason();
		break;
	}
	/* The precision bounds what cycles.h hands over (its own 512 bytes). */
	snprintf(self->reason, sizeof(self->reason), "%s%.400s",
		 path == CYCLES_PATH_PERF_READ ?
		 "only read(2) of perf is possible here, no window: " : "",
		 why ? why : "no counter can be read here");
}

static PyObject *window_begin(Window *self, PyObject *unused)
{
	if (self->state == WIN_OPEN) {
		PyErr_SetString(PyExc_RuntimeError,
				"Window.begin: already begun (end() first)");
		return NULL;
	}
	self->owner = pthread_self();
	self->forks = fork_count;
	self->flags = 0;
	self->reason[0] = 0;
	if (use_scope(self->scope) < 0)
		return NULL;
	if (cycles_window_begin(&self->w) < 0) {
		window_why_not(self);
		self->state = WIN_FAILED;
		Py_RETURN_FALSE;
	}
	self->state = WIN_OPEN;
	Py_RETURN_TRUE;
}

static PyObject *window_not_open(Window *self)
{
	if (self->state != WIN_OPEN)
		PyErr_SetString(PyExc_RuntimeError, "Window: not open (begin() "
				"failed, was not called, or end() was)");
	else
		PyErr_SetString(PyExc_RuntimeError, "Window: read in another "
				"thread or process than the one that began it");
	return NULL;
}

/* The reads: a state check (a compare each) and the bare instruction. */
static PyObject *window_cycles(Window *self, PyObject *unused)
{
	if (__builtin_expect(self->state != WIN_OPEN || !window_here(self), 0))
		return window_not_open(self);
	return ulonglong(cycles_window_read(&self->w, CYCLES_CORE));
}

static PyObject *window_instructions(Window *self, PyObject *unused)
{
	if (__builtin_expect(self->state != WIN_OPEN || !window_here(self), 0))
		return window_not_open(self);
	return ulonglong(cycles_window_read(&self->w, CYCLES_INSN));
}

static PyObject *window_end(Window *self, PyObject *unused)
{
	if (self->state != WIN_OPEN)
		return PyLong_FromLong(0);
	if (self->forks == fork_count &&
	    !pthread_equal(self->owner, pthread_self())) {
		PyErr_SetString(PyExc_RuntimeError, "Window.end: in another "
				"thread than the one that began it");
		return NULL;
	}
	return PyLong_FromUnsignedLong(window_finish(self));
}

static int window_which(const char *name)
{
	if (!strcmp(name, "cycles"))
		return CYCLES_CORE;
	if (!strcmp(name, "instructions"))
		return CYCLES_INSN;
	PyErr_Format(PyExc_ValueError, "Window: counter %s is not cycles or "
		     "instructions", name);
	return -1;
}

static PyObject *window_delta(Window *self, PyObject *args)
{
	unsigned long long a, b;
	const char *name;
	int which;

	if (!PyArg_ParseTuple(args, "sKK:delta", &name, &a, &b))
		return NULL;
	which = window_which(name);
	if (which < 0)
		return NULL;
	return ulonglong(cycles_window_delta(&self->w, which, a, b));
}

static PyObject *window_info(Window *self, PyObject *unused)
{
	int begun = self->state != WIN_IDLE;
	int path = begun ? self->w.path : CYCLES_PATH_NONE;

	return Py_BuildValue(
		"{s:i,s:s,s:i,s:i,s:k,s:i,s:i,s:I,s:I,s:I,s:s}",
		"path", path, "path_name", cycles_path_name(path),
		"scope", self->scope,
		"cpu", begun ? self->w.cpu : -1,
		"generation", begun ? self->w.generation : 0UL,
		"cycle_index", begun ? hw_index(self->w.hw[CYCLES_CORE]) : -1,
		"insn_index", begun ? hw_index(self->w.hw[CYCLES_INSN]) : -1,
		"cycles_width", begun ? self->w.width[CYCLES_CORE] : 0U,
		"instructions_width", begun ? self->w.width[CYCLES_INSN] : 0U,
		"flags", self->flags, "reason", self->reason);
}

static PyMethodDef window_methods[] = {
	{ "begin", (PyCFunction)window_begin, METH_NOARGS,
	  "begin() -> bool\n--\n\nBegin a window on this thread's path of the "
	  "scope: False (info()['reason'] says why) if none can begin now." },
	{ "cycles", (PyCFunction)window_cycles, METH_NOARGS,
	  "cycles() -> int\n--\n\nThe raw cycle counter: one rdpmc / mrs." },
	{ "instructions", (PyCFunction)window_instructions, METH_NOARGS,
	  "instructions() -> int\n--\n\nThe raw instructions counter (0 if the "
	  "window has none)." },
	{ "end", (PyCFunction)window_end, METH_NOARGS,
	  "end() -> int\n--\n\ncycles.h's flags: CYCLES_VALID (1) | "
	  "CYCLES_EXACT (2), or 0: invalid (info()['reason'] says why)." },
	{ "delta", (PyCFunction)window_delta, METH_VARARGS,
	  "delta(counter, first, second, /) -> int\n--\n\nsecond - first modulo "
	  "the counter's width (cycles_window_delta())." },
	{ "info", (PyCFunction)window_info, METH_NOARGS,
	  "info() -> dict\n--\n\npath, path_name, scope, cpu, generation, "
	  "cycle_index, insn_index, the widths, flags and reason." },
	{ NULL }
};

static PyTypeObject WindowType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "simple_pmu._native.Window",
	.tp_doc = "Window(scope=0)\n--\n\ncycles.h's window API: scope 0 this "
		  "thread (perf self-monitoring), 1 this CPU (the module).",
	.tp_basicsize = sizeof(Window),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)window_init,
	.tp_dealloc = (destructor)window_dealloc,
	.tp_methods = window_methods,
};

static PyMethodDef native_methods[] = {
	{ "tsc", native_tsc, METH_NOARGS,
	  "tsc() -> int\n--\n\nThe time-stamp counter (x86 RDTSC) or generic "
	  "timer (arm64 CNTVCT_EL0), unordered." },
	{ "guarded_tsc", native_guarded_tsc, METH_NOARGS,
	  "guarded_tsc() -> int\n--\n\nAs tsc(), but CounterFault instead of "
	  "a signal where the timer cannot be read from user space." },
	{ "tsc_ordered", native_tsc_ordered, METH_NOARGS,
	  "tsc_ordered() -> int\n--\n\nAs tsc(), after earlier instructions "
	  "complete (RDTSCP; isb + CNTVCT_EL0)." },
	{ "timer_frequency", native_timer_frequency, METH_NOARGS,
	  "timer_frequency() -> int\n--\n\nHz of tsc() as the hardware states "
	  "it (arm64 CNTFRQ_EL0; x86 CPUID 0x15 or hypervisor leaf "
	  "0x40000010); 0 if it does not." },
	{ "driver_available", native_driver_available, METH_NOARGS,
	  "driver_available() -> int\n--\n\ncycles.h perfmon_available(): > 0 "
	  "when the simple-pmu driver's counters can be read. Never faults." },
	{ "driver_cycles", native_driver_cycles, METH_NOARGS,
	  "driver_cycles() -> int\n--\n\ncycles.h cycles_read(CYCLES_CORE) on the "
	  "module path: the counter this CPU's cycle_index names. CounterFault "
	  "(the process lives) if the read faulted, CounterUnavailable if the "
	  "module publishes none (nothing is read)." },
	{ "driver_instructions", native_driver_instructions, METH_NOARGS,
	  "driver_instructions() -> int\n--\n\ncycles.h cycles_read(CYCLES_INSN) "
	  "on the module path: the counter this CPU's event_index names for "
	  "INST_RETIRED (x86 0xc0, arm64 0x08). CounterFault if the read "
	  "faulted, CounterUnavailable if the module publishes none." },
	{ "driver_generation", native_driver_generation, METH_NOARGS,
	  "driver_generation() -> int\n--\n\ncycles.h cycles_generation(): "
	  "this CPU's generation (sysfs cpuN/generation; 0 if unreadable); "
	  "re-reads this CPU's counter indices if it changed." },
	{ "driver_refresh", native_driver_refresh, METH_NOARGS,
	  "driver_refresh() -> int\n--\n\ncycles.h cycles_refresh(): read "
	  "every CPU's counter indices again; 0, or -1 if there are none." },
	{ "driver_indices", native_driver_indices, METH_NOARGS,
	  "driver_indices() -> (cpu, cycle_index, insn_index)\n--\n\nThe "
	  "counters driver_cycles() and driver_instructions() read on this CPU "
	  "(x86: the RDPMC operand, 2^30 + n fixed counter n, n general "
	  "counter n; arm64: 31 PMCCNTR_EL0, n PMEVCNTR<n>_EL0; -1 none)." },
	{ "guard", native_guard, METH_NOARGS,
	  "guard() -> None\n--\n\n(Re)install the SIGILL/SIGSEGV handler of the "
	  "guarded driver reads if another handler replaced it (the first "
	  "guarded read installs it)." },
	{ "driver_ref_cycles", native_driver_ref_cycles, METH_NOARGS,
	  "driver_ref_cycles() -> int\n--\n\ncycles.h unhalted_ref(): x86 "
	  "RDPMC of the counter this CPU's event_index names for 0x300 (0 if "
	  "none); arm64 CNTVCT_EL0." },
	{ "current_cpu", native_current_cpu, METH_NOARGS,
	  "current_cpu() -> int\n--\n\nsched_getcpu()." },
	{ "cpuid", native_cpuid, METH_VARARGS,
	  "cpuid(leaf, subleaf=0, /) -> tuple\n--\n\n(eax, ebx, ecx, edx); x86 "
	  "only, NotImplementedError elsewhere." },
	{ "known_loop", native_known_loop, METH_O,
	  "known_loop(n) -> None\n--\n\nRun a loop of exactly two instructions "
	  "n times (n >= 1): x86-64 'sub $1,%reg; jnz', arm64 'subs xN,xN,#1; "
	  "b.ne'. Instructions retired around a call: 2*n + a constant." },
	{ "xor_loop", native_xor_loop, METH_VARARGS,
	  "xor_loop(count, length) -> None\n--\n\nRun count iterations of a "
	  "chain of length (50 or 250) dependent XORs, one cycle each." },
	{ "perf_open", (PyCFunction)(void (*)(void))native_perf_open,
	  METH_VARARGS | METH_KEYWORDS,
	  "perf_open(type, config, config1=0, exclude_kernel=True, "
	  "exclude_hv=True, pid=0, cpu=-1, group_fd=-1, read_format=0) -> int"
	  "\n--\n\nperf_event_open(2) with O_CLOEXEC; OSError with the "
	  "kernel's errno on failure." },
	{ NULL }
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "simple_pmu._native",
	.m_doc = "CPU counter reads for simple_pmu (see include/cycles.h).",
	.m_size = -1,
	.m_methods = native_methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m, *errors;

	if (PyType_Ready(&PerfPageType) < 0 ||
	    PyType_Ready(&DriverSpanType) < 0 ||
	    PyType_Ready(&WindowType) < 0)
		return NULL;
	if (pthread_atfork(NULL, NULL, count_fork) != 0) {
		PyErr_SetString(PyExc_ImportError,
				"pthread_atfork() failed: PerfPage needs it");
		return NULL;
	}
	m = PyModule_Create(&native_module);
	if (!m)
		return NULL;
	errors = PyImport_ImportModule("simple_pmu.errors");
	if (!errors) {
		Py_DECREF(m);
		return NULL;
	}
	CounterFault = PyObject_GetAttrString(errors, "CounterFault");
	CounterUnavailable = PyObject_GetAttrString(errors,
						    "CounterUnavailable");
	Py_DECREF(errors);
	if (!CounterFault || !CounterUnavailable ||
	    PyModule_AddObjectRef(m, "CounterFault", CounterFault) < 0 ||
	    PyModule_AddObjectRef(m, "CounterUnavailable",
				  CounterUnavailable) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	Py_INCREF(&PerfPageType);
	if (PyModule_AddObjectRef(m, "DriverSpan",
				  (PyObject *)&DriverSpanType) < 0 ||
	    PyModule_AddObjectRef(m, "Window", (PyObject *)&WindowType) < 0 ||
	    PyModule_AddIntConstant(m, "WINDOW_VALID", CYCLES_VALID) < 0 ||
	    PyModule_AddIntConstant(m, "WINDOW_EXACT", CYCLES_EXACT) < 0 ||
	    PyModule_AddObject(m, "PerfPage", (PyObject *)&PerfPageType) < 0 ||
	    PyModule_AddStringConstant(m, "ARCH", NATIVE_ARCH) < 0 ||
	    PyModule_AddStringConstant(m, "SYSFS_DIR", CYCLES_SYSFS_DIR) < 0 ||
	    PyModule_AddIntConstant(m, "KNOWN_LOOP_INSNS_PER_ITER", 2) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
