# The driver's check is a deferrable timer: it runs on every CPU while that CPU is
# busy (once per recheck_ms) and does not wake an idle CPU. The
# number of checks on each idle CPU over 3 s of guest time is reported, against the
# 30 a 100 ms timer that wakes the CPU would make.
. /tests/lib.sh
period=$(cat $SYSFS/recheck_ms)
line=""
for c in $(cpu_list); do
	b=$(cpu_attr $c checks)
	pmuspin $c $((period * 4)) >/dev/null || fail "pmuspin $c"
	n=$(($(cpu_attr $c checks) - b))
	[ "$n" -ge 3 ] || fail "cpu$c busy for $((period * 4)) ms: only $n checks (period $period ms)"
	line="$line cpu$c=$n"
done
line="busy $((period * 4)) ms:$line; idle 3 s:"
for c in $(cpu_list); do eval "before$c=$(cpu_attr $c checks)"; done
sleep 3
for c in $(cpu_list); do
	eval "b=\$before$c"
	n=$(($(cpu_attr $c checks) - b))
	line="$line cpu$c=$n"
	[ "$n" -lt $((3000 / period * 3 / 4)) ] || fail "cpu$c: $n checks in 3 s idle; a deferrable timer with period $period ms makes fewer than $((3000 / period * 3 / 4))"
done
echo "checks (recheck_ms=$period) $line ($((3000 / period)) if it woke the CPU)"
