. /tests/lib.sh
n=$(cat $SYSFS/num_counters)
[ "$(cat $SYSFS/user_access)" = 1 ] || fail "user_access $(cat $SYSFS/user_access), want 1"
[ "$(cat $SYSFS/ring)" = 3 ] || fail "ring $(cat $SYSFS/ring), want 3"
idx=$(event_index 0x0008) || fail "no INST_RETIRED in event_counters: $(cat $SYSFS/event_counters)"
[ "$idx" -eq $((n - 1)) ] || fail "instructions in counter $idx, want the top one ($((n - 1)))"
echo "user_access=1 ring=3 events=$(cat $SYSFS/events) event_counters=$(cat $SYSFS/event_counters)"
