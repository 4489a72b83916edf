# CPU hotplug during load and unload (debug kernel only): cpu1 goes offline and online
# in a loop while the module is loaded and unloaded, with a reader on cpu0 (cpu1 comes
# and goes). Each load and unload succeeds; cpu1 went offline during the cycles, more
# than once; the reader read while loaded and faulted while not, and no CPU reads after
# an unload; afterwards cpu1 is online and nothing is left.
. /tests/lib.sh
# Each cycle costs about 15 s on the debug kernel under TCG.
cycles=5
online=/sys/devices/system/cpu/cpu1/online
flip() { # counts each time cpu1 went offline in /tmp/flip.n
	_n=0
	while [ ! -e /tmp/flip.stop ]; do
		echo 0 > $online && _n=$((_n + 1)) && echo $_n > /tmp/flip.n
		echo 1 > $online || { echo "online failed" > /tmp/flip.err; return; }
	done
}
rm -f /tmp/flip.stop /tmp/flip.err /tmp/flip.n
pmuspin 0 600000 > /tmp/hspin.0 &
rd=$!
flip &
fp=$!
trap 'touch /tmp/flip.stop; kill $rd 2>/dev/null; wait $fp; echo 1 > $online' EXIT
i=0
while [ $i -lt $cycles ]; do
	modprobe $MOD $EV || fail "load $i during hotplug failed: $(dmesg | tail -n 3)"
	unload || fail "unload $i during hotplug failed"
	# The reader's faults may all be from before the first load: ask each CPU here.
	has "$(pmuread all)" 'result=ok' && fail "unload $i during hotplug: a CPU still reads: $(pmuread all)"
	i=$((i + 1))
done
touch /tmp/flip.stop
wait $fp
[ -e /tmp/flip.err ] && fail "cpu1 did not come back online during the loop"
offs=$(cat /tmp/flip.n 2>/dev/null)
[ "${offs:-0}" -ge 2 ] || fail "cpu1 went offline ${offs:-0} times during $cycles cycles"
# pmuspin prints only as it ends: still running means it read through every cycle.
[ -s /tmp/hspin.0 ] && fail "the reader on cpu0 ended early: $(cat /tmp/hspin.0)"
kill $rd
wait $rd
r=$(cat /tmp/hspin.0)
has "$r" '^ok=[1-9][0-9]* sigill=[1-9]' || fail "reader on cpu0: '$r' (want reads while loaded, faults while not)"
trap - EXIT
[ "$(cat $online)" = 1 ] || fail "cpu1 offline after the loop"
left_nothing "after $cycles cycles"
echo "$cycles load/unload cycles, cpu1 offline $offs times meanwhile; reader on cpu0: $r"
