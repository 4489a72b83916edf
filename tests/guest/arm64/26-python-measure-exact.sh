# measure() around the extension's known loop returns 2n + a fixed overhead, identical
# on every run (this guest runs under -icount shift=0).
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
python3 /tests/py/spmu_check.py exact
