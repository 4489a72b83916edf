# Fault injection at load (debug kernel only): the module is loaded with the N-th
# fault-capable call (slab or page allocation) of the loading thread failing, for
# N = 1, 2, ... until a load makes fewer than N such calls. Every attempt either loads
# (the failure was absorbed) or fails with the syscall's error and leaves nothing: no
# module, no sysfs directory, no device node. A failure inside the module's init says
# why in exactly one simple-pmu line; one in the kernel's loader, before any of the
# module's code ran, in none (initcall_debug on the command line tells the two apart:
# "calling  ... [simple_pmu]" is logged only when the loader got that far).
# With spmu.fail_nth_step=K on the command line only N = 1, 1+K, 1+2K, ... are tried,
# and then every point of the module's own init around the first met there: back to
# the loader's last, on to the first the kernel injected after the init had returned
# (failslab's notice, verbose=1, places each injected failure; a __GFP_NOWARN
# allocation's has none). spmu.fail_nth_window=W walks on at most W from there, and
# then back over the last W calls, where the init's failures unwind the most (the debug
# kernel's init has a hundred and more points, 15 s each under TCG).
# Leaks and warnings are judged after the whole run (kmemleak, the kernel log).
. /tests/lib.sh
fault_setup
grep -qw initcall_debug /proc/cmdline || fail "no initcall_debug on the command line: cannot tell the loader's failures from the module's"
for a in failslab fail_page_alloc; do
	echo 1 > $FI/$a/verbose || fail "cannot set $a/verbose"
done
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
[ -f "$ko" ] || fail "no $ko"
step=$(sed -n 's/.*spmu\.fail_nth_step=\([0-9]*\).*/\1/p' /proc/cmdline)
step=${step:-1}
[ "$step" -ge 1 ] || fail "spmu.fail_nth_step=$step: 1 or more"
wmax=$(sed -n 's/.*spmu\.fail_nth_window=\([^ ]*\).*/\1/p' /proc/cmdline)
case $wmax in *[!0-9]*) fail "spmu.fail_nth_window=$wmax: a count of points (0: no bound)" ;; esac
wmax=${wmax:-0}
CALLING='calling  .*\[simple_pmu\]'

# where LOG: where the injected failure's notice came: loader (before the module's
# init was called), init, after (it had returned), or nothing (no notice).
where() {
	echo "$1" | awk '
		index($0, "calling  ") && index($0, "[simple_pmu]") { c = 1 }
		index($0, "initcall ") && index($0, "[simple_pmu] returned") { r = 1 }
		/FAULT_INJECTION: forcing a failure/ { w = r ? "after" : c ? "init" : "loader" }
		END { print w }'
}

# point N: one load with the N-th fault-capable call failing. Sets $out and $class:
# ok (nothing injected: the load is whole), loader or init (it failed there), or
# absorbed-WHERE (it loaded; WHERE as where() says, "unseen" for no notice).
tried=" " classes=" " loaded=0 failed=0 in_init=0 errnos=""
point() {
	log_mark
	out=$(failnth "$1" load "$ko" "$EV") || fail "failnth $1 load: $out"
	echo "$out"
	log=$(log_since)
	w=$(where "$log")
	if has "$out" 'rc=0 '; then
		[ -d $SYSFS ] || fail "N=$1: loaded ($out) but no $SYSFS"
		has "$log" "$CALLING" || fail "N=$1: loaded but initcall_debug logged no 'calling ... [simple_pmu]': the classes below would be wrong"
		# A failure absorbed must not leave a CPU or the node half made.
		pmuread all >/dev/null || fail "N=$1: loaded ($out) but reads fail"
		unload || fail "N=$1: rmmod after a load that worked"
		if has "$out" 'injected=0'; then
			class=ok
		else
			class=absorbed-${w:-unseen}
			loaded=$((loaded + 1))
		fi
	else
		has "$out" 'injected=1' || fail "N=$1: failed with nothing injected: $out"
		left_nothing "N=$1 ($out)"
		e=$(echo "$out" | sed -n 's/.*errno=\([A-Z0-9]*\).*/\1/p')
		has "$errnos" -w "$e" || errnos="$errnos $e"
		failed=$((failed + 1))
		lines=$(echo "$log" | grep 'simple-pmu: ')
		got=$(echo "$lines" | grep -c .)
		if has "$log" "$CALLING"; then
			class=init
			in_init=$((in_init + 1))
			[ "$got" -eq 1 ] || fail "N=$1 ($out): the module's init failed with $got simple-pmu lines, not one: $lines"
		else
			class=loader
			[ "$got" -eq 0 ] || fail "N=$1 ($out): the loader failed before the module ran, yet: $lines"
		fi
	fi
	tried="$tried$1 "
	classes="$classes$1:$class "
	[ $(($(echo $tried | wc -w) % 25)) -eq 0 ] && progress "load: N=$1 ($failed failed so far)"
	true
}

n=1
while :; do
	point $n
	[ "$class" = ok ] && break
	n=$((n + step))
done
# The last load made N - left fault-capable calls: the sweep's whole range.
calls=$((n - $(echo "$out" | sed -n 's/.* left=\([0-9]*\).*/\1/p')))

window=""
if [ "$step" -gt 1 ]; then
	inits=$(echo $classes | tr ' ' '\n' | sed -n 's/:init$//p; s/:absorbed-init$//p')
	[ -n "$inits" ] || fail "every ${step}th of $calls points met none in the module's init: try a smaller spmu.fail_nth_step"
	first=$(echo "$inits" | head -n 1)
	known() {
		case "$classes" in
		*" $1:"*) class=$(echo $classes | tr ' ' '\n' | sed -n "s/^$1://p") ;;
		*) point $1 ;;
		esac
	}
	# Back to the loader's last: at most step - 1 points, the stride's were tried.
	from=$first k=$((first - 1))
	while [ $k -ge 1 ]; do
		known $k
		from=$k
		case $class in loader | absorbed-loader) break ;; esac
		k=$((k - 1))
	done
	# Every point from the first met in the init on, until one after it (or W on):
	# the init's own points between the stride's are not skipped.
	to=$first k=$((first + 1)) reach="cut $wmax after it"
	while [ "$wmax" -eq 0 ] || [ $((k - first)) -le "$wmax" ]; do
		known $k
		to=$k
		case $class in ok | absorbed-after) reach="on to the first after it" && break ;; esac
		k=$((k + 1))
	done
	if [ "$wmax" -eq 0 ]; then
		window=", and every one from $from to $to around the module's init"
	else
		window=", and every one from $from to $to around $first, the first met in the module's init ($reach)"
		# The last W calls, down to one tried already or the loader's.
		tail=$((calls + 1)) k=$calls
		while [ $k -ge 1 ] && [ $((calls - k)) -lt "$wmax" ]; do
			case "$classes" in *" $k:"*) break ;; esac
			point $k
			tail=$k
			case $class in loader | absorbed-loader) break ;; esac
			k=$((k - 1))
		done
		[ $tail -le $calls ] && window="$window, and every one from $tail to $calls, the last"
	fi
fi
left_nothing "after the sweep"
count() {
	echo $classes | tr ' ' '\n' | grep -c ":$1\$"
}
every="all $calls"
[ "$step" -gt 1 ] && every="every ${step}th of $calls$window"
echo "fail-nth points exercised: $(($(echo $tried | wc -w) - 1)) at load ($every): $failed failed with${errnos:- nothing} ($in_init in the module's init, each with one simple-pmu line; $((failed - in_init)) in the kernel's loader, with none); $loaded loaded despite the failure (by failslab's notice: $(count absorbed-loader) in the loader, $(count absorbed-init) in the init, $(count absorbed-after) after it, $(count absorbed-unseen) unseen)"
