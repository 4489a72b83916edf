# Runs in a guest without -icount: under QEMU 7.2 -icount shift=0 this loop hangs the
# guest within ~60 cycles (with or without this driver's timer, and with the first
# version of the driver too); plain TCG runs it clean.
# 200 load/unload cycles while readers run on every CPU: no WARNING/BUG/Oops, and
# user access is gone after the last unload.
. /tests/lib.sh
i=0
for c in $(seq 0 $(($(nproc) - 1))); do pmuspin $c 600000 > /tmp/spin.$c & done
while [ $i -lt 200 ]; do
	modprobe $MOD || fail "load $i failed"
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
