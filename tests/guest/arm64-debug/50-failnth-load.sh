# Fault injection at load (debug kernel only): the module is loaded with the N-th
# fault-capable call (slab or page allocation) of the loading thread failing, for
# N = 1, 2, ... until a load makes fewer than N such calls (spmu.fail_nth_step=K on the
# command line: N = 1, 1+K, 1+2K, ..., for a shorter run). Every attempt either loads
# (the failure was absorbed) or fails with the syscall's error and leaves nothing: no
# module, no sysfs directory, no device node, at most one simple-pmu line in the log.
# Leaks and warnings are judged after the whole run (kmemleak, the kernel log).
. /tests/lib.sh
fault_setup
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
[ -f "$ko" ] || fail "no $ko"
step=$(sed -n 's/.*spmu\.fail_nth_step=\([0-9]*\).*/\1/p' /proc/cmdline)
step=${step:-1}
[ "$step" -ge 1 ] || fail "spmu.fail_nth_step=$step: 1 or more"
n=1 loaded=0 failed=0 errnos="" tried=0
while :; do
	log_mark
	out=$(failnth $n load "$ko" "$EV") || fail "failnth $n load: $out"
	echo "$out"
	if has "$out" 'rc=0 '; then
		[ -d $SYSFS ] || fail "N=$n: loaded ($out) but no $SYSFS"
		# The loads that work are the sweep's cost (each unload waits for the
		# kobject releases DEBUG_KOBJECT_RELEASE delays): reads are tried once,
		# on the last.
		if has "$out" 'injected=0'; then
			pmuread all >/dev/null || fail "N=$n: loaded ($out) but reads fail"
		fi
		unload || fail "N=$n: rmmod after a load that worked"
		has "$out" 'injected=0' && break
		loaded=$((loaded + 1))
	else
		has "$out" 'injected=1' || fail "N=$n: failed with nothing injected: $out"
		left_nothing "N=$n ($out)"
		e=$(echo "$out" | sed -n 's/.*errno=\([A-Z0-9]*\).*/\1/p')
		has "$errnos" -w "$e" || errnos="$errnos $e"
		failed=$((failed + 1))
		lines=$(log_since | grep 'simple-pmu:')
		[ "$(echo "$lines" | grep -c .)" -le 1 ] || fail "N=$n ($out): more than one line: $lines"
	fi
	tried=$((tried + 1))
	[ $((tried % 25)) -eq 0 ] && progress "load: N=$n ($failed failed so far)"
	n=$((n + step))
done
left_nothing "after the sweep"
# The last load made N - left fault-capable calls: the sweep's whole range.
calls=$((n - $(echo "$out" | sed -n 's/.* left=\([0-9]*\).*/\1/p')))
every=" (all $calls)"
[ "$step" -gt 1 ] && every=" (every ${step}th of $calls)"
echo "fail-nth points exercised: $tried at load$every ($failed failed with${errnos:- nothing}, $loaded loaded despite the failure); load $n, with none injected, loaded"
