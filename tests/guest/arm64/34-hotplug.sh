# A CPU taken offline and back has the state re-applied (and it is counted).
. /tests/lib.sh
cpu=/sys/devices/system/cpu/cpu1/online
[ -f $cpu ] || fail "cpu1 cannot be hotplugged here"
before=$(interventions 1 hotplug)
echo 0 > $cpu || fail "offline cpu1"
echo 1 > $cpu || fail "online cpu1"
out=$(pmuread 1) || fail "read on cpu1 after hotplug: $out"
after=$(interventions 1 hotplug)
[ "$after" -gt "$before" ] || fail "hotplug interventions on cpu1 $before -> $after"
echo "cpu1 offline/online: $out; hotplug interventions $before -> $after"
