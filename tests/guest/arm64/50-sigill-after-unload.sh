# Unload restores the previous state: user access is off again everywhere.
. /tests/lib.sh
out=$(pmuread all)
echo "$out"
n=$(echo "$out" | grep -c 'result=sigill')
[ "$n" -eq "$(nproc)" ] || fail "expected SIGILL on all $(nproc) CPUs after unload, got $n"
echo "SIGILL again on all $n CPUs"
