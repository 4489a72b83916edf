# ring is proven: a getppid() inside the window adds exactly its two EL0
# instructions with ring=2 and the kernel's work too with ring=3. Event identity:
# a window holding a 20 ms sleep counts 20 ms of cycles (QEMU: 1 GHz) with ring=3,
# far above its instructions; with ring=2 neither counts the sleep. ring=1 counts no
# user instructions; a ring write takes new events on every CPU (new generations).
. /tests/lib.sh
trap 'echo 2 > $SYSFS/ring' EXIT
diff_of() {
	_d=$(alone 's/^plain=\([0-9]*\) syscall=\([0-9]*\)/\2-\1/p' pmuwin syscall 1 5) || { echo "$_d"; return 1; }
	for e in $_d; do echo $((e)); done
}
exact_batch "ring=2 syscall" 2 5 diff_of
gens() { for c in $(cpu_list); do cpu_attr $c generation; done; }
g0=$(gens)
echo 3 > $SYSFS/ring || fail "cannot set ring=3"
for a in $g0; do for b in $(gens); do [ "$a" != "$b" ] || fail "a CPU's generation $a survived the ring write"; done; done
d=$(diff_of) || fail "pmuwin syscall: $d"
d=$(echo "$d" | sort -n | head -n 1)
[ "$d" -gt 50 ] || fail "ring=3: a syscall adds only $d instructions"
s3=$(pmuwin sleep 1 20) || fail "pmuwin sleep: $s3"
c3=$(echo "$s3" | sed 's/cycles=\([0-9]*\).*/\1/'); i3=$(echo "$s3" | sed 's/.*insns=//')
[ "$c3" -gt 15000000 ] && [ "$c3" -gt $((10 * i3)) ] || fail "ring=3, 20 ms sleep: $s3"
# ring=1: the user-space loop is not counted at all (the least of three windows: a
# timer interrupt inside one would count its kernel instructions).
echo 1 > $SYSFS/ring || fail "cannot set ring=1"
k=$(alone 's/^n=101000 insns=\([0-9]*\).*/\1/p' pmuwin exact 1 3) || fail "pmuwin exact: $k"
k=$(echo "$k" | sort -n | head -n 1)
[ -n "$k" ] && [ "$k" -lt 100 ] || fail "ring=1 counted '$k' instructions of a 202000-instruction user loop"
echo 2 > $SYSFS/ring
s2=$(pmuwin sleep 1 20) || fail "pmuwin sleep: $s2"
c2=$(echo "$s2" | sed 's/cycles=\([0-9]*\).*/\1/')
[ "$c2" -lt 100000 ] || fail "ring=2, 20 ms sleep counted: $s2"
echo "syscall: +2 (ring=2), +$d (ring=3); user loop under ring=1: $k; 20 ms sleep: $s3 (ring=3), $s2 (ring=2)"
