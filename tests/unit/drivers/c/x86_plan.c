// SPDX-License-Identifier: GPL-2.0
/*
 * User-space harness for drivers/x86/plan.h, driven by
 * tests/unit/drivers/test_x86_plan.py. It prints "key=value" lines; the logic is
 * all the header's.
 *
 *   x86_plan ring R
 *   x86_plan plan A_EAX A_EBX A_ECX A_EDX HYPERVISOR
 *   x86_plan index A_EAX A_EBX A_ECX A_EDX HYPERVISOR HW_ID ECX
 *   x86_plan published A_EAX A_EBX A_ECX A_EDX HYPERVISOR HW_ID ECX
 *                      USER_BLOCKED
 *   x86_plan attr HW_ID RING PERIOD
 *   x86_plan refusal INTEL ARCH_PERFMON MAX_LEAF A_EAX A_EBX A_ECX A_EDX
 *   x86_plan mapping LEN PAGE_SIZE PGOFF WRITABLE EXECUTABLE
 *   x86_plan grant ALLOWED_BEFORE ALLOWED_AFTER PCE
 *   x86_plan retake HELD ALWAYS BLOCKED UNBLOCKED
 *   x86_plan blocked USER_DISABLE EVERYONE
 *   x86_plan renew BAD LIVE
 *   x86_plan seen PCE MM_ALLOWED LAST
 *
 * Numbers are parsed with base 0 (0x... hex).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/x86/plan.h"
#include "tests/unit/drivers/c/harness.h"

static void build(char **a, struct spmu_x86_plan *plan)
{
	struct spmu_perfmon p;
	unsigned int sure, maybe;

	spmu_decode_cpuid_a(num(a[0]), num(a[1]), num(a[2]), num(a[3]), &p);
	spmu_perf_fixed_masks(&p, num(a[4]), &sure, &maybe);
	spmu_x86_plan_build(&p, sure, maybe, plan);
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
	if (argc == 7 && !strcmp(argv[1], "plan")) {
		build(argv + 2, &plan);
		printf("nr=%u\n", plan.nr);
		for (i = 0; i < plan.nr; i++)
			printf("slot%u=%u,0x%x,0x%llx\n", i, plan.slot[i].hw_id,
			       plan.slot[i].encoding, plan.slot[i].counters);
		return 0;
	}
	if (argc == 10 && !strcmp(argv[1], "published")) {
		build(argv + 2, &plan);
		printf("index=%d\n",
		       spmu_x86_published_index(&plan, num(argv[7]),
						num(argv[8]), num(argv[9])));
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "attr")) {
		struct spmu_x86_slot slot = { .hw_id = num(argv[2]) };
		struct perf_event_attr attr;

		memset(&attr, 0xff, sizeof(attr));
		spmu_x86_attr_fill(&attr, &slot, num(argv[3]),
				   strtoull(argv[4], NULL, 0));
		printf("type=%u\nsize_is_sizeof=%d\nconfig=%llu\npinned=%u\n",
		       attr.type, attr.size == sizeof(attr),
		       (unsigned long long)attr.config, attr.pinned);
		printf("exclude_kernel=%u\nexclude_user=%u\nexclude_hv=%u\n",
		       attr.exclude_kernel, attr.exclude_user, attr.exclude_hv);
		printf("exclude_guest=%u\nexclude_host=%u\ndisabled=%u\n",
		       attr.exclude_guest, attr.exclude_host, attr.disabled);
		printf("freq=%u\nsample_period=%llu\nprecise_ip=%u\n",
		       attr.freq, (unsigned long long)attr.sample_period,
		       attr.precise_ip);
		return 0;
	}
	if (argc == 7 && !strcmp(argv[1], "mapping")) {
		printf("error=%d\n", spmu_x86_mapping_error(strtoul(argv[2], NULL, 0),
							    strtoul(argv[3], NULL, 0),
							    strtoul(argv[4], NULL, 0),
							    num(argv[5]), num(argv[6])));
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "grant")) {
		printf("error=%d\n", spmu_x86_grant_error(atoi(argv[2]),
							  atoi(argv[3]),
							  num(argv[4])));
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "retake")) {
		printf("retake=%d\neveryone=%d\n",
		       spmu_x86_retake(num(argv[2]), num(argv[3]), num(argv[4]),
				       num(argv[5])),
		       spmu_x86_everyone(num(argv[2]), num(argv[3])));
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "blocked")) {
		printf("error=%d\n", spmu_x86_let_in_blocked(num(argv[2]),
							     num(argv[3])));
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "renew")) {
		printf("renew=%d\n", spmu_x86_token_renew(num(argv[2]),
							  num(argv[3])));
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "seen")) {
		printf("seen=%d\n", spmu_x86_rdpmc_seen(num(argv[2]), num(argv[3]),
							num(argv[4])));
		return 0;
	}
	if (argc == 9 && !strcmp(argv[1], "refusal")) {
		struct spmu_perfmon p;

		memset(&p, 0, sizeof(p));
		if (num(argv[4]) >= SPMU_CPUID_LEAF_PERFMON)
			spmu_decode_cpuid_a(num(argv[5]), num(argv[6]),
					    num(argv[7]), num(argv[8]), &p);
		printf("refusal=%d\n", spmu_x86_refusal(num(argv[2]),
							num(argv[3]),
							num(argv[4]), &p));
		return 0;
	}
	if (argc == 9 && !strcmp(argv[1], "index")) {
		build(argv + 2, &plan);
		for (i = 0; i < plan.nr; i++) {
			if (plan.slot[i].hw_id != num(argv[7]))
				continue;
			printf("ok=%d\n",
			       spmu_x86_index_ok(&plan.slot[i], num(argv[8])));
			return 0;
		}
		printf("ok=noslot\n");
		return 0;
	}
	fprintf(stderr, "usage: see the comment at the top of x86_plan.c\n");
	return 2;
}
