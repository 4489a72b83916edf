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
 *   index      the indices reads use here      -> cycle=C insn=I
 *   shared     the indices shared by all CPUs  -> cycle=C insn=I
 *              (read first if need be; -3 if CPUs differ, -1 none)
 *   cpu N      the cache's entry for CPU N     -> rc=R cycle=C insn=I gen=G
 *   gen        cycles_generation()             -> G
 *   refresh    cycles_refresh()                -> R
 *
 * No counter is ever read: the test runs on machines without the module.
 */
#define _GNU_SOURCE 1
#include <stdio.h>

#include "cycles.h"

int main(void)
{
	char line[128];
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
