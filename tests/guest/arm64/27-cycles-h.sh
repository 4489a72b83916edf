# include/cycles.h's 2011 API on arm64: exact instruction counts of a known loop through
# insn_retired() (the event counter the driver placed INST_RETIRED in), cycles and timer.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
echo 2 > $SYSFS/ring || fail "cannot set ring=2"
trap 'echo 3 > $SYSFS/ring' EXIT
cyclesh exact
