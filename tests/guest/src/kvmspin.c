// SPDX-License-Identifier: GPL-2.0
/*
 * kvmspin CPU SECONDS: the smallest KVM user of all. On CPU, create a VM
 * with one vCPU whose code is a counting loop that exits to us by an MMIO
 * write, and run it again and again for SECONDS: a vCPU loaded on that CPU
 * most of the time, which the driver must leave alone (KVM holds
 * PMUSERENR_EL0 then). Prints "runs=R exits_mmio=M" and exits 0, or says
 * why KVM could not run it.
 */
#include "guestlib.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__aarch64__)
#include <linux/kvm.h>
#include <stddef.h>

#define GUEST_BASE	0x10000ull
#define GUEST_SIZE	0x10000ull
#define MMIO_EXIT	0x1000ull	/* unmapped: a write there exits */

/*
 *   movz x0, #0x10, lsl #16   (x0 = 1 << 20 iterations)
 * 1: subs x0, x0, #1
 *   b.ne 1b
 *   movz x1, #0x1000
 *   str  x0, [x1]             (MMIO exit)
 *   b    .-20                 (back to the start when run again)
 */
static const uint32_t guest_code[] = {
	0xd2a00200,	/* movz x0, #0x10, lsl #16 */
	0xf1000400,	/* subs x0, x0, #1 */
	0x54ffffe1,	/* b.ne .-4 */
	0xd2820001,	/* movz x1, #0x1000 */
	0xf9000020,	/* str x0, [x1] */
	0x17fffffb,	/* b .-20 */
};

static int set_pc(int vcpu, uint64_t pc)
{
	struct kvm_one_reg reg = {
		.id = KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE |
		      (offsetof(struct kvm_regs, regs.pc) / sizeof(uint32_t)),
		.addr = (uint64_t)(uintptr_t)&pc,
	};

	return ioctl(vcpu, KVM_SET_ONE_REG, &reg);
}

static int fail(const char *what)
{
	printf("result=%s errno=%d (%s)\n", what, errno, strerror(errno));
	return 1;
}
#endif

int main(int argc, char **argv)
{
#if defined(__aarch64__)
	struct kvm_userspace_memory_region mem;
	struct kvm_vcpu_init init;
	unsigned long runs = 0, mmio = 0;
	struct kvm_run *run;
	int kvm, vm, vcpu, size;
	uint64_t end;
	void *ram;

	if (argc != 3) {
		fprintf(stderr, "usage: kvmspin CPU SECONDS\n");
		return 2;
	}
	if (spmu_pin((int)spmu_arg(argv[1], "cpu")))
		return fail("pin");
	end = spmu_now_ns() + (uint64_t)spmu_arg(argv[2], "seconds") * 1000000000ull;
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return fail("no-dev-kvm");
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return fail("create-vm");
	ram = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ram == MAP_FAILED)
		return fail("mmap-ram");
	memcpy(ram, guest_code, sizeof(guest_code));
	mem = (struct kvm_userspace_memory_region){
		.slot = 0, .guest_phys_addr = GUEST_BASE, .memory_size = GUEST_SIZE,
		.userspace_addr = (uint64_t)(uintptr_t)ram,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &mem))
		return fail("set-memory");
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return fail("create-vcpu");
	if (ioctl(vm, KVM_ARM_PREFERRED_TARGET, &init) || ioctl(vcpu, KVM_ARM_VCPU_INIT, &init))
		return fail("vcpu-init");
	if (set_pc(vcpu, GUEST_BASE))
		return fail("set-pc");
	size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	run = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return fail("mmap-run");
	while (spmu_now_ns() < end) {
		if (ioctl(vcpu, KVM_RUN, 0))
			return fail("run");
		runs++;
		if (run->exit_reason == KVM_EXIT_MMIO && run->mmio.phys_addr == MMIO_EXIT)
			mmio++;
		else
			return fail("unexpected-exit");
	}
	printf("runs=%lu exits_mmio=%lu\n", runs, mmio);
	return 0;
#else
	(void)argc;
	(void)argv;
	return spmu_unsupported_arch();
#endif
}
