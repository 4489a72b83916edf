# simple-pmu's --json output (status, read, bench) validates against its JSON Schema in
# the guest, with the module loaded: the driver is what measure() uses, per CPU.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
check() { # JSON COMMAND CHECKS...: valid, of that command, with those values
	_doc=$1
	shift
	printf '%s\n' "$_doc" | python3 /tests/py/spmu_json.py "$@" || fail "$1: $_doc"
}
out=$(simple-pmu status --json) || fail "status --json exit $?"
check "$out" status measure.backend='"driver"' backends.0.usable=true \
	backends.0.scope='"cpu"' backends.0.rings='["user"]'
out=$(simple-pmu read --json) || fail "read --json exit $?: $out"
check "$out" read backend='"driver"' scope='"cpu"' rings='["user"]' widths.cycles=64
# perf: cycles and instructions as one group, with its running ratio.
if [ "$(cat /proc/sys/kernel/perf_user_access 2>/dev/null)" = 1 ]; then
	out=$(simple-pmu read --backend perf-rdpmc --json) || fail "read perf-rdpmc exit $?: $out"
	check "$out" read backend='"perf-rdpmc"' scope='"thread"' rings='["user"]'
fi
out=$(simple-pmu read --backend perf-read --json) || fail "read perf-read exit $?: $out"
check "$out" read backend='"perf-read"' scope='"thread"' rings='["user"]' \
	widths.cycles=64
out=$(simple-pmu bench --calls 2000 --repeats 1 --json) || fail "bench --json exit $?"
# perf used the PMU above: let the module grant user access again for the tests after.
settle
check "$out" bench backend='"driver"'
