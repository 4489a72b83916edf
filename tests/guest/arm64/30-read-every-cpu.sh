# After load the cycle counter is readable and increasing on every CPU.
. /tests/lib.sh
# The Python checks before this one read through perf (thread scope, the default), and
# perf withdraws user access on those CPUs; the module grants it again at its next
# check, which an idle CPU defers: raw reads come after that (seen on sid: cpu1 SIGILL).
settle
out=$(pmuread all)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "pmuread all exit $rc"
n=$(echo "$out" | grep -c 'result=ok')
[ "$n" -eq "$(nproc)" ] || fail "readable on $n of $(nproc) CPUs"
echo "readable and increasing on all $n CPUs"
