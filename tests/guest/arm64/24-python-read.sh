# With the module loaded, Python reads the counters: the probe finds the driver, and
# `simple-pmu read` prints cycles and instructions.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
python3 /tests/py/spmu_check.py present || exit 1
out=$(simple-pmu read --json) || fail "simple-pmu read exit $?: $out"
echo "$out" | grep -q '"backend": "driver"' || fail "read did not use the driver: $out"
echo "$out" | grep -Eq '"instructions": [0-9]+' || fail "no instruction count: $out"
echo "read: $out"
