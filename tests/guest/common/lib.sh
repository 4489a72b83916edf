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

# Counter index holding event $1 (e.g. 0x0008), from event_counters "IDX:0xEVENT ...".
event_index() {
	for pair in $(cat $SYSFS/event_counters); do
		[ $((${pair#*:})) -eq $(($1)) ] && { echo "${pair%%:*}"; return 0; }
	done
	return 1
}

# The perf= intervention count of CPU $1, from "cpuN hotplug=H pm=P perf=F" lines.
interventions() {
	grep "^cpu$1 " $SYSFS/interventions | tr ' ' '\n' | grep "^$2=" | cut -d= -f2
}
