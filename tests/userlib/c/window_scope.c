// SPDX-License-Identifier: GPL-2.0-only
/*
 * A perf-path window against cycles_set_scope() and fork(), on a fake perf
 * page (this host has no PMU to give a real one): the thread's state is
 * set by hand to the perf path with that page, mapped as perf would map
 * it, so that closing the state really unmaps it. Then the same path with
 * its guard on, as cycles_thread_setup() leaves it: the page says counter
 * 0 is readable, but the read faults here (no user RDPMC on this host, no
 * EL0 PMU access under qemu-user), as it does on a machine where root has
 * just turned user reads off. Prints one key=value per check; main's exit
 * status is 0 unless the program crashed.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cycles.h"

static void fake_perf_path(void)
{
	struct cycles_thread *t = &cycles_tls;
	struct perf_event_mmap_page *pc;
	int i;

	pc = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pc == MAP_FAILED) {
		perror("mmap");
		_exit(2);
	}
	pc->lock = 2;
	pc->index = 1;			/* on counter 0 */
	pc->cap_user_rdpmc = 1;
	pc->pmc_width = 48;
	for (i = 0; i < CYCLES_NR_COUNTERS; i++) {
		t->fd[i] = -1;
		t->pc[i] = NULL;
	}
	t->pc[CYCLES_CORE] = pc;
	t->path = CYCLES_PATH_PERF_MMAP;
	t->scope = CYCLES_SCOPE_THREAD_ID;
	t->ready = 1;
}

int main(void)
{
	struct cycles_window w;
	pid_t child;
	int rc, status;

	/* Set up once for real (the key, pthread_atfork), then fake the path. */
	cycles_path();
	fake_perf_path();
	printf("begin=%d\n", cycles_window_begin(&w));
	errno = 0;
	rc = cycles_set_scope(CYCLES_SCOPE_CPU_ID);
	printf("set_scope_open=%d errno_busy=%d path_kept=%d\n", rc,
	       errno == EBUSY, cycles_tls.path == CYCLES_PATH_PERF_MMAP);
	fflush(stdout);
	child = fork();
	if (child == 0) {
		/* The atfork handler unmapped the page: end says invalid. */
		printf("child_end=%u\n", cycles_window_end(&w));
		fflush(stdout);
		_exit(0);
	}
	waitpid(child, &status, 0);
	printf("child_exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) :
	       128 + WTERMSIG(status));
	printf("end=%u\n", cycles_window_end(&w));
	printf("second_end=%u\n", cycles_window_end(&w));
	rc = cycles_set_scope(CYCLES_SCOPE_CPU_ID);
	printf("set_scope_after=%d\n", rc >= 0);
	fflush(stdout);

	fake_perf_path();
	cycles_guard_begin(&cycles_tls);	/* as the setup does */
	cycles_tls.perf_guard = 1;
	printf("guarded_begin=%d\n", cycles_window_begin(&w));
	printf("guarded_read=%llu\n",
	       (unsigned long long)cycles_window_read(&w, CYCLES_CORE));
	printf("guarded_end=%u\n", cycles_window_end(&w));
	{
		struct cycles_reading r;

		rc = cycles_read(CYCLES_CORE, &r);
		printf("single_read=%d faulted=%d\n", rc,
		       !!(r.flags & CYCLES_FAULTED));
	}
	cycles_set_scope(CYCLES_SCOPE_CPU_ID);	/* closes: the guard goes */
	{
		struct sigaction now;

		sigaction(CYCLES_GUARD_SIGNAL, NULL, &now);
		printf("handler_back=%d\n", !(now.sa_flags & SA_SIGINFO) &&
		       now.sa_handler == SIG_DFL);
	}
	return 0;
}
