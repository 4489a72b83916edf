# simple-pmu's --json output (status, read, bench) validates against its JSON Schema in
# the guest, with the module loaded: the driver is what measure(scope="cpu") uses, per
# CPU; measure() counts this thread with perf (perf-rdpmc where perf_user_access is 1).
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
simple-pmu status --json > status.json || fail "status --json exit $?"
simple-pmu read --scope cpu --json > read.json || fail "read --json exit $?: $(cat read.json)"
thread=perf-read
[ "$(cat /proc/sys/kernel/perf_user_access 2>/dev/null)" = 1 ] && thread=perf-rdpmc
# perf: cycles and instructions as one group, with its running ratio.
simple-pmu read --backend perf-read --json > perf-read.json ||
	fail "read --backend perf-read exit $?: $(cat perf-read.json)"
rdpmc=""
if [ "$(cat /proc/sys/kernel/perf_user_access 2>/dev/null)" = 1 ]; then
	simple-pmu read --backend perf-rdpmc --json > perf-rdpmc.json ||
		fail "read --backend perf-rdpmc exit $?: $(cat perf-rdpmc.json)"
	rdpmc="-- perf-rdpmc.json read backend=\"perf-rdpmc\" scope=\"thread\" rings=[\"user\"]"
fi
# perf used the PMU: let the module grant user access again before the driver's bench.
settle
simple-pmu bench --calls 2000 --repeats 1 --json > bench.json || fail "bench --json exit $?"
# shellcheck disable=SC2086 # $rdpmc: words of its own
python3 /tests/py/spmu_json.py \
	status.json status measure.backend="\"$thread\"" backends.0.usable=true \
		backends.0.scope='"cpu"' backends.0.rings='["user"]' \
	-- read.json read backend='"driver"' scope='"cpu"' rings='["user"]' widths.cycles=64 \
	-- perf-read.json read backend='"perf-read"' scope='"thread"' rings='["user"]' \
		widths.cycles=64 \
	$rdpmc \
	-- bench.json bench backend='"driver"' || exit 1
settle
