# After load the cycle counter is readable and increasing on every CPU.
. /tests/lib.sh
out=$(pmuread all)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "pmuread all exit $rc"
n=$(echo "$out" | grep -c 'result=ok')
[ "$n" -eq "$(nproc)" ] || fail "readable on $n of $(nproc) CPUs"
echo "readable and increasing on all $n CPUs"
