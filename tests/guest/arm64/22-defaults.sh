# Defaults: user only (ring=2, a deliberate change from 2011's 3), INST_RETIRED as
# the one event; with nobody else using perf, cycles land on PMCCNTR_EL0 (31) and
# the event on an event counter, on every CPU; every CPU readable.
. /tests/lib.sh
[ "$(cat $SYSFS/user_access)" = 1 ] || fail "user_access $(cat $SYSFS/user_access), want 1"
[ "$(cat $SYSFS/ring)" = 2 ] || fail "ring $(cat $SYSFS/ring), want 2"
[ "$(cat $SYSFS/events)" = 0x8 ] || fail "events $(cat $SYSFS/events), want 0x8"
[ "$(cat $SYSFS/cpus)" = "0-$(($(nproc) - 1))" ] || fail "cpus $(cat $SYSFS/cpus)"
w=$(cat $SYSFS/event_width)
[ "$w" = 64 ] || [ "$w" = 32 ] || fail "event_width $w"
for c in $(cpu_list); do
	[ "$(published $c 0)" = 31 ] || fail "cpu$c cycle_index $(published $c 0), want 31 (PMCCNTR_EL0)"
	e=$(published $c 1)
	[ "$e" -ge 0 ] && [ "$e" -lt "$(cat $SYSFS/num_counters)" ] || fail "cpu$c event_index '$(cpu_attr $c event_index)'"
	[ "$(cpu_attr $c generation)" -gt 0 ] || fail "cpu$c generation $(cpu_attr $c generation)"
done
echo "ring=2 events=0x8 event_width=$w; cpu0: cycle_index=$(published 0 0) event_index=$(cpu_attr 0 event_index)"
