# Fault injection in each writable attribute's store (debug kernel only): a valid new
# value is written with the N-th fault-capable call of the writer failing, N = 1, 2, ...
# until a write makes fewer than N such calls. A write either takes effect or fails
# with its error and changes nothing the attribute shows; after each, the old value
# is written back and every CPU reads. Leaks and warnings are judged after the run.
# The events a ring or events write creates again are made by each CPU's hotplug
# thread, not the writer: 30-failnth-cpuhp fails one there.
. /tests/lib.sh
fault_setup
modprobe $MOD $EV || fail "modprobe failed: $(dmesg | tail -n 3)"
trap 'unload' EXIT
total=0
summary=""
sweep() { # ATTR NEW: the sweep for one attribute, from its current value to NEW
	attr=$1 new=$2
	old=$(cat $SYSFS/$attr)
	[ "$old" != "$new" ] || fail "$attr is '$new' already: the sweep would prove nothing"
	n=1 failed=0
	while :; do
		out=$(failnth $n write $SYSFS/$attr "$new") || fail "failnth $n write $attr: $out"
		echo "$attr: $out"
		now=$(cat $SYSFS/$attr)
		if has "$out" 'rc=-1 '; then
			has "$out" 'injected=1' || fail "$attr N=$n: failed with nothing injected: $out"
			[ "$now" = "$old" ] || fail "$attr N=$n: failed ($out) but shows '$now', not '$old'"
			failed=$((failed + 1))
		else
			[ "$now" = "$new" ] || fail "$attr N=$n: took ($out) but shows '$now', not '$new'"
			has "$out" 'injected=0' && break
		fi
		echo "$old" > $SYSFS/$attr || fail "$attr: writing back '$old' after N=$n ($out)"
		pmuread all >/dev/null || fail "$attr N=$n ($out): reads broken after '$old' written back"
		[ $((n % 25)) -eq 0 ] && progress "$attr: N=$n ($failed failed so far)"
		n=$((n + 1))
	done
	echo "$old" > $SYSFS/$attr || fail "$attr: writing back '$old' after the sweep"
	total=$((total + n - 1))
	summary="$summary $attr $((n - 1)) ($failed failed)"
}
sweep user_access 0
sweep ring 3
sweep events none
pmuread all >/dev/null || fail "reads broken after the sweeps"
unload || fail "rmmod after the sweeps"
trap - EXIT
echo "fail-nth points exercised: $total in stores:$summary"
