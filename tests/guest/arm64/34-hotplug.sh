# A CPU taken offline and back: its events are released and taken again, user
# access goes and comes back, the generation changes, and counts are exact there.
. /tests/lib.sh
cpu=/sys/devices/system/cpu/cpu1/online
[ -f $cpu ] || fail "cpu1 cannot be hotplugged here"
g0=$(cpu_attr 1 generation)
echo 0 > $cpu || fail "offline cpu1"
[ "$(cpu_attr 1 cycle_index)" = -1 ] || fail "offline cpu1 publishes cycle_index $(cpu_attr 1 cycle_index)"
[ "$(cat $SYSFS/cpus)" = 0 ] || fail "cpus $(cat $SYSFS/cpus) with cpu1 offline"
echo 1 > $cpu || fail "online cpu1"
out=$(pmuread 1) || fail "read on cpu1 after hotplug: $out"
g1=$(cpu_attr 1 generation)
[ "$g1" != "$g0" ] || fail "cpu1 generation unchanged ($g0) across offline/online"
x=$(pmuwin_exact 1) || fail "after: $x"
echo "cpu1 offline/online: cycle_index -1 while offline, generation $g0 -> $g1, reads exact after"
