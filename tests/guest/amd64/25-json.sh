# simple-pmu's --json output validates against its JSON Schema in the x86 TCG guest, where
# no counter backend works: status says why, read prints a JSON error object and exits 1,
# bench reads the timer.
. /tests/lib.sh
simple-pmu status --json > status.json || fail "status --json exit $?"
simple-pmu read --json > read.json
rc=$?
[ $rc -eq 1 ] || fail "read --json exit $rc, want 1: $(cat read.json)"
simple-pmu bench --calls 2000 --repeats 1 --json > bench.json || fail "bench --json exit $?"
python3 /tests/py/spmu_json.py \
	status.json status measure.backend=null measure.reason.code='"no_counter_backend"' \
		backends.3.usable=true \
	-- read.json read-error error.code='"no_counter_backend"' \
	-- bench.json bench backend=null
