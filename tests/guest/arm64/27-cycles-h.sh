# include/cycles.h's 2011 API on arm64: exact instruction counts of a known loop through
# insn_retired() (the event counter the driver placed INST_RETIRED in), cycles and timer.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
# ring=2 (user only, the default): an interrupt inside a window adds nothing.
[ "$(cat $SYSFS/ring)" = 2 ] || fail "ring is $(cat $SYSFS/ring), want the default 2"
cyclesh exact
