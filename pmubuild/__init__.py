"""Build, test and packaging pipeline of simple-pmu, driven by tasks.py. A package imports
only packages above it in this list (tests/unit/docs/test_imports.py checks it):

common    errors, progress lines, the seeds' tcyc.c
kbuild    what the DKMS package ships: compat, modverify, kbuildfiles, compat.h.j2
trees     the kernel matrix, apt, the cache, kernel trees, toolchains, chroots
modbuild  the module built, signed and checkpatch'd from a checkout
guests    QEMU guests: initramfs, kernels built here, matrix and debug runs
hw        `invoke test-hw` on real Intel hardware
bench     `invoke bench`
debian    the Debian packages built and tested end to end
commands  the bodies of the invoke tasks (a module)
"""
