# The driver's check is a deferrable timer: it does not wake an idle CPU. The
# number of checks on each (idle) CPU over 5 s of guest time, against the 50 a
# 100 ms timer would make.
. /tests/lib.sh
period=$(cat $SYSFS/recheck_ms)
line=""
for c in $(cpu_list); do eval "before$c=$(cpu_attr $c checks)"; done
sleep 5
for c in $(cpu_list); do
	eval "b=\$before$c"
	n=$(($(cpu_attr $c checks) - b))
	line="$line cpu$c=$n"
	[ "$n" -lt $((5000 / period / 2)) ] || fail "cpu$c: $n checks in 5 s idle; a deferrable timer with period $period ms makes fewer than $((5000 / period / 2))"
done
echo "checks over 5 s idle (recheck_ms=$period, $((5000 / period)) if it woke the CPU):$line"
