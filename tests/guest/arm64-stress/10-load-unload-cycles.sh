# Runs in a guest without -icount: under QEMU 7.2 -icount shift=0 this loop hangs the
# guest within ~60 cycles (with or without this driver's timer, and with the first
# version of the driver too); plain TCG runs it clean.
# 200 load/unload cycles while readers run on every CPU: no WARNING/BUG/Oops, and
# user access is gone after the last unload.
# Without -icount QEMU implements no INST_RETIRED (PMCEID0 bit 8 clear), so the
# driver would refuse its default event: it counts CPU_CYCLES on an event counter.
. /tests/lib.sh
i=0
for c in $(seq 0 $(($(nproc) - 1))); do pmuspin $c 600000 > /tmp/spin.$c & done
# The readers hold the test's output open: they go whatever way it ends.
trap 'kill $(jobs -p) 2>/dev/null' EXIT
while [ $i -lt 200 ]; do
	modprobe $MOD events=0x11 || fail "load $i failed: $(dmesg | tail -n 2)"
	rmmod $MOD || fail "unload $i failed"
	i=$((i + 1))
done
kill $(jobs -p) 2>/dev/null
wait
kernel_log_clean
out=$(pmuread all)
n=$(echo "$out" | grep -c 'result=sigill')
[ "$n" -eq "$(nproc)" ] || fail "after 200 cycles: $out"
echo "200 load/unload cycles with $(nproc) readers; SIGILL on all CPUs afterwards"
