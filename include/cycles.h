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
 * x86-64: unhalted_core/insn_retired/unhalted_ref are RDPMC of the Intel
 * fixed counters 1/0/2; rdtsc/rdtscp the TSC. perfmon_available() returns
 * the architectural perfmon version (CPUID leaf 0xA).
 *
 * arm64: unhalted_core is PMCCNTR_EL0; insn_retired is the PMEVCNTR<n>_EL0
 * in which the driver counts INST_RETIRED (event 0x08), found in sysfs
 * (event_counters) and cached; it returns 0 if the driver counts no such
 * event. rdtsc, rdtscp and unhalted_ref read the generic timer CNTVCT_EL0
 * (CNTFRQ_EL0 Hz). perfmon_available() returns the PMU version (sysfs
 * pmu_version: 1 = PMUv3, 4 = v3p1, ...).
 *
 * A counter read where user access is off faults (SIGSEGV on x86, SIGILL on
 * arm64), as in 2011: call perfmon_available() first. It never faults.
 * Counters are per CPU: pin the thread (pin_cpu) around a measurement.
 *
 * arm64 and perf: whenever any perf event (perf stat, perf record, another
 * program's perf_event_open, even a failed trial of it) is scheduled on a
 * CPU, the kernel's arm_pmu driver clears PMUSERENR_EL0 there, and until
 * the module's periodic check puts user access back, reads on that CPU
 * die with SIGILL even though perfmon_available() says > 0: for up to
 * 2 * recheck_ms (sysfs recheck_ms, default 100 ms) after perf stopped
 * using that CPU. Programs that use perf themselves should let that time
 * pass (or test a read in a child process) before reading; the Python
 * package's reads catch the fault instead (simple_pmu.CounterFault).
 *
 * Define _GNU_SOURCE before the first #include of the file that includes
 * this header (sched_getcpu() and the CPU_SET macros need it).
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

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !defined(__x86_64__) && !defined(__i386__) && !defined(__aarch64__)
#error "cycles.h supports x86-64 and arm64 only"
#endif

typedef unsigned long long counter_t;

/* Present while the module is loaded; the 2011 path. */
#define CYCLES_SYSFS_DIR	"/sys/devices/system/simple-pmu/simple-pmu0"

#define CYCLES_INLINE		inline __attribute__((always_inline))

/* arm64 event counters are PMEVCNTR0_EL0..PMEVCNTR30_EL0. */
#define CYCLES_MAX_EVENT_COUNTER	30

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
 * The counter index the driver gives an event in event_counters
 * ("5:0x0008 4:0x0011": IDX:0xEVENT pairs); -1 if the event is not there
 * or the list is malformed. Plain C, so it is tested on any host.
 */
static inline int cycles_find_event_counter(const char *list,
					    unsigned long event)
{
	const char *p = list;
	unsigned long idx, ev;
	char *end;

	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		idx = strtoul(p, &end, 10);
		if (end == p || *end != ':')
			return -1;
		p = end + 1;
		ev = strtoul(p, &end, 16);
		if (end == p || (*end != ' ' && *end != '\0'))
			return -1;
		p = end;
		if (ev == event && idx <= CYCLES_MAX_EVENT_COUNTER)
			return (int)idx;
	}
	return -1;
}

#if defined(__x86_64__) || defined(__i386__)

/* RDPMC ECX bit 30 selects the fixed-function counters. */
#define CYCLES_RDPMC_FIXED		(1U << 30)
#define CYCLES_FIXED_INST_RETIRED	0	/* INST_RETIRED.ANY */
#define CYCLES_FIXED_CORE_CYCLES	1	/* CPU_CLK_UNHALTED.THREAD */
#define CYCLES_FIXED_REF_CYCLES		2	/* CPU_CLK_UNHALTED.REF_TSC */

/* CPUID leaf 0xA, architectural performance monitoring */
#define CYCLES_CPUID_PERFMON		0xa
/* EBX bit set: event unavailable (bit 0 core cycles, 1 instructions) */
#define CYCLES_EBX_CORE_CYCLES		(1U << 0)
#define CYCLES_EBX_INSN_RETIRED		(1U << 1)

/* The cpu PMU's rdpmc attribute; cpu_core on hybrid parts. */
#define CYCLES_RDPMC_ATTR	"/sys/bus/event_source/devices/cpu/rdpmc"
#define CYCLES_RDPMC_ATTR_HYBRID "/sys/bus/event_source/devices/cpu_core/rdpmc"
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

static CYCLES_INLINE counter_t unhalted_core(void)
{
	return cycles_rdpmc(CYCLES_RDPMC_FIXED | CYCLES_FIXED_CORE_CYCLES);
}

static CYCLES_INLINE counter_t unhalted_ref(void)
{
	return cycles_rdpmc(CYCLES_RDPMC_FIXED | CYCLES_FIXED_REF_CYCLES);
}

static CYCLES_INLINE counter_t insn_retired(void)
{
	return cycles_rdpmc(CYCLES_RDPMC_FIXED | CYCLES_FIXED_INST_RETIRED);
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
 * Fixed counter i exists if ECX bit i is set (a bitmap from version 5,
 * zero before) or if it is among the first EDX[4:0] (version 2 on).
 */
static inline int cycles_fixed_counter_exists(const unsigned int regs[4],
					      unsigned int i)
{
	return ((regs[2] >> i) & 1) || (regs[3] & 0x1f) > i;
}

/* EBX bits at or past EAX[31:24] are not enumerated: not available. */
static inline int cycles_arch_event_available(const unsigned int regs[4],
					      unsigned int ebx_bit)
{
	unsigned int len = (regs[0] >> 24) & 0xff;
	unsigned int i = __builtin_ctz(ebx_bit);

	return i < len && !(regs[1] & ebx_bit);
}

/*
 * A user RDPMC outside a task that mmapped a perf event faults unless the
 * cpu PMU's rdpmc attribute is 2 (kernels from 4.0 clear CR4.PCE on every
 * switch to another mm otherwise). No attribute: an older kernel, where
 * the driver's CR4.PCE stays.
 */
static inline int cycles_rdpmc_allowed(void)
{
	char buf[16];

	if (cycles_read_file(CYCLES_RDPMC_ATTR, buf, sizeof(buf)) < 0 &&
	    cycles_read_file(CYCLES_RDPMC_ATTR_HYBRID, buf, sizeof(buf)) < 0)
		return 1;
	return strtol(buf, NULL, 10) == CYCLES_RDPMC_ALWAYS;
}

/*
 * > 0 (the architectural perfmon version) when the module is loaded, the
 * CPU has fixed counters 0 and 1 counting instructions and core cycles,
 * user RDPMC is allowed, and the driver has not switched the counters off
 * (2011 attribute rdpmc_fixed, where present); 0 otherwise.
 */
static inline int perfmon_available(void)
{
	unsigned int regs[4];
	unsigned int version;

	if (access(CYCLES_SYSFS_DIR, R_OK) < 0)
		return 0;
	cycles_cpuid(0, 0, regs);
	if (regs[0] < CYCLES_CPUID_PERFMON)
		return 0;
	cycles_cpuid(CYCLES_CPUID_PERFMON, 0, regs);
	version = regs[0] & 0xff;
	/* Fixed counters arrived with version 2. */
	if (version < 2)
		return 0;
	if (!cycles_fixed_counter_exists(regs, CYCLES_FIXED_INST_RETIRED) ||
	    !cycles_fixed_counter_exists(regs, CYCLES_FIXED_CORE_CYCLES))
		return 0;
	if (!cycles_arch_event_available(regs, CYCLES_EBX_CORE_CYCLES) ||
	    !cycles_arch_event_available(regs, CYCLES_EBX_INSN_RETIRED))
		return 0;
	if (!cycles_rdpmc_allowed())
		return 0;
	if (cycles_attr_long("rdpmc_fixed", 1) <= 0)
		return 0;
	return (int)version;
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

/* The architected INST_RETIRED event, counted by default by the driver. */
#define CYCLES_EVENT_INST_RETIRED	0x08

#define CYCLES_IDX_UNKNOWN	(-2)	/* sysfs not read yet */
#define CYCLES_IDX_NONE		(-1)	/* the driver counts no INST_RETIRED */

/* ISB: later instructions wait for earlier ones to complete. */
static CYCLES_INLINE void sync_core(void)
{
	__asm__ __volatile__("isb" : : : "memory");
}

static CYCLES_INLINE counter_t unhalted_core(void)
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

/* One per translation unit that uses it; each reads sysfs at most once. */
static inline int *cycles_insn_slot(void)
{
	static int idx = CYCLES_IDX_UNKNOWN;

	return &idx;
}

/* Reads event_counters and caches where INST_RETIRED is counted. */
static inline int cycles_lookup_insn_counter(void)
{
	char buf[512];
	int idx = CYCLES_IDX_NONE;

	if (cycles_read_attr("event_counters", buf, sizeof(buf)) >= 0)
		idx = cycles_find_event_counter(buf, CYCLES_EVENT_INST_RETIRED);
	*cycles_insn_slot() = idx;
	return idx;
}

/* n of the PMEVCNTR<n>_EL0 counting instructions, or -1 if none. */
static inline int cycles_insn_counter(void)
{
	int idx = *cycles_insn_slot();

	if (idx == CYCLES_IDX_UNKNOWN)
		idx = cycles_lookup_insn_counter();
	return idx;
}

static CYCLES_INLINE counter_t insn_retired(void)
{
	int idx = *cycles_insn_slot();

	if (__builtin_expect(idx < 0, 0)) {
		idx = cycles_insn_counter();
		if (idx < 0)
			return 0;
	}
	return cycles_read_pmevcntr((unsigned int)idx);
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
 * > 0 (the PMU version, sysfs pmu_version) when the module is loaded and
 * grants user access with the cycle counter enabled; 0 otherwise. Also
 * (re)reads where the driver counts instructions, for insn_retired().
 */
static inline int perfmon_available(void)
{
	long version;

	if (access(CYCLES_SYSFS_DIR, R_OK) < 0)
		return 0;
	if (cycles_attr_long("user_access", 1) <= 0)
		return 0;
	if (cycles_attr_long("cycle_counter", 1) <= 0)
		return 0;
	cycles_lookup_insn_counter();
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
