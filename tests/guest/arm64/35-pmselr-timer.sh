# The driver never uses PMSELR_EL0. An EL0 program selects a counter once and
# reads PMXEVCNTR_EL0 across several of the driver's checks: with the driver's
# instruction counter selected every run is exact; with a counter the driver does
# not hold selected, the selection reads back unchanged at the end.
. /tests/lib.sh
. /tests/data/pmuloop.env
gap=$(($(cat $SYSFS/recheck_ms) * 3 / 2))
c0=$(cpu_attr 1 checks)
runs() { alone 's/^insns=\([0-9]*\) .*/\1/p' pmuloop 1 "$1" 100000 5 $gap; }
exact_batch "PMSELR across checks" $((STRAIGHT + BODY * 100000 + TAIL)) 5 runs "$(published 1 1)"
c1=$(cpu_attr 1 checks)
[ $((c1 - c0)) -ge 3 ] || fail "only $((c1 - c0)) driver checks ran on cpu1 during the runs"
# A counter nobody holds: the top one, unless the driver's events sit there.
free=$(($(cat $SYSFS/num_counters) - 1))
for i in $(cat $SYSFS/cpu1/cycle_index $SYSFS/cpu1/event_index); do
	[ "$i" = "$free" ] && fail "counter $free is the driver's; pick another"
done
out=$(pmuloop 1 $free 1000 4 $gap) || fail "pmuloop: $out"
[ "$(echo "$out" | sed -n 's/^pmselr=//p')" = "$free" ] || fail "PMSELR changed under the program: $out"
c2=$(cpu_attr 1 checks)
[ $((c2 - c1)) -ge 3 ] || fail "only $((c2 - c1)) driver checks ran on cpu1 during the second program"
echo "PMSELR kept across $((c1 - c0)) and $((c2 - c1)) driver checks: runs exact, selection $free read back"
