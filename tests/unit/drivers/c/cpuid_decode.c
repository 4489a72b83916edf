// SPDX-License-Identifier: GPL-2.0
/*
 * User-space harness for drivers/x86/cpuid_pmu.h, driven by
 * tests/unit/drivers/test_cpuid.py. It prints "key=value" lines; all the logic is
 * the header's, so a broken decoder shows up as a wrong value here.
 *
 *   cpuid_decode dump MAX A_EAX A_EBX A_ECX A_EDX L7_1_EAX
 *                     X0_EAX X0_EBX X1_EAX X1_EBX X3_EAX L1A_EAX
 *   cpuid_decode event CONFIG GP_MASK FIXED_MASK ICL_OR_LATER
 *   cpuid_decode rdpmc fixed|gp I
 *   cpuid_decode perfidx IDX
 *   cpuid_decode rdpmc-decode ECX
 *
 * Numbers are parsed with base 0 (0x... hex). In "dump", leaves the CPU
 * does not have are passed as 0; MAX decides what is looked at.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/x86/cpuid_pmu.h"
#include "tests/unit/drivers/c/harness.h"

static void print_perfmon(const char *pfx, const struct spmu_perfmon *p)
{
	printf("%sversion=%u\n", pfx, p->version);
	printf("%snum_gp=%u\n", pfx, p->num_gp);
	printf("%sgp_width=%u\n", pfx, p->gp_width);
	printf("%sgp_mask=0x%x\n", pfx, p->gp_mask);
	printf("%sebx_len=%u\n", pfx, p->ebx_len);
	printf("%sevents_unavail=0x%x\n", pfx, p->events_unavail);
	printf("%sevents_avail=0x%x\n", pfx, p->events_avail);
	printf("%snum_fixed=%u\n", pfx, p->num_fixed);
	printf("%sfixed_width=%u\n", pfx, p->fixed_width);
	printf("%sfixed_mask=0x%x\n", pfx, p->fixed_mask);
	printf("%sanythread_deprecated=%d\n", pfx, p->anythread_deprecated);
}

static int dump(char **a)
{
	unsigned int max = num(a[0]);
	struct spmu_perfmon p = { 0 };
	struct spmu_perfmon_ext x = { 0 };
	int ev;

	printf("leaf_a=%d\n", spmu_leaf_present(max, SPMU_CPUID_LEAF_PERFMON));
	if (spmu_leaf_present(max, SPMU_CPUID_LEAF_PERFMON))
		spmu_decode_cpuid_a(num(a[1]), num(a[2]), num(a[3]), num(a[4]),
				    &p);
	print_perfmon("", &p);
	for (ev = SPMU_EV_CORE_CYCLES; ev <= SPMU_EV_TD_RETIRING; ev++)
		printf("event%d=%d\n", ev, spmu_event_available(&p, ev));
	printf("perf_arch_pmu=%d\n", spmu_perf_arch_pmu(&p));
	printf("perf_fixed_bare=0x%x\n", spmu_perf_fixed_mask(&p, false, true));
	printf("perf_fixed_guest=0x%x\n", spmu_perf_fixed_mask(&p, true, true));
	printf("perf_fixed_bare_5_10=0x%x\n",
	       spmu_perf_fixed_mask(&p, false, false));
	if (spmu_leaf_present(max, SPMU_CPUID_LEAF_HYBRID))
		printf("core_type=0x%x\n", spmu_core_type(num(a[11])));

	printf("leaf_23=%d\n", spmu_leaf_23_present(max, num(a[5])));
	if (!spmu_leaf_23_present(max, num(a[5])))
		return 0;
	spmu_decode_cpuid_23(num(a[6]), num(a[7]), num(a[8]), num(a[9]),
			     num(a[10]), &x);
	printf("ext_subleaves=0x%x\n", x.subleaves);
	printf("ext_umask2=%d\n", !!(x.caps & SPMU_EXT_CAP_UMASK2));
	printf("ext_eq=%d\n", !!(x.caps & SPMU_EXT_CAP_EQ));
	printf("ext_gp_mask=0x%x\n", x.gp_mask);
	printf("ext_fixed_mask=0x%x\n", x.fixed_mask);
	printf("ext_events=0x%x\n", x.events);
	spmu_apply_cpuid_23(&p, &x);
	print_perfmon("merged_", &p);
	for (ev = SPMU_EV_CORE_CYCLES; ev <= SPMU_EV_TD_RETIRING; ev++)
		printf("merged_event%d=%d\n", ev, spmu_event_available(&p, ev));
	return 0;
}

int main(int argc, char **argv)
{
	bool fixed;
	unsigned int i;

	if (argc == 14 && !strcmp(argv[1], "dump"))
		return dump(argv + 2);
	if (argc == 6 && !strcmp(argv[1], "event")) {
		printf("counters=0x%llx\n",
		       spmu_event_counters(num(argv[2]), num(argv[3]),
					   num(argv[4]), num(argv[5])));
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "rdpmc")) {
		printf("index=0x%x\n",
		       spmu_rdpmc_index(!strcmp(argv[2], "fixed"), num(argv[3])));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "perfidx")) {
		printf("index=0x%x\n", spmu_rdpmc_from_perf_idx(num(argv[2])));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "rdpmc-decode")) {
		if (spmu_rdpmc_decode(num(argv[2]), &fixed, &i))
			printf("counter=none\n");
		else
			printf("counter=%s%u\n", fixed ? "fixed" : "gp", i);
		return 0;
	}
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
