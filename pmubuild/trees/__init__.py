"""Kernel trees and where to build for them: the Debian matrix (matrix, debversion), a
private apt (apt), the cache, the kernels fetched from the archive (kernels), a tree
inspected (kdir), its compiler (toolchain), and chroots (chroot, with binfmt for arm64)."""
