# Invalid module parameters make insmod fail with one clear line; nothing stays loaded.
. /tests/lib.sh
ko=/lib/modules/$(uname -r)/extra/simple-pmu.ko
for p in user_access=7 user_access=-1 ring=0 ring=4 ring=x events=0x10000 \
	 events=8,junk events=1,2,3,4,5,6,7 recheck_ms=5 recheck_ms=20000; do
	dmesg -c >/dev/null
	insmod $ko "$p" 2>/dev/null && { rmmod $MOD; fail "insmod accepted $p"; }
	[ -d /sys/module/simple_pmu ] && fail "module left loaded after $p"
	line=$(dmesg | grep 'simple-pmu:' | head -n 1)
	name=${p%%=*}
	echo "$line" | grep -q "$name" || fail "no clear line naming $name for $p: '$line'"
	echo "$p -> ${line#*] }"
done
kernel_log_clean
echo "10 invalid parameters refused, each with a line naming it"
