// SPDX-License-Identifier: GPL-2.0-only
/*
 * Two translation units guard reads in turn (this one and guard_unit_b.c),
 * then the program faults on its own: its own handler, installed before any
 * guard, must get the fault. Exits 42 from that handler; anything else (a
 * handler chaining to itself until the stack runs out) is a failure.
 */
#define _GNU_SOURCE 1
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include "cycles.h"

void unit_b_begin(void);
int unit_b_end(void);

static void own_handler(int sig)
{
	(void)sig;
	_exit(42);
}

static void own_fault(void)
{
#if defined(__x86_64__)
	*(volatile int *)0 = 1;			/* SIGSEGV, as RDPMC's #GP */
#else
	__asm__ volatile(".inst 0x00000000");	/* UDF: SIGILL, as a closed mrs */
#endif
}

int main(void)
{
	struct sigaction now;

	signal(CYCLES_GUARD_SIGNAL, own_handler);
	/* b begins, a begins, b ends, a ends: the last to end is not the first in. */
	unit_b_begin();
	cycles_guard_begin(&cycles_tls);
	unit_b_end();
	/* a still guards: the guard must still be the handler (one count). */
	sigaction(CYCLES_GUARD_SIGNAL, NULL, &now);
	printf("still_guarded=%d\n", (now.sa_flags & SA_SIGINFO) &&
	       now.sa_sigaction == cycles_guard_handler);
	cycles_guard_end(&cycles_tls);
	/* Then a alone, and b alone. */
	cycles_guard_begin(&cycles_tls);
	cycles_guard_end(&cycles_tls);
	unit_b_begin();
	unit_b_end();
	sigaction(CYCLES_GUARD_SIGNAL, NULL, &now);
	printf("restored=%d\n", !(now.sa_flags & SA_SIGINFO) &&
	       now.sa_handler == own_handler);
	fflush(stdout);
	own_fault();
	return 1;
}
