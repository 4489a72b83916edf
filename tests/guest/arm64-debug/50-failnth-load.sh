# Fault injection at load (debug kernel only): the module is loaded with the N-th
# fault-capable call (slab or page allocation) of the loading thread failing, for
# N = 1, 2, ... until a load makes fewer than N such calls (spmu.fail_nth_step=K on the
# command line: N = 1, 1+K, 1+2K, ..., for a shorter run). Every attempt either loads
# (the failure was absorbed) or fails with the syscall's error and leaves nothing: no
# module, no sysfs directory, no device node. A failure inside the module's init says
# why in exactly one simple-pmu line; one in the kernel's loader, before any of the
# module's code ran, in none (initcall_debug on the command line tells the two apart:
# "calling  ... [simple_pmu]" is logged only when the loader got that far).
# Leaks and warnings are judged after the whole run (kmemleak, the kernel log).
. /tests/lib.sh
fault_setup
grep -qw initcall_debug /proc/cmdline || fail "no initcall_debug on the command line: cannot tell the loader's failures from the module's"
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
[ -f "$ko" ] || fail "no $ko"
step=$(sed -n 's/.*spmu\.fail_nth_step=\([0-9]*\).*/\1/p' /proc/cmdline)
step=${step:-1}
[ "$step" -ge 1 ] || fail "spmu.fail_nth_step=$step: 1 or more"
n=1 loaded=0 failed=0 errnos="" tried=0 in_init=0
while :; do
	log_mark
	out=$(failnth $n load "$ko" "$EV") || fail "failnth $n load: $out"
	echo "$out"
	log=$(log_since)
	if has "$out" 'rc=0 '; then
		[ -d $SYSFS ] || fail "N=$n: loaded ($out) but no $SYSFS"
		has "$log" 'calling  .*\[simple_pmu\]' || fail "N=$n: loaded but initcall_debug logged no 'calling ... [simple_pmu]': the count below would be wrong"
		# A failure absorbed must not leave a CPU or the node half made.
		pmuread all >/dev/null || fail "N=$n: loaded ($out) but reads fail"
		unload || fail "N=$n: rmmod after a load that worked"
		has "$out" 'injected=0' && break
		loaded=$((loaded + 1))
	else
		has "$out" 'injected=1' || fail "N=$n: failed with nothing injected: $out"
		left_nothing "N=$n ($out)"
		e=$(echo "$out" | sed -n 's/.*errno=\([A-Z0-9]*\).*/\1/p')
		has "$errnos" -w "$e" || errnos="$errnos $e"
		failed=$((failed + 1))
		lines=$(echo "$log" | grep 'simple-pmu:')
		got=$(echo "$lines" | grep -c .)
		if has "$log" 'calling  .*\[simple_pmu\]'; then
			in_init=$((in_init + 1))
			[ "$got" -eq 1 ] || fail "N=$n ($out): the module's init failed with $got simple-pmu lines, not one: $lines"
		else
			[ "$got" -eq 0 ] || fail "N=$n ($out): the loader failed before the module ran, yet: $lines"
		fi
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
echo "fail-nth points exercised: $tried at load$every ($failed failed with${errnos:- nothing}: $in_init in the module's init, each with one line, $((failed - in_init)) in the kernel's loader; $loaded loaded despite the failure); load $n, with none injected, loaded"
