// SPDX-License-Identifier: GPL-2.0
/*
 * hwalt CPU ROUNDS: two processes pinned to CPU take turns (a token passed
 * through two pipes), ROUNDS turns each. On its turn a process reads core
 * cycles, instructions retired and its CPU's generation, and checks them
 * against the token, which holds the other process's last readings: within
 * one generation both counters must have advanced. It then passes its own
 * readings on. The parent prints
 *   rounds=R checked=K gen_changes=G violations=V result=ok|fail
 * (K: comparisons made within a generation). Exit 0 only for ok.
 */
#include "hwlib.h"

#include <sys/wait.h>

struct token {
	counter_t cycles, insns;
	unsigned long gen;
	long checked, gen_changes, violations;
};

static void turns(int in, int out, long rounds, int first)
{
	struct token t = { 0, 0, 0, 0, 0, 0 };
	counter_t c, i;
	unsigned long g;
	long r;

	for (r = 0; r < rounds; r++) {
		if (!(first && r == 0) && read(in, &t, sizeof(t)) != sizeof(t))
			_exit(5);
		g = cycles_generation();
		sync_core();
		c = unhalted_core();
		i = insn_retired();
		if (!(first && r == 0)) {
			if (g != t.gen) {
				t.gen_changes++;
			} else {
				t.checked++;
				if (c <= t.cycles || i <= t.insns) {
					t.violations++;
					fprintf(stderr, "pid %d: cycles %llu after %llu, insns %llu after %llu\n",
						(int)getpid(), c, t.cycles, i, t.insns);
				}
			}
		}
		t.cycles = c;
		t.insns = i;
		t.gen = g;
		if (write(out, &t, sizeof(t)) != sizeof(t))
			_exit(5);
	}
	/* The last token goes back to whoever started (the parent reads it). */
}

int main(int argc, char **argv)
{
	int ab[2], ba[2], status;
	struct token t;
	long rounds;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: hwalt CPU ROUNDS\n");
		return 2;
	}
	hw_pin((int)hw_arg(argv[1], "cpu"));
	rounds = hw_arg(argv[2], "rounds");
	if (rounds < 1)
		return 2;
	hw_catch_sigsegv();
	hw_need_counters();
	if (pipe(ab) < 0 || pipe(ba) < 0)
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		turns(ab[0], ba[1], rounds, 0);
		_exit(0);
	}
	turns(ba[0], ab[1], rounds, 1);
	/* The child's answer to our last turn carries the totals. */
	if (read(ba[0], &t, sizeof(t)) != sizeof(t))
		return 2;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("result=child-failed status=%d\n", status);
		return 1;
	}
	printf("rounds=%ld checked=%ld gen_changes=%ld violations=%ld result=%s\n", rounds,
	       t.checked, t.gen_changes, t.violations, t.violations ? "fail" : "ok");
	return t.violations ? 1 : 0;
}
