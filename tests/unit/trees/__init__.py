"""pmubuild.trees: apt mirrors, the cache, versions, the matrix, kernels, kdir, toolchains."""
