# x86 TCG has no architectural perfmon: simple_pmu's status says exactly that.
. /tests/lib.sh
out=$(simple-pmu status) || fail "simple-pmu status exit $?"
has "$out" "no architectural perfmon" || fail "status does not name the missing perfmon: $out"
python3 /tests/py/spmu_check.py absent || exit 1
python3 /tests/py/spmu_check.py status-json || exit 1
echo "status: $(echo "$out" | grep -m1 'no architectural perfmon' | sed 's/^ *- *//')"
