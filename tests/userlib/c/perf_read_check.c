// SPDX-License-Identifier: GPL-2.0-only
/*
 * cycles.h's read(2) reading (cycles_perf_read) of a perf event whose fd is
 * a pipe holding what read(2) of the event would return: value,
 * time_enabled, time_running. Prints "rc flags" per case.
 */
#define _GNU_SOURCE 1
#include <stdio.h>
#include <unistd.h>
#include "cycles.h"

static void one(unsigned long long value, unsigned long long enabled,
		unsigned long long running)
{
	unsigned long long v[3] = { value, enabled, running };
	struct cycles_reading r = { 0 };
	int p[2], rc;

	if (pipe(p) < 0 || write(p[1], v, sizeof(v)) != sizeof(v))
		_exit(2);
	cycles_tls.fd[CYCLES_CORE] = p[0];
	rc = cycles_perf_read(&cycles_tls, CYCLES_CORE, &r);
	printf("%d %u %llu\n", rc, r.flags, (unsigned long long)r.value);
	close(p[0]);
	close(p[1]);
	cycles_tls.fd[CYCLES_CORE] = -1;
}

int main(void)
{
	one(5, 100, 100);	/* always on the PMU: exact */
	one(5, 100, 50);	/* half the time: valid, multiplexed */
	one(5, 100, 0);		/* never: no reading */
	one(0, 0, 0);		/* just opened, nothing counted yet: exact 0 */
	return 0;
}
