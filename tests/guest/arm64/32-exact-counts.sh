# With -icount shift=0 the instructions counter gives exactly the loop's
# instruction count as derived from the binary (tests/data/pmuloop.env), on every
# CPU, through the counter each CPU publishes (selected with PMSELR_EL0 as an EL0
# program may); and through the direct reads of pmuwin, 2n plus a constant.
# ring=2 (the default): interrupts inside a window add nothing.
. /tests/lib.sh
. /tests/data/pmuloop.env
[ "$(cat $SYSFS/ring)" = 2 ] || fail "ring $(cat $SYSFS/ring), want 2"
insns_of() { alone 's/^insns=\([0-9]*\) .*/\1/p' pmuloop "$@"; }
for c in $(cpu_list); do
	idx=$(published $c 1)
	for n in 1000 100000; do
		exact_batch "cpu$c PMSELR n=$n" $((STRAIGHT + BODY * n + TAIL)) 5 insns_of $c "$idx" $n 5
	done
	pmuwin_exact $c
done
echo "exact on all $(nproc) CPUs: $((STRAIGHT + BODY * 100000 + TAIL)) for n=100000 (from the binary), through PMSELR and through direct reads"
