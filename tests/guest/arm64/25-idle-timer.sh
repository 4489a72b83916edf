# The driver's check is a deferrable timer: it runs on every CPU while that CPU is
# busy (once per recheck_ms) and does not wake an idle CPU. An idle Debian guest
# wakes each CPU a few times a second on its own, and a deferrable timer runs at
# those wake-ups, so at the default 100 ms (30 expiries in 3 s) "idle" and "woken"
# are too close to tell apart. The module is reloaded with the shortest period,
# 10 ms, for this test: a timer that woke the CPU would make about 250-300 checks in
# 3 s idle; a deferrable one makes about as many as the CPU's other wake-ups.
. /tests/lib.sh
period=10
irqs() { # CPU: arch timer interrupts so far
	awk -v col=$(($1 + 2)) '/arch_timer/ { n += $col } END { print n + 0 }' /proc/interrupts
}
rmmod $MOD || fail "rmmod"
modprobe $MOD recheck_ms=$period || fail "modprobe recheck_ms=$period"
line=""
for c in $(cpu_list); do
	b=$(cpu_attr $c checks)
	pmuspin $c $((period * 40)) >/dev/null || fail "pmuspin $c"
	n=$(($(cpu_attr $c checks) - b))
	[ "$n" -ge 10 ] || fail "cpu$c busy for $((period * 40)) ms: only $n checks (period $period ms)"
	line="$line cpu$c=$n"
done
line="busy $((period * 40)) ms:$line; idle 3 s:"
# Idle is not quiet on demand: what the tests before left running (kworkers, RCU) can
# keep a CPU's tick going for a while. A CPU busy in one window is measured again, three
# windows at most; each CPU must be quiet in one of them (a timer that wakes the CPU
# makes its 250-300 checks in every window).
limit=$((3000 / period / 4))
for c in $(cpu_list); do eval "quiet$c="; done
for try in 1 2 3; do
	for c in $(cpu_list); do eval "before$c=$(cpu_attr $c checks) irq$c=$(irqs $c)"; done
	sleep 3
	idle=""
	for c in $(cpu_list); do
		eval "b=\$before$c i=\$irq$c"
		n=$(($(cpu_attr $c checks) - b))
		idle="$idle cpu$c=$n (timer interrupts $(($(irqs $c) - i)))"
		[ "$n" -ge $limit ] || eval "quiet$c=$n"
	done
	echo "idle try $try:$idle"
	never=""
	for c in $(cpu_list); do eval "[ -n \"\$quiet$c\" ]" || never="$never cpu$c"; done
	[ -z "$never" ] && break
done
[ -z "$never" ] || fail "at least $limit checks in each of 3 idle windows on$never; a deferrable timer with period $period ms makes far fewer"
line="$line$idle (try $try)"
rmmod $MOD && modprobe $MOD || fail "reload with defaults"
settle
echo "checks (recheck_ms=$period) $line ($((3000 / period)) if it woke the CPU)"
