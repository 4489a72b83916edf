# Runs in a guest without -icount: under QEMU 7.2 -icount shift=0 this loop hangs the
# guest within ~60 cycles (with or without this driver's timer, and with the first
# version of the driver too); plain TCG runs it clean.
# Load/unload cycles while readers run on every CPU (spmu.stress_cycles= on the kernel
# command line: 200 on bookworm (or a kernel run alone), 30 on the others, see
# pmubuild/guests/matrixrun.py): no WARNING/BUG/Oops, and user access is gone after the last
# unload.
# Without -icount QEMU implements no INST_RETIRED (PMCEID0 bit 8 clear), so the
# driver would refuse its default event: it counts CPU_CYCLES on an event counter.
. /tests/lib.sh
cycles=$(sed -n 's/.*spmu\.stress_cycles=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$cycles" ] && [ "$cycles" -ge 1 ] || fail "no spmu.stress_cycles=N on the kernel command line"
i=0
pids=""
# Long enough for every cycle: on a debug kernel each takes 15 s or more (a reader that
# outlives the loop is killed after it).
ms=$((cycles * 60000))
[ $ms -ge 600000 ] || ms=600000
for c in $(seq 0 $(($(nproc) - 1))); do
	pmuspin $c $ms > /tmp/spin.$c &
	pids="$pids $!"
done
# The readers hold the test's output open: they go whatever way it ends.
trap 'kill $pids 2>/dev/null' EXIT
# Every other cycle with everyone=1: both ways of letting readers in are torn down
# under them (the readers join again after a trap: guestlib.h).
while [ $i -lt $cycles ]; do
	who=""
	[ $((i % 2)) -eq 1 ] && who=everyone=1
	modprobe $MOD events=0x11 $who || fail "load $i ($who) failed: $(dmesg | tail -n 2)"
	unload || fail "unload $i ($who) failed"
	i=$((i + 1))
done
# Each reader was still reading when the last cycle ended (one that stopped early proves
# nothing after): pmuspin prints only as it ends. Then each saw both: reads that worked
# while loaded, SIGILL while not.
for c in $(seq 0 $(($(nproc) - 1))); do
	[ -s /tmp/spin.$c ] && fail "reader on cpu$c ended before the last cycle: $(cat /tmp/spin.$c)"
done
kill $pids
c=0
for p in $pids; do
	wait $p || fail "reader on cpu$c ended with status $?"
	r=$(cat /tmp/spin.$c)
	ok=$(echo "$r" | sed -n 's/^ok=\([0-9]*\) .*/\1/p') ill=$(echo "$r" | sed -n 's/.*sigill=\([0-9]*\)$/\1/p')
	[ "${ok:-0}" -gt 0 ] && [ "${ill:-0}" -gt 0 ] || fail "reader on cpu$c: '$r'"
	c=$((c + 1))
done
trap - EXIT
kernel_log_clean
out=$(pmuread all)
n=$(echo "$out" | grep -c 'result=sigill')
[ "$n" -eq "$(nproc)" ] || fail "after $cycles cycles: $out"
echo "$cycles load/unload cycles with $(nproc) readers ($(cat /tmp/spin.0) on cpu0); SIGILL on all CPUs afterwards"
