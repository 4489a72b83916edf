. /tests/lib.sh
rmmod $MOD || fail "rmmod failed"
[ -d $SYSFS ] && fail "$SYSFS still present after unload"
[ -d /sys/devices/system/simple-pmu ] && fail "subsystem directory still present"
echo "unloaded; sysfs gone"
