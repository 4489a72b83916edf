// SPDX-License-Identifier: GPL-2.0-only
/*
 * page_check - cycles.h's perf mmap page reader against a page in memory.
 *
 *   page_check CASE    run one case: prints "ok CASE" or "FAIL CASE: ..."
 *                      lines and exits 1 on any failure
 *   page_check list    the case names, one a line
 *
 * The page is a struct perf_event_mmap_page in this program's memory; the
 * counter read instruction is replaced by fake_read(), which returns the
 * fake counter and can act as the kernel would meanwhile (rewrite the page
 * and bump `lock`, as perf_event_update_userpage() does when it moves or
 * stops the counter under a reader). Nothing here touches a PMU.
 */
#define _GNU_SOURCE 1
#include <stdio.h>

#include "cycles.h"

static int failures;

#define CHECK(name, cond, ...)						\
	do {								\
		if (!(cond)) {						\
			printf("FAIL %s: ", name);			\
			printf(__VA_ARGS__);				\
			putchar('\n');					\
			failures++;					\
		}							\
	} while (0)

/* The fake hardware, and what the fake kernel does during a read. */
struct fake {
	struct perf_event_mmap_page *pc;
	counter_t counter;		/* what the read instruction returns */
	unsigned int reads;		/* times it was executed */
	unsigned int last_hw;		/* its operand */
	unsigned int moves;		/* reads left that race an update */
	unsigned long long new_offset;	/* the update: offset and counter */
	counter_t new_counter;
};

static counter_t fake_read(unsigned int hw, void *arg)
{
	struct fake *f = arg;
	counter_t v = f->counter;

	f->reads++;
	f->last_hw = hw;
	if (f->moves) {
		/*
		 * The kernel interrupts the reader after its read: it folds
		 * the count into offset, reprograms the counter, bumps lock.
		 */
		f->moves--;
		f->pc->lock++;
		f->pc->offset = (long long)f->new_offset;
		f->counter = f->new_counter;
	}
	return v;
}

static void page_init(struct perf_event_mmap_page *pc, unsigned int index,
		      unsigned long long offset, unsigned int width)
{
	memset(pc, 0, sizeof(*pc));
	pc->version = 0;
	pc->lock = 2;
	pc->index = index;
	pc->offset = (long long)offset;
	pc->cap_user_rdpmc = 1;
	pc->pmc_width = (unsigned short)width;
	pc->time_enabled = 1000;
	pc->time_running = 1000;
}

/* offset + counter, the counter read with operand index - 1. */
static void case_basic(const char *name)
{
	struct perf_event_mmap_page pc;
	struct fake f = { &pc, 500, 0, 0, 0, 0, 0 };
	struct cycles_reading r;

	page_init(&pc, 3, 1000, 48);
	memset(&r, 0, sizeof(r));
	CHECK(name, cycles_read_page(&pc, fake_read, &f, &r) == 0, "not read");
	CHECK(name, r.value == 1500, "value %llu, want 1500", r.value);
	CHECK(name, f.reads == 1 && f.last_hw == 2,
	      "%u reads of hw %u, want 1 of hw 2 (index - 1)", f.reads,
	      f.last_hw);
	CHECK(name, r.flags == (CYCLES_VALID | CYCLES_EXACT) &&
	      r.path == CYCLES_PATH_PERF_MMAP, "flags %#x path %d", r.flags,
	      r.path);
}

/*
 * perf moves the counter between the reader's read of offset and of the
 * counter (twice): the reader must retry until lock is unchanged and
 * return the new offset + the new counter, never old offset + new counter
 * or new offset + old counter.
 */
static void case_lock_changes(const char *name)
{
	struct perf_event_mmap_page pc;
	struct fake f = { &pc, 700, 0, 0, 2, 5000, 30 };
	struct cycles_page_value pv;

	page_init(&pc, 1, 4000, 48);
	CHECK(name, cycles_page_read(&pc, fake_read, &f, &pv) == 0, "not read");
	CHECK(name, pv.value == 5030, "value %llu, want 5030 (offset 5000 + "
	      "counter 30 after the move; 4700 or 5700 mix the two)", pv.value);
	CHECK(name, pv.retries == 2 && f.reads == 3,
	      "%u retries, %u reads; want 2, 3", pv.retries, f.reads);
	CHECK(name, pv.seq == pc.lock, "seq %u, lock %u", pv.seq, pc.lock);
}

/* index 0: not on a counter; no read instruction, offset alone. */
static void case_index_zero(const char *name)
{
	struct perf_event_mmap_page pc;
	struct fake f = { &pc, 12345, 0, 0, 0, 0, 0 };
	struct cycles_page_value pv;
	struct cycles_reading r;

	page_init(&pc, 0, 777, 48);
	CHECK(name, cycles_page_read(&pc, fake_read, &f, &pv) == 1,
	      "index 0 read as if on a counter");
	CHECK(name, pv.value == 777 && pv.hw == CYCLES_HW_NONE,
	      "value %llu hw %u, want offset 777 and no counter", pv.value,
	      pv.hw);
	CHECK(name, f.reads == 0, "the counter was read %u times", f.reads);
	memset(&r, 0, sizeof(r));
	CHECK(name, cycles_read_page(&pc, fake_read, &f, &r) == 1 &&
	      !(r.flags & CYCLES_VALID), "a reading of index 0 is valid");
	/* The same when perf grants no user reads (rdpmc 0, EL0 closed). */
	page_init(&pc, 4, 777, 48);
	pc.cap_user_rdpmc = 0;
	CHECK(name, cycles_page_read(&pc, fake_read, &f, &pv) == 1 &&
	      f.reads == 0, "read with cap_user_rdpmc 0");
}

/*
 * An index naming a counter the header has no read instruction for (arm64
 * >= 6.x: 33, the instruction counter; x86: bit 29, metrics): no read, and
 * the caller is told to use read(2), as for index 0.
 */
static void case_index_unknown(const char *name)
{
#if defined(__x86_64__)
	const unsigned int unknown = (1U << 29) + 1;
#else
	const unsigned int unknown = 33;
#endif
	struct perf_event_mmap_page pc;
	struct fake f = { &pc, 12345, 0, 0, 0, 0, 0 };
	struct cycles_page_value pv;
	struct cycles_reading r;
	struct cycles_window w;

	page_init(&pc, unknown, 777, 64);
	CHECK(name, cycles_page_read(&pc, fake_read, &f, &pv) == 1 &&
	      pv.hw == CYCLES_HW_NONE, "index %u read as a counter", unknown);
	CHECK(name, f.reads == 0, "the counter was read %u times", f.reads);
	memset(&r, 0, sizeof(r));
	CHECK(name, cycles_read_page(&pc, fake_read, &f, &r) == 1 &&
	      !(r.flags & CYCLES_VALID), "a reading of index %u is valid: %#x",
	      unknown, r.flags);
	memset(&w, 0, sizeof(w));
	w.path = CYCLES_PATH_PERF_MMAP;
	w.pc[CYCLES_CORE] = &pc;
	CHECK(name, cycles_window_pages(&w) == -1 && cycles_window_end(&w) == 0,
	      "a window on index %u is valid", unknown);
}

/*
 * The path is chosen from the page's capability (and on arm64 the
 * perf_user_access sysctl), not from a momentary index of 0 (an event not
 * scheduled at that instant).
 */
static void case_path_choice(const char *name)
{
	struct perf_event_mmap_page pc;
	int x86 = 0;

#if defined(__x86_64__)
	x86 = 1;
#endif
	page_init(&pc, 0, 0, 64);	/* capable, not on a counter now */
	CHECK(name, cycles_page_user_read(&pc, x86 ? -1 : 1) == 1,
	      "index 0 with the capability: no user reads");
	CHECK(name, cycles_page_user_read(&pc, 0) == x86,
	      "arm64 perf_user_access 0 (or x86): wrong choice");
	CHECK(name, cycles_page_user_read(&pc, -1) == x86,
	      "sysctl unknown, index 0: wrong choice");
	pc.index = 5;
	CHECK(name, cycles_page_user_read(&pc, -1) == 1,
	      "sysctl unknown, index 5: no user reads");
	pc.cap_user_rdpmc = 0;
	CHECK(name, cycles_page_user_read(&pc, 1) == 0,
	      "cap_user_rdpmc 0: user reads");
}

/* The counter is pmc_width bits: sign-extend it, ignore bits above. */
static void check_width(const char *name, unsigned int width)
{
	const counter_t mask = (1ULL << width) - 1;
	static const struct {
		long long value;	/* what the width-bit counter holds */
		counter_t junk;		/* bits above the width */
	} cases[] = {
		{ -16, 0 },			/* perf starts counters negative */
		{ -1, 0 },
		{ 16, 0 },
		{ 0, 0 },
		{ -16, 0xabcd000000000000ULL },	/* not the counter's */
	};
	struct perf_event_mmap_page pc;
	struct fake f;
	struct cycles_page_value pv;
	counter_t max = mask >> 1;	/* largest positive */
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		page_init(&pc, 2, 1ULL << 50, width);
		memset(&f, 0, sizeof(f));
		f.pc = &pc;
		f.counter = ((counter_t)cases[i].value & mask) |
			    (cases[i].junk & ~mask);
		cycles_page_read(&pc, fake_read, &f, &pv);
		CHECK(name, pv.value == (1ULL << 50) + (counter_t)cases[i].value,
		      "width %u: counter %#llx gave %#llx, want 2^50 %+lld",
		      width, f.counter, pv.value, cases[i].value);
	}
	page_init(&pc, 2, 1ULL << 50, width);
	memset(&f, 0, sizeof(f));
	f.pc = &pc;
	f.counter = max;
	cycles_page_read(&pc, fake_read, &f, &pv);
	CHECK(name, pv.value == (1ULL << 50) + max,
	      "width %u: the largest positive %#llx gave %#llx", width, max,
	      pv.value);
}

static void case_width_40(const char *name)
{
	check_width(name, 40);
}

static void case_width_48(const char *name)
{
	check_width(name, 48);
}

/* 64 bits wide (arm64 PMCCNTR): nothing to extend. */
static void case_width_64(const char *name)
{
	struct perf_event_mmap_page pc;
	struct fake f = { &pc, 0x8000000000000010ULL, 0, 0, 0, 0, 0 };
	struct cycles_page_value pv;

	page_init(&pc, 32, 0, 64);
	cycles_page_read(&pc, fake_read, &f, &pv);
	CHECK(name, pv.value == 0x8000000000000010ULL && f.last_hw == 31,
	      "value %#llx hw %u", pv.value, f.last_hw);
}

/*
 * time_running < time_enabled: the event was off its counter for a while
 * (multiplexed): the page is not used, read(2) gives the count and times.
 */
static void case_multiplexed(const char *name)
{
	struct perf_event_mmap_page pc;
	struct fake f = { &pc, 100, 0, 0, 0, 0, 0 };
	struct cycles_reading r;

	page_init(&pc, 1, 900, 48);
	pc.time_enabled = 3000;
	pc.time_running = 1000;
	memset(&r, 0, sizeof(r));
	/*
	 * The page's times are as of perf's last update: stale without
	 * cap_user_time. The reading, its times and flags come from read(2).
	 */
	CHECK(name, cycles_read_page(&pc, fake_read, &f, &r) == 1 &&
	      !(r.flags & CYCLES_VALID),
	      "multiplexed: read from the page, flags %#x", r.flags);
	pc.time_running = 3000;
	CHECK(name, cycles_read_page(&pc, fake_read, &f, &r) == 0 &&
	      r.flags == (CYCLES_VALID | CYCLES_EXACT) && r.value == 1000,
	      "running == enabled: flags %#x, want VALID|EXACT", r.flags);
}

/* A window is valid only if no page's lock changed between its edges. */
static void case_window(const char *name)
{
	struct perf_event_mmap_page cyc, ins;
	struct cycles_window w;

	page_init(&cyc, 32, 0, 64);
	page_init(&ins, 3, 0, 32);
	memset(&w, 0, sizeof(w));
	w.path = CYCLES_PATH_PERF_MMAP;
	w.pc[CYCLES_CORE] = &cyc;
	w.pc[CYCLES_INSN] = &ins;
	CHECK(name, cycles_window_end(&w) == 0, "a window never begun is valid");
	CHECK(name, cycles_window_pages(&w) == 0, "begin failed");
	CHECK(name, w.hw[CYCLES_CORE] == 31 && w.hw[CYCLES_INSN] == 2 &&
	      w.width[CYCLES_INSN] == 32, "hw %u %u width %u",
	      w.hw[CYCLES_CORE], w.hw[CYCLES_INSN], w.width[CYCLES_INSN]);
	CHECK(name, cycles_window_end(&w) == (CYCLES_VALID | CYCLES_EXACT),
	      "an undisturbed window is not valid");
	CHECK(name, cycles_window_delta(&w, CYCLES_INSN, 0xfffffff0ULL, 0x10) ==
	      0x20, "32-bit delta across the wrap: %#llx",
	      cycles_window_delta(&w, CYCLES_INSN, 0xfffffff0ULL, 0x10));
	ins.lock += 2;		/* perf moved the instructions counter */
	CHECK(name, cycles_window_end(&w) == 0,
	      "a window whose event moved is valid");
	ins.lock -= 2;
	cyc.lock++;		/* an update in progress at the end */
	CHECK(name, cycles_window_end(&w) == 0,
	      "a window ending inside an update is valid");
	cyc.lock--;
	/* Not on a counter at begin: no raw reads. */
	ins.index = 0;
	cycles_window_page(&w, CYCLES_INSN);
	CHECK(name, w.hw[CYCLES_INSN] == CYCLES_HW_NONE &&
	      cycles_window_read(&w, CYCLES_INSN) == 0,
	      "index 0 at begin: hw %u", w.hw[CYCLES_INSN]);
}

/*
 * A window whose begin failed (an event not on a counter this thread may
 * read) is invalid at its end, even with every `lock` unchanged.
 */
static void case_window_begin_failed(const char *name)
{
	struct perf_event_mmap_page cyc, ins;
	struct cycles_window w;

	page_init(&cyc, 32, 0, 64);
	page_init(&ins, 0, 0, 32);	/* instructions: not on a counter */
	memset(&w, 0, sizeof(w));
	w.path = CYCLES_PATH_PERF_MMAP;
	w.pc[CYCLES_CORE] = &cyc;
	w.pc[CYCLES_INSN] = &ins;
	CHECK(name, cycles_window_pages(&w) == -1, "index 0: begin succeeded");
	CHECK(name, cycles_window_end(&w) == 0,
	      "begin failed (index 0), end valid: %#x", cycles_window_end(&w));
	page_init(&ins, 3, 0, 32);
	ins.cap_user_rdpmc = 0;		/* user reads off */
	CHECK(name, cycles_window_pages(&w) == -1, "cap 0: begin succeeded");
	CHECK(name, cycles_window_end(&w) == 0,
	      "begin failed (cap_user_rdpmc 0), end valid: %#x",
	      cycles_window_end(&w));
	memset(&w, 0, sizeof(w));
	w.path = CYCLES_PATH_PERF_MMAP;
	w.pc[CYCLES_INSN] = &ins;	/* no cycles page */
	ins.cap_user_rdpmc = 1;
	CHECK(name, cycles_window_pages(&w) == -1, "no cycles: begin succeeded");
	CHECK(name, cycles_window_end(&w) == 0, "no cycles page, end valid");
}

/* perf's mmap `index` of core cycles on its fixed register: hw + 1. */
#if defined(__x86_64__)
#define FIXED_CYCLES_INDEX	((1U << 30) + 1 + 1)	/* fixed counter 1 */
#else
#define FIXED_CYCLES_INDEX	32			/* PMCCNTR_EL0 */
#endif

/*
 * A window begun for the fixed read of cycles: only with cycles on its
 * fixed register at begin; invalid at the end when perf moved it off (its
 * `index` changes, under `lock`), even if the `lock` looks unchanged.
 */
static void case_window_fixed(const char *name)
{
	struct perf_event_mmap_page cyc, ins;
	struct cycles_window w;

	page_init(&cyc, FIXED_CYCLES_INDEX, 0, 64);
	page_init(&ins, 3, 0, 32);
	memset(&w, 0, sizeof(w));
	w.path = CYCLES_PATH_PERF_MMAP;
	w.fixed = CYCLES_FIXED(CYCLES_CORE);
	w.pc[CYCLES_CORE] = &cyc;
	w.pc[CYCLES_INSN] = &ins;
	CHECK(name, cycles_window_pages(&w) == 0, "cycles on its fixed register: "
	      "begin failed");
	CHECK(name, w.on_fixed == CYCLES_FIXED(CYCLES_CORE), "on_fixed %#x",
	      w.on_fixed);
	CHECK(name, cycles_window_end(&w) == (CYCLES_VALID | CYCLES_EXACT),
	      "an undisturbed fixed window is not valid");
	/* perf moves cycles to a general counter: lock and index change. */
	cyc.lock += 2;
	cyc.index = 4;
	CHECK(name, cycles_window_end(&w) == 0,
	      "a fixed window whose cycles moved off its register is valid");
	/* The index alone (a torn sample would be the only way): invalid. */
	cyc.lock -= 2;
	CHECK(name, cycles_window_end(&w) == 0,
	      "a fixed window whose index changed is valid");
	cyc.index = FIXED_CYCLES_INDEX;
	ins.index = 5;
	CHECK(name, cycles_window_end(&w) == 0,
	      "a window whose instructions index changed is valid");
}

/*
 * Cycles not on its fixed register at begin (perf put it on a general
 * counter, e.g. the module holds PMCCNTR_EL0): a fixed begin fails and
 * its end says 0, even with every `lock` unchanged; a plain window on the
 * same pages is fine. A counter without a fixed register (arm64:
 * instructions) can never be asked for.
 */
static void case_window_not_fixed(const char *name)
{
	struct perf_event_mmap_page cyc, ins;
	struct cycles_window w;

	page_init(&cyc, 3, 0, 32);	/* cycles on general counter 2 */
	page_init(&ins, 4, 0, 32);
	memset(&w, 0, sizeof(w));
	w.path = CYCLES_PATH_PERF_MMAP;
	w.fixed = CYCLES_FIXED(CYCLES_CORE);
	w.pc[CYCLES_CORE] = &cyc;
	w.pc[CYCLES_INSN] = &ins;
	CHECK(name, cycles_window_pages(&w) == -1,
	      "cycles on a general counter: fixed begin succeeded");
	CHECK(name, !(w.on_fixed & CYCLES_FIXED(CYCLES_CORE)), "on_fixed %#x",
	      w.on_fixed);
	CHECK(name, cycles_window_end(&w) == 0,
	      "fixed begin failed, end valid: %#x", cycles_window_end(&w));
	w.fixed = 0;
	CHECK(name, cycles_window_pages(&w) == 0 &&
	      cycles_window_end(&w) == (CYCLES_VALID | CYCLES_EXACT),
	      "a plain window on a general counter is not valid");
	/* Instructions: x86 fixed counter 0 (index 1 << 30 | 0, + 1). */
	page_init(&cyc, FIXED_CYCLES_INDEX, 0, 64);
	page_init(&ins, (1U << 30) + 1, 0, 48);
	w.fixed = CYCLES_FIXED(CYCLES_CORE) | CYCLES_FIXED(CYCLES_INSN);
#if defined(__x86_64__)
	CHECK(name, cycles_window_pages(&w) == 0 &&
	      cycles_window_end(&w) == (CYCLES_VALID | CYCLES_EXACT),
	      "x86: cycles on fixed 1, instructions on fixed 0: not valid");
#else
	CHECK(name, cycles_window_pages(&w) == -1 && cycles_window_end(&w) == 0,
	      "arm64: a fixed read of instructions was granted");
#endif
}

static const struct {
	const char *name;
	void (*run)(const char *name);
} cases[] = {
	{ "basic", case_basic },
	{ "lock_changes", case_lock_changes },
	{ "index_zero", case_index_zero },
	{ "index_unknown", case_index_unknown },
	{ "path_choice", case_path_choice },
	{ "width_40", case_width_40 },
	{ "width_48", case_width_48 },
	{ "width_64", case_width_64 },
	{ "multiplexed", case_multiplexed },
	{ "window", case_window },
	{ "window_begin_failed", case_window_begin_failed },
	{ "window_fixed", case_window_fixed },
	{ "window_not_fixed", case_window_not_fixed },
};

int main(int argc, char **argv)
{
	unsigned int i;
	int found = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: page_check CASE | list\n");
		return 2;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(argv[1], "list")) {
			printf("%s\n", cases[i].name);
			found = 1;
		} else if (!strcmp(argv[1], cases[i].name)) {
			cases[i].run(cases[i].name);
			if (!failures)
				printf("ok %s\n", cases[i].name);
			found = 1;
		}
	}
	if (!found) {
		fprintf(stderr, "page_check: no case %s\n", argv[1]);
		return 2;
	}
	return failures ? 1 : 0;
}
