# x86 TCG has no PMU: the driver must refuse with ENODEV and one clear line.
. /tests/lib.sh
grep -qw arch_perfmon /proc/cpuinfo && fail "guest CPU has arch_perfmon: this test needs one without"
out=$(modprobe $MOD 2>&1) && fail "modprobe succeeded on a CPU without perfmon"
echo "modprobe: $out"
has "$out" "No such device" || fail "want ENODEV (No such device), got: $out"
msg=$(dmesg | grep 'simple-pmu:' | tail -n 1)
has "$msg" "no architectural perfmon" || fail "no clear simple-pmu: line in dmesg: $msg"
[ -d /sys/module/simple_pmu ] && fail "module is loaded"
[ -e /sys/devices/system/simple-pmu ] && fail "sysfs directory left behind: /sys/devices/system/simple-pmu"
echo "refused: ${msg#*] }"
