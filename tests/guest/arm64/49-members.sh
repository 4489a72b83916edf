# Who reads after a plain load (issue 23): nobody, by loading. A thread reads only once
# let in through /dev/simple-pmu, which only whom the node's group and mode allow can
# open (the kernel makes it root's, 0600; the package's udev rule gives it a group), and
# only while it runs, and for its own program: a raw reader not let in (root or not)
# faults on every CPU; members read, with cycles.h and Python; a non-member is told
# which group would let it in; two members and a non-member sharing cpu1 get exactly
# that; members leave the count when they exit, and an exec()ed program is not let in.
# Loaded with everyone=1, every user's raw reader reads.
. /tests/lib.sh
[ -d $SYSFS ] && { unload || fail "cannot unload the module the tests before left"; }
modprobe $MOD || fail "modprobe failed: $(dmesg | tail -n 3)"
trap 'unload' EXIT
[ "$(cat $SYSFS/access)" = members ] || fail "access is '$(cat $SYSFS/access)' after a plain load"
[ -c /dev/simple-pmu ] || fail "no /dev/simple-pmu after load"
node=$(ls -ln /dev/simple-pmu)
has "$node" '^crw------- .* 0 *0 ' || fail "node not root's 0600: $node"
ncpu=$(nproc)
# cpus lists where members may read (placed, access allowed), members or not running.
[ "$(cat $SYSFS/cpus)" = "0-$((ncpu - 1))" ] || fail "cpus is '$(cat $SYSFS/cpus)'"

sigill_all() { # WHAT OUTPUT: every CPU's line says sigill
	_n=$(echo "$2" | grep -c 'result=sigill')
	[ "$_n" -eq "$ncpu" ] || fail "$1: want SIGILL on all $ncpu CPUs: $2"
}
ok_all() {
	_n=$(echo "$2" | grep -c 'result=ok')
	[ "$_n" -eq "$ncpu" ] || fail "$1: want reads on all $ncpu CPUs: $2"
}

# Raw readers that never ask: root, and uid 65534 (whose join is refused: 0600 root).
sigill_all "root, raw" "$(SPMU_RAW=1 pmuread all)"
sigill_all "uid 65534, not let in" "$(runas 65534 pmuread all)"
# Root lets itself in (pmuread's children each join) and reads everywhere.
ok_all "root, let in" "$(pmuread all)"
# Let in for its own program only: after exec() (and the migration pmuread's pinning
# makes: a context switch) the new program faults.
out=$(taskset -c 0 joinexec env SPMU_RAW=1 pmuread 1) && fail "after exec: $out"
has "$out" 'result=sigill' || fail "after exec, want SIGILL on cpu1: $out"
# On the same CPU with no switch, the next check (recheck_ms) closes it: a raw reader
# exec()ed there reads for a moment at most, then faults.
same=$(taskset -c 1 joinexec env SPMU_RAW=1 pmuspin 1 $((10 * $(cat $SYSFS/recheck_ms))))
has "$same" '^ok=[0-9]* sigill=[1-9]' || fail "after exec on the same CPU, want SIGILL within recheck_ms: $same"

# The reason a non-member gets names the node, its group and mode, and the group that
# would let it in (cycles.h and Python).
out=$(runas 65534 cyclesh reason)
has "$out" '^perfmon=0 reason=.*not let in: /dev/simple-pmu' || fail "cycles.h, non-member: $out"
has "$out" -F "simple-pmu" || fail "cycles.h names no group: $out"
pyout=$(runas 65534 simple-pmu read --scope cpu --json 2>&1) && fail "Python read as non-member: $pyout"
has "$pyout" -F "not let in: /dev/simple-pmu" || fail "Python, non-member: $pyout"
has "$pyout" -F "adduser" || fail "Python names no fix: $pyout"

# The admin's choice, as the package's udev rule makes it: a group may open the node.
G=4242
chgrp $G /dev/simple-pmu && chmod 0660 /dev/simple-pmu || fail "cannot chgrp/chmod the node"
ok_all "uid 65534 in group $G" "$(runas 65534:$G pmuread all)"
out=$(runas 65534:$G cyclesh reason)
has "$out" '^perfmon=[1-9][0-9]* reason=none' || fail "cycles.h, member: $out"
settle
runas 65534:$G python3 /tests/py/spmu_check.py exact > /tmp/members-py.out 2>&1 ||
	fail "Python, member: $(cat /tmp/members-py.out)"
# Still refused without the group.
sigill_all "uid 65534 without group $G" "$(runas 65534 pmuread all)"

# Two members and a non-member take turns on cpu1: the members never fault, the
# non-member never reads (access closes as each member leaves the CPU). They read until
# told to stop: under -icount the shell's own sleeps on cpu0 can last until cpu1 idles.
pmuspin 1 600000 > /tmp/m1.out &
p1=$!
runas 65534:$G pmuspin 1 600000 > /tmp/m2.out &
p2=$!
runas 65534 pmuspin 1 600000 > /tmp/m3.out &
p3=$!
trap 'kill $p1 $p2 $p3 2>/dev/null; unload' EXIT
i=0
until [ "$(cat $SYSFS/members)" -ge 2 ]; do
	i=$((i + 1))
	[ $i -lt 200 ] || fail "members counted $(cat $SYSFS/members) while two ran (10 s)"
	sleep 0.05
done
during=$(cat $SYSFS/members)
sleep 0.5
kill $p1 $p2 $p3
wait $p1 && wait $p2 && wait $p3 || fail "a reader on cpu1 failed"
trap 'unload' EXIT
m1=$(cat /tmp/m1.out) m2=$(cat /tmp/m2.out) m3=$(cat /tmp/m3.out)
for m in "$m1" "$m2"; do
	has "$m" '^ok=[1-9][0-9]* sigill=0$' || fail "member on cpu1: '$m' (others: '$m1' '$m2' '$m3')"
done
has "$m3" '^ok=0 sigill=[1-9]' || fail "non-member on cpu1: '$m3' (members: '$m1' '$m2')"
[ "$during" -ge 2 ] || fail "members counted $during while two ran"
# A member that exits without leaving is reaped after its last switch.
members_reaped member
# everyone=1 (seed-free, unlike 39's article program): raw readers of any user read on
# every CPU, and the load warns, naming the exposure.
unload || fail "rmmod failed"
log_mark
modprobe $MOD everyone=1 || fail "modprobe everyone=1 failed: $(dmesg | tail -n 3)"
[ "$(cat $SYSFS/access)" = everyone ] || fail "access is '$(cat $SYSFS/access)' with everyone=1"
has "$(log_since)" -F "everyone=1: every local user" ||
	fail "no warning naming the exposure at load: $(log_since)"
ok_all "uid 65534, raw, everyone=1" "$(SPMU_RAW=1 runas 65534 pmuread all)"
kernel_log_clean
echo "plain load: raw readers SIGILL on $ncpu CPUs (root and uid 65534), exec drops the grant (same CPU: $same); members read (root, group $G: pmuread, cycles.h, Python exact); cpu1 shared: '$m1' '$m2' members, '$m3' not; $during members counted, 0 after; everyone=1: raw uid 65534 reads on $ncpu CPUs"
