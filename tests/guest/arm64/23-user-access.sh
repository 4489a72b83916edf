# user_access=0 closes EL0 access on every CPU (the driver's own revoke, whatever
# perf does) and 1 opens it again; neither touches the counters' placement.
. /tests/lib.sh
g=$(cat $SYSFS/generation)
echo 0 > $SYSFS/user_access || fail "writing 0"
out=$(pmuread all)
[ "$(echo "$out" | grep -c 'result=sigill')" -eq "$(nproc)" ] || fail "user_access=0 but: $out"
[ -z "$(cat $SYSFS/cpus)" ] || fail "cpus '$(cat $SYSFS/cpus)' with access closed"
[ "$(cat $SYSFS/cpu*/user_access | sort -u)" = 0 ] || fail "cpuN/user_access not all 0 with access closed"
echo 1 > $SYSFS/user_access || fail "writing 1"
pmuread all >/dev/null || fail "user_access=1 but: $(pmuread all)"
[ "$(cat $SYSFS/cpu*/user_access | sort -u)" = 1 ] || fail "cpuN/user_access not all 1 with access open"
[ "$(cat $SYSFS/generation)" = "$g" ] || fail "generation moved: placement is not user_access's business"
echo "user_access 0: SIGILL on all $(nproc) CPUs; 1: readable again; placement untouched"
