"""The drivers' x86 code (CPUID decoding, the counter plan) compiled into host harnesses."""
