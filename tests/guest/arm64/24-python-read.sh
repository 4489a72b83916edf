# With the module loaded, Python reads the counters: the probe finds the driver, and
# `simple-pmu read` prints cycles and instructions.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
python3 /tests/py/spmu_check.py present || exit 1
# The module's counters are CPU-wide: read uses them when asked (--scope cpu); the
# default, this thread's counts, comes from perf (issue 22).
out=$(simple-pmu read --scope cpu --json) || fail "simple-pmu read exit $?: $out"
has "$out" '"backend": "driver"' || fail "read --scope cpu did not use the driver: $out"
echo "$out" | grep -Eq '"instructions": [0-9]+' || fail "no instruction count: $out"
echo "read: $out"
