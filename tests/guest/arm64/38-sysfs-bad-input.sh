# Every writable attribute refuses bad input, keeps its value, and logs nothing bad;
# non-root writes are refused.
. /tests/lib.sh
long=$(printf '%0100d' 1)
check() { # attr value...
	attr=$1; shift
	old=$(cat $SYSFS/$attr)
	for v in "$@"; do
		printf '%s' "$v" > $SYSFS/$attr 2>/dev/null && fail "$attr accepted '$v'"
		[ "$(cat $SYSFS/$attr)" = "$old" ] || fail "$attr changed after '$v'"
	done
	runas 65534 sh -c "echo $old > $SYSFS/$attr" 2>/dev/null && fail "non-root wrote $attr"
	[ "$(cat $SYSFS/$attr)" = "$old" ] || fail "$attr changed after a non-root write"
}
check user_access x 3 -1 "1x" " 1" 99999999999999999999 "$long"
check ring 0 4 -1 x "3 3" "$long"
check events 0x10000 -1 zz 8,, 1,2,3,4,5,6,7 "$long"
for attr in user_access ring events; do
	old=$(cat $SYSFS/$attr)
	echo "$old" > $SYSFS/$attr || fail "$attr rejects its own value '$old'"
done
pmuread all >/dev/null || fail "reads broken after bad writes"
kernel_log_clean
echo "user_access, ring, events: bad writes refused, values kept, non-root refused"
