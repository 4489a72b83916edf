# rmmod while a Python process uses the driver: its next probe reports the module gone
# and the process lives on (measure() falls back to another backend).
. /tests/lib.sh
modprobe $MOD || fail "modprobe failed"
python3 /tests/py/spmu_check.py unload-alive || exit 1
[ -d /sys/module/simple_pmu ] && fail "module still loaded"
exit 0
