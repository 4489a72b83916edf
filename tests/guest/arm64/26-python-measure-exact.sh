# measure() and the C-level reads it uses around the extension's known loop: 2n plus a
# fixed overhead (this guest runs under -icount shift=0, so counts are exact).
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
# ring=2 (user only, the default): an interrupt inside a window adds nothing.
[ "$(cat $SYSFS/ring)" = 2 ] || fail "ring is $(cat $SYSFS/ring), want the default 2"
python3 /tests/py/spmu_check.py exact
