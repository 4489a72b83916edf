# ring is proven: a getppid() inside the window adds exactly its two EL0
# instructions with ring=2 and the kernel's work too with ring=3. Event identity:
# a window holding a 20 ms sleep counts 20 ms of cycles (QEMU: 1 GHz) with ring=3,
# far above its instructions; with ring=2 neither counts the sleep.
. /tests/lib.sh
trap 'echo 2 > $SYSFS/ring' EXIT
diff_of() { pmuwin syscall 1 5 | sed -n 's/^plain=\([0-9]*\) syscall=\([0-9]*\)/\2 - \1/p' | while read -r e; do echo $(($e)); done; }
exact_batch "ring=2 syscall" 2 diff_of
echo 3 > $SYSFS/ring || fail "cannot set ring=3"
d=$(diff_of | sort -n | head -n 1)
[ "$d" -gt 50 ] || fail "ring=3: a syscall adds only $d instructions"
s3=$(pmuwin sleep 1 20) || fail "pmuwin sleep: $s3"
c3=$(echo "$s3" | sed 's/cycles=\([0-9]*\).*/\1/'); i3=$(echo "$s3" | sed 's/.*insns=//')
[ "$c3" -gt 15000000 ] && [ "$c3" -gt $((10 * i3)) ] || fail "ring=3, 20 ms sleep: $s3"
echo 2 > $SYSFS/ring
s2=$(pmuwin sleep 1 20) || fail "pmuwin sleep: $s2"
c2=$(echo "$s2" | sed 's/cycles=\([0-9]*\).*/\1/')
[ "$c2" -lt 100000 ] || fail "ring=2, 20 ms sleep counted: $s2"
echo "syscall: +2 (ring=2), +$d (ring=3); 20 ms sleep: $s3 (ring=3), $s2 (ring=2)"
