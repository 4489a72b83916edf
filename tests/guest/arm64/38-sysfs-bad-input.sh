# Every writable attribute refuses bad input with -EINVAL and exactly one line,
# keeps its value and its counters, logs no WARNING; non-root writes are refused.
# Events the PMU lacks (PMCEID: 0x5) and events beyond the counters are bad input.
. /tests/lib.sh
long=$(printf '%0100d' 1)
settle
g=$(cat $SYSFS/generation)
check() { # attr value... (each written with printf %b: '1\n\n' is two newlines)
	attr=$1; shift
	old=$(cat $SYSFS/$attr)
	for v in "$@"; do
		log_mark
		printf '%b' "$v" > $SYSFS/$attr 2>/dev/null && fail "$attr accepted '$v'"
		[ "$(cat $SYSFS/$attr)" = "$old" ] || fail "$attr changed after '$v'"
		log=$(log_since | grep 'simple-pmu:')
		[ "$(echo "$log" | grep -c .)" -eq 1 ] || fail "want one line after $attr '$v', got: $log"
		has "$log" "simple-pmu: $attr" || fail "the line after '$v' does not name $attr: $log"
	done
	nonroot_refused $SYSFS/$attr "$old"
	[ "$(cat $SYSFS/$attr)" = "$old" ] || fail "$attr changed after a non-root write"
}
check user_access x 2 3 -1 +1 01 "1x" " 1" '1\n\n' 99999999999999999999 "$long"
check ring 0 4 -1 +2 02 x "3 3" '1\n\n' "$long"
check events 0x10000 -1 +8 zz 8,, 1,2,3,4,5,6,7 0x5 0x8,0x4001 "$long"
[ "$(cat $SYSFS/generation)" = "$g" ] || fail "bad writes changed the counters (generation $g -> $(cat $SYSFS/generation))"
for attr in user_access ring events; do
	old=$(cat $SYSFS/$attr)
	echo "$old" > $SYSFS/$attr || fail "$attr rejects its own value '$old'"
done
pmuread all >/dev/null || fail "reads broken after bad writes"
kernel_log_clean
echo "user_access, ring, events: bad writes refused with one line each, values and counters kept, non-root refused"
