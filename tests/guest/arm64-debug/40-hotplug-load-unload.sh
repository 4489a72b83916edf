# CPU hotplug during load and unload (debug kernel only): cpu1 goes offline and online
# in a loop while the module is loaded and unloaded, with a reader on each CPU. Each
# load and unload succeeds; afterwards cpu1 is online and nothing is left.
. /tests/lib.sh
# Each cycle costs about 15 s on the debug kernel under TCG.
cycles=5
online=/sys/devices/system/cpu/cpu1/online
flip() {
	while [ ! -e /tmp/flip.stop ]; do
		echo 0 > $online
		echo 1 > $online || { echo "online failed" > /tmp/flip.err; return; }
	done
}
rm -f /tmp/flip.stop /tmp/flip.err
pmuspin 0 600000 > /tmp/hspin.0 &
rd=$!
flip &
fp=$!
trap 'touch /tmp/flip.stop; kill $rd 2>/dev/null; wait $fp; echo 1 > $online' EXIT
i=0
while [ $i -lt $cycles ]; do
	modprobe $MOD $EV || fail "load $i during hotplug failed: $(dmesg | tail -n 3)"
	unload || fail "unload $i during hotplug failed"
	i=$((i + 1))
done
touch /tmp/flip.stop
wait $fp
[ -e /tmp/flip.err ] && fail "cpu1 did not come back online during the loop"
kill $rd
wait $rd
trap - EXIT
[ "$(cat $online)" = 1 ] || fail "cpu1 offline after the loop"
left_nothing "after $cycles cycles"
echo "$cycles load/unload cycles with cpu1 going offline and online throughout"
