# measure() and the C-level reads it uses around the extension's known loop: 2n plus a
# fixed overhead (this guest runs under -icount shift=0, so counts are exact).
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
# ring=2 (user only): an interrupt inside a window would add kernel instructions.
echo 2 > $SYSFS/ring || fail "cannot set ring=2"
trap 'echo 3 > $SYSFS/ring' EXIT
python3 /tests/py/spmu_check.py exact
