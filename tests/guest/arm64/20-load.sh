. /tests/lib.sh
modprobe $MOD || fail "modprobe $MOD failed: $(dmesg | tail -n 3)"
[ -d $SYSFS ] || fail "$SYSFS missing after load"
ua=$(cat $SYSFS/user_access)
[ "$ua" = 1 ] || fail "user_access is $ua, want 1 (read-only: PMUSERENR = CR|ER)"
knobs_unchanged "loading changed a machine-wide setting"
echo "loaded; user_access=$ua pmu_version=$(cat $SYSFS/pmu_version) num_counters=$(cat $SYSFS/num_counters) cpus=$(cat $SYSFS/cpus)"
