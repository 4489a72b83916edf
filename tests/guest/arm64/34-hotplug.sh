# A CPU taken offline and back: its events are released and taken again, user
# access goes and comes back, the generation changes, and counts are exact there.
. /tests/lib.sh
cpu=/sys/devices/system/cpu/cpu1/online
[ -f $cpu ] || fail "cpu1 cannot be hotplugged here"
g0=$(cpu_attr 1 generation)
for i in 1 2 3 4 5; do
	echo 0 > $cpu || fail "offline cpu1 ($i)"
	[ "$(cpu_attr 1 cycle_index)" = -1 ] || fail "offline cpu1 publishes cycle_index $(cpu_attr 1 cycle_index)"
	[ "$(cpu_attr 1 event_index)" = -1 ] || fail "offline cpu1 publishes event_index $(cpu_attr 1 event_index)"
	[ "$(cat $SYSFS/cpus)" = 0 ] || fail "cpus $(cat $SYSFS/cpus) with cpu1 offline"
	echo 1 > $cpu || fail "online cpu1 ($i)"
	out=$(pmuread 1) || fail "read on cpu1 after hotplug $i: $out"
done
g1=$(cpu_attr 1 generation)
[ "$g1" != "$g0" ] || fail "cpu1 generation unchanged ($g0) across offline/online"
[ "$(published 1 0)" = 31 ] || fail "cpu1 cycles on $(published 1 0) after hotplug (events leaked?)"
# What the steps before left running on cpu0 (QEMU counts it in cpu1's windows) ends first.
settle
x=$(pmuwin_exact 1) || fail "after: $x"
echo "cpu1 offline/online x5: indices -1 while offline, generation $g0 -> $g1, back on 31/$(published 1 1), reads exact after"
