# measure() and the C-level reads it uses around the extension's known loop: 2n plus a
# fixed overhead (this guest runs under -icount shift=0, so counts are exact); the same
# through simple_pmu.Window of both scopes.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
# ring=2 (user only, the default): an interrupt inside a window adds nothing.
[ "$(cat $SYSFS/ring)" = 2 ] || fail "ring is $(cat $SYSFS/ring), want the default 2"
python3 /tests/py/spmu_check.py exact || exit 1
# simple_pmu.Window, scope cpu (the module) and scope thread (perf self-monitoring: needs
# kernel.perf_user_access=1 from 5.17, set here and restored; 5.10 has no such sysctl).
PUA=/proc/sys/kernel/perf_user_access
if [ -f $PUA ]; then
	pua0=$(cat $PUA)
	trap 'echo "$pua0" > $PUA' EXIT
	echo 1 > $PUA || fail "cannot set $PUA to 1"
fi
python3 /tests/py/spmu_check.py window || exit 1
