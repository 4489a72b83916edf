// SPDX-License-Identifier: GPL-2.0
/*
 * hwcpuid: the CPUID facts the hardware test needs, one "key=value" a line:
 * vendor, max_leaf, leaf1 (EAX: family/model/stepping), hypervisor (leaf 1
 * ECX bit 31), hybrid (leaf 7 EDX bit 15), leaf 0xA's four registers.
 * Needs no module and reads no counter: CPUID never faults.
 */
#include <cpuid.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	unsigned int a, b, c, d, max;
	char vendor[13];

	__cpuid_count(0, 0, max, b, c, d);
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = 0;
	printf("vendor=%s\nmax_leaf=0x%x\n", vendor, max);
	__cpuid_count(1, 0, a, b, c, d);
	printf("leaf1_eax=0x%x\nhypervisor=%u\n", a, (c >> 31) & 1);
	if (max >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		printf("hybrid=%u\n", (d >> 15) & 1);
	} else {
		printf("hybrid=0\n");
	}
	if (max >= 0xa) {
		__cpuid_count(0xa, 0, a, b, c, d);
		printf("leafa=0x%x 0x%x 0x%x 0x%x\n", a, b, c, d);
	} else {
		printf("leafa=0x0 0x0 0x0 0x0\n");
	}
	return 0;
}
