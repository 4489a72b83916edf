# The cost of a Python counter read next to time.perf_counter_ns(), measured side by side
# in the guest (a benchmark: the ratio is printed, not asserted).
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
# 3 x 100000 calls: the guest's instructions cost real time under -icount.
out=$(simple-pmu bench --calls 100000 --repeats 3 2>&1) || fail "simple-pmu bench exit $?: $out"
echo "$out"
echo "$out" | grep -qi "ratio" || fail "bench printed no ratio"
echo "$out" | grep -i "ratio" | tail -n 1
