# Unload restores the previous state: user access is off again everywhere.
. /tests/lib.sh
out=$(pmuread all)
echo "$out"
n=$(echo "$out" | grep -c 'result=sigill')
[ "$n" -eq "$(nproc)" ] || fail "expected SIGILL on all $(nproc) CPUs after unload, got $n"
# Every load, unload, sysfs write and test before left them as they were.
knobs_unchanged "after the tests and the last unload"
echo "SIGILL again on all $n CPUs; $(echo $(knobs)) as before the first load"
