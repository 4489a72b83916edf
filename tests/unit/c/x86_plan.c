// SPDX-License-Identifier: GPL-2.0
/*
 * User-space harness for drivers/x86/plan.h, driven by
 * tests/unit/test_x86_plan.py. It prints "key=value" lines; the logic is
 * all the header's.
 *
 *   x86_plan ring R
 *   x86_plan plan A_EAX A_EBX A_ECX A_EDX HYPERVISOR ECX_AWARE
 *   x86_plan index A_EAX A_EBX A_ECX A_EDX HYPERVISOR ECX_AWARE HW_ID ECX
 *
 * Numbers are parsed with base 0 (0x... hex).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/x86/plan.h"

static unsigned int num(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (!*s || *end || v > 0xffffffffUL) {
		fprintf(stderr, "bad number: %s\n", s);
		exit(2);
	}
	return (unsigned int)v;
}

static void build(char **a, struct spmu_x86_plan *plan)
{
	struct spmu_perfmon p;
	unsigned int fixed;

	spmu_decode_cpuid_a(num(a[0]), num(a[1]), num(a[2]), num(a[3]), &p);
	fixed = spmu_perf_fixed_mask(&p, num(a[4]), num(a[5]));
	spmu_x86_plan_build(&p, fixed, plan);
}

int main(int argc, char **argv)
{
	struct spmu_x86_plan plan;
	bool ek, eu;
	unsigned int i;

	if (argc == 3 && !strcmp(argv[1], "ring")) {
		if (spmu_ring_excludes(num(argv[2]), &ek, &eu)) {
			printf("valid=0\n");
			return 0;
		}
		printf("valid=1\nexclude_kernel=%d\nexclude_user=%d\n", ek, eu);
		return 0;
	}
	if (argc == 8 && !strcmp(argv[1], "plan")) {
		build(argv + 2, &plan);
		printf("nr=%u\n", plan.nr);
		for (i = 0; i < plan.nr; i++)
			printf("slot%u=%u,0x%x,0x%llx\n", i, plan.slot[i].hw_id,
			       plan.slot[i].encoding, plan.slot[i].counters);
		return 0;
	}
	if (argc == 10 && !strcmp(argv[1], "index")) {
		build(argv + 2, &plan);
		for (i = 0; i < plan.nr; i++) {
			if (plan.slot[i].hw_id != num(argv[8]))
				continue;
			printf("ok=%d\n",
			       spmu_x86_index_ok(&plan.slot[i], num(argv[9])));
			return 0;
		}
		printf("ok=noslot\n");
		return 0;
	}
	fprintf(stderr, "usage: see the comment at the top of x86_plan.c\n");
	return 2;
}
