# perf counts cycles on cpu1 and stops; user reads there work again within the
# documented bound, the intervention is counted, and perf's count was right.
. /tests/lib.sh
. /tests/data/perfcycles.env
n=1000000
bound=$(( $(cat $SYSFS/recheck_ms) * 2 + 50 ))
before=$(interventions 1 perf)
# Under -icount PMCCNTR follows QEMU's virtual clock, which every vCPU's instructions
# advance (TCG runs them in turn): work on cpu0 during the loop inflates cpu1's cycle
# count, never deflates it. So: three runs, the smallest count is judged; the recovery
# bound holds on every run.
cycles=""
for run in 1 2 3; do
	out=$(perfcycles 1 $n) || fail "perfcycles: $out"
	echo "$out"
	c=$(echo "$out" | sed 's/perf_cycles=\([0-9]*\).*/\1/')
	ms=$(echo "$out" | sed 's/.*recovered_ms=\([0-9-]*\)/\1/')
	[ "$ms" -ge 0 ] && [ "$ms" -le "$bound" ] || fail "run $run: recovered after ${ms} ms, bound $bound ms"
	[ -z "$cycles" ] || [ "$c" -lt "$cycles" ] && cycles=$c
done
want=$((BODY * n))
# perf counted user cycles around the loop: the loop plus a few dozen instructions of
# ioctl() wrappers, one cycle each under -icount.
[ "$cycles" -ge "$want" ] && [ "$cycles" -le $((want + want / 100)) ] ||
	fail "perf counted at least $cycles cycles for a $want-instruction loop"
pmuread 1 || fail "cpu1 not readable after recovery"
after=$(interventions 1 perf)
[ "$after" -gt "$before" ] || fail "perf interventions on cpu1 $before -> $after"
echo "perf counted $cycles (loop $want); reads back after ${ms} ms (bound $bound); perf interventions $before -> $after"
