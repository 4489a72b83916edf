# include/cycles.h's 2011 API on arm64: exact instruction counts of a known loop through
# insn_retired() (the event counter the driver placed INST_RETIRED in), cycles and timer.
. /tests/lib.sh
[ -d $SYSFS ] || fail "module not loaded"
# ring=2 (user only, the default): an interrupt inside a window adds nothing.
[ "$(cat $SYSFS/ring)" = 2 ] || fail "ring is $(cat $SYSFS/ring), want the default 2"
# A window the other vCPU disturbed (QEMU's global instruction count, README) makes
# cyclesh report "differs between runs": only that is tried again, twice at most.
for try in 1 2 3; do
	out=$(cyclesh exact) && { echo "$out"; exit 0; }
	echo "$out" | grep -q 'differs between runs' || { echo "$out"; exit 1; }
	echo "try $try disturbed: $(echo "$out" | grep 'differs between runs')"
done
fail "cyclesh exact: no undisturbed try in 3"
