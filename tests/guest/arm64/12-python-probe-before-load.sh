# Before the module loads, simple_pmu's probe names why the driver backend is unusable,
# and the CLI's status says so too (the probe's trial reads must not kill it).
. /tests/lib.sh
python3 /tests/py/spmu_check.py absent || exit 1
python3 /tests/py/spmu_check.py status-json || exit 1
out=$(simple-pmu status) || fail "simple-pmu status exit $?"
has "$out" "module not loaded" || fail "status does not say the module is not loaded: $out"
echo "status: $(echo "$out" | grep -m1 'not loaded')"
