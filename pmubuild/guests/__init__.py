"""QEMU test guests: booting and reading the console (qemu, idledt), the initramfs (cpio,
guest, pyguest, perfguest), kernels built here (selfkernel, sigkernel, debugkernel), and the
runs over the matrix (matrixrun) and under the kernel's debuggers (debugrun, debugjudge)."""
