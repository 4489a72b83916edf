# simple-pmu's --json output validates against its JSON Schema in the x86 TCG guest, where
# no counter backend works: status says why, read prints a JSON error object and exits 1,
# bench reads the timer.
. /tests/lib.sh
check() { # JSON COMMAND CHECKS...: valid, of that command, with those values
	_doc=$1
	shift
	printf '%s\n' "$_doc" | python3 /tests/py/spmu_json.py "$@" || fail "$1: $_doc"
}
out=$(simple-pmu status --json) || fail "status --json exit $?"
check "$out" status measure.backend=null measure.reason.code='"no_counter_backend"' \
	backends.3.usable=true
out=$(simple-pmu read --json)
rc=$?
[ $rc -eq 1 ] || fail "read --json exit $rc, want 1: $out"
check "$out" read-error error.code='"no_counter_backend"'
out=$(simple-pmu bench --calls 2000 --repeats 1 --json) || fail "bench --json exit $?"
check "$out" bench backend=null
