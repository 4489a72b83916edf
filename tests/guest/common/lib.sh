# Helpers for the in-guest tests (sourced; POSIX sh as busybox runs it).
MOD=simple-pmu
SYSFS=/sys/devices/system/simple-pmu/simple-pmu0

fail() {
	echo "FAIL: $*"
	exit 1
}

# The kernel log must stay free of WARNING/BUG/Oops through every test.
kernel_log_clean() {
	bad=$(dmesg | grep -E 'WARNING:|BUG:|Oops|Unable to handle|Call trace:' | head -n 5)
	[ -z "$bad" ] || fail "kernel log: $bad"
}
