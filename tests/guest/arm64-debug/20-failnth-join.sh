# Fault injection while a thread is let in (debug kernel only): the JOIN ioctl on
# /dev/simple-pmu runs with the N-th fault-capable call of the thread failing, N = 1,
# 2, ... until a JOIN makes fewer than N such calls. A JOIN either lets the thread in
# (its next read works) or fails with its error and does not (the read faults).
. /tests/lib.sh
fault_setup
modprobe $MOD $EV || fail "modprobe failed: $(dmesg | tail -n 3)"
trap 'unload' EXIT
n=1 failed=0 errnos=""
while :; do
	out=$(failnth $n join /dev/simple-pmu) || fail "failnth $n join: $out"
	if has "$out" 'rc=0 '; then
		has "$out" 'read=ok' || fail "N=$n: JOIN returned 0 but the read faulted: $out"
		has "$out" 'injected=0' && break
	else
		has "$out" 'injected=1' || fail "N=$n: failed with nothing injected: $out"
		has "$out" 'read=sigill' || fail "N=$n: JOIN failed but the thread reads: $out"
		e=$(echo "$out" | sed -n 's/.*errno=\([A-Z0-9]*\).*/\1/p')
		has "$errnos" -w "$e" || errnos="$errnos $e"
		failed=$((failed + 1))
	fi
	[ $((n % 25)) -eq 0 ] && progress "JOIN: N=$n ($failed failed so far)"
	n=$((n + 1))
done
members_reaped "joined thread"
unload || fail "rmmod after the sweep"
trap - EXIT
echo "fail-nth points exercised: $((n - 1)) in JOIN ($failed failed with${errnos:- nothing}); JOIN $n, with none injected, let the thread in"
