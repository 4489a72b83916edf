# Stages of `invoke test-package` (pmubuild/debian/pkgtest.py puts the variables first):
# run by sh -e as root in a throw-away overlay of a minimal Debian chroot.
#   DEBS NEXT OUT        the .debs, the newer version's .debs (empty: no upgrade), results
#   VERSION NEXT_VERSION their upstream (= DKMS module) versions
#   KPKG KREL K2PKG K2REL KVERSION  the kernel the harness boots and a second flavour
#   MACH FULL SOURCES    uname -m; non-empty: every stage (else install, header, purge)
#   OMIT                 stages of a FULL run not run on this suite (pkgtest.OMIT)
#   TCYC_SKIP            why $OUT/tcyc.c is absent (the seed documents are not there)
# Each stage ends with "PASS: stage: detail" or stops with "FAIL: stage: why"; a check
# that needs what is not there ends with "SKIP: stage: why" and the stages go on.

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; } # a check that cannot run here: the stages go on
runs() { # STAGE: whether this run has it (FULL, and not in OMIT)
	case " $OMIT " in *" $1 "*) return 1 ;; esac
	[ -n "$FULL" ]
}

# apt-get, its whole output kept in /tmp/apt.log and the lines that matter shown; the
# exit status is apt's (dash has no pipefail, so no pipe). Without Recommends: the
# packages' Depends alone must be enough (dkms recommends kernel headers of its own).
run_apt() {
	rc=0
	apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "$@" > /tmp/apt.log 2>&1 || rc=$?
	grep -v -e '^Get:' -e '^Selecting' -e '^Preparing' -e '^Unpacking' -e '^Setting up' \
		-e '^Processing triggers' -e '^(Reading database' -e '^update-alternatives' \
		-e '^Fetched' -e '^Need to get' -e '^After this' -e '^debconf' /tmp/apt.log || true
	return $rc
}

# Every file of ours anywhere in the chroot (dpkg's own or made by a maintainer script,
# /run and /var/lib included); not the test's own /srv, /tmp, or the bind-mounted
# directories (other filesystems: -xdev). What matched before the first install is not
# ours: a bind mount's mount point (a checkout cloned as .../simple-pmu) is.
ours() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /srv -o -path /tmp \) \
		-prune -o \( -name '*simple-pmu*' -o -name '*simple_pmu*' \) -print > /tmp/ours.raw &&
		sort /tmp/ours.raw
}
leftovers() {
	ours > /tmp/ours.now || return 1
	comm -13 /tmp/ours.before /tmp/ours.now
}

no_dkms_entry() { # STAGE
	dkms status > /tmp/status 2>&1 || { cat /tmp/status; fail "$1: dkms status failed"; }
	! grep -q simple-pmu /tmp/status || { cat /tmp/status; fail "$1: dkms still lists it"; }
}

installed_for() { # VERSION KREL: dkms status says installed
	dkms status > /tmp/status 2>&1 || true
	grep -q "^simple-pmu/$1, $2, $MACH: installed" /tmp/status
}

# KREL STAGE: sets $ko to the module installed for KREL, after checking DKMS signed it.
# Called directly, never in $(...): its fail must end this shell, not a subshell.
signed_module() {
	ko=$(find /lib/modules/"$1" -name 'simple-pmu.ko*')
	[ -n "$ko" ] || fail "$2: no simple-pmu.ko* under /lib/modules/$1"
	[ "$(echo "$ko" | wc -l)" = 1 ] || fail "$2: more than one module for $1: $ko"
	_signer=$(modinfo -F signer "$ko")
	[ "$_signer" = "DKMS module signing key" ] || fail "$2: $ko signer '$_signer'"
}

dkms_log() { # VERSION: DKMS's make.log of the last build, without kbuild's per-file lines
	_log=$(ls -t $(find /var/lib/dkms/simple-pmu/"$1" -name make.log) | head -n1)
	grep -v -e '^  CC' -e '^  LD' -e '^  MODPOST' -e '^  BTF' "$_log" || true
}

# STAGE [GID]: sets $gid to the group simple-pmu's (the postinst's, README.Debian), after
# checking it is a system group (adduser.conf's default range 100-999) and, given GID,
# that it is still that one (a reinstall, upgrade, remove or purge keeps it).
# Called directly, never in $(...), as signed_module.
group_gid() {
	_grp=$(getent group simple-pmu) || fail "$1: no group simple-pmu"
	gid=$(echo "$_grp" | cut -d: -f3)
	{ [ "$gid" -ge 100 ] && [ "$gid" -le 999 ]; } 2> /dev/null || fail "$1: group simple-pmu has gid $gid, not a system gid (100-999)"
	[ -z "${2:-}" ] || [ "$gid" = "$2" ] || fail "$1: group simple-pmu's gid was $2, is now $gid"
	# A group deleted and made again gets the same gid back, but not its members.
	[ -z "${member:-}" ] || echo ",$(echo "$_grp" | cut -d: -f4)," | grep -qF ",$member," ||
		fail "$1: group simple-pmu lost its member $member (deleted and made again?): $_grp"
}
# The device node's line of the udev rule, as README.Debian documents it.
DEV_RULE='KERNEL=="simple-pmu", SUBSYSTEM=="misc", GROUP="simple-pmu", MODE="0660"'

# --- setup: the suite's archive and security updates (where the harness's kernel may
# come from), the local repository, and the headers of the kernel the harness boots.
ours > /tmp/ours.before || fail "setup: find failed"
printf '%s' "$SOURCES" > /etc/apt/sources.list
# trixie's and sid's headers pull in the kernel image: no initramfs is ever booted from
# this chroot, and generating one per kernel is most of the CPU such an install costs.
dpkg-divert --local --rename --add /usr/sbin/update-initramfs > /dev/null
ln -sf /bin/true /usr/sbin/update-initramfs
mkdir -p /srv/repo
cp "$DEBS"/*.deb /srv/repo/
(cd /srv/repo && apt-ftparchive packages . > Packages)
echo 'deb [trusted=yes] file:/srv/repo ./' > /etc/apt/sources.list.d/localrepo.list
apt-get update -q > /tmp/update.log 2>&1 || { cat /tmp/update.log; fail "setup: apt-get update"; }
pass "setup: local repository with $(cd /srv/repo && ls *.deb | tr '\n' ' ')"

# --- no-headers: a machine running $KREL without its headers. `apt install
# simple-pmu-dkms` succeeds, builds nothing, and names the package to install; installing
# it then builds the module for that kernel (DKMS's header_postinst.d hook). The chroot
# "runs" $KREL: uname -r says so (a diverted uname, undone afterwards: the later stages
# run as a chroot whose host kernel is not here, as before) and /lib/modules/$KREL exists
# (what dkms and the postinst look at; the image itself is not installed: on bookworm its
# /boot/config would change which kernels dkms's postinst picks in the later stages).
# Else (emulated arm64, or omitted): the headers are simply installed.
if runs no-headers; then
	[ "$KPKG" = "linux-headers-$KREL" ] || fail "no-headers: $KPKG is not linux-headers-$KREL"
	uname=$(dpkg-query -L coreutils | grep '/bin/uname$' | head -n1)
	dpkg-divert --local --rename --divert "$uname.pkgtest" --add "$uname" > /dev/null
	printf '#!/bin/sh\n[ "$*" != -r ] || exec echo %s\nexec %s.pkgtest "$@"\n' "$KREL" "$uname" > "$uname"
	chmod 755 "$uname"
	[ "$(uname -r)" = "$KREL" ] || fail "no-headers: uname -r says $(uname -r), not $KREL"
	[ ! -e "/lib/modules/$KREL" ] || fail "no-headers: /lib/modules/$KREL exists already"
	mkdir -p "/lib/modules/$KREL"
	echo "--- apt-get install simple-pmu-dkms (no kernel headers installed)"
	run_apt install simple-pmu-dkms || fail "no-headers: apt-get install simple-pmu-dkms exited $rc"
	msg=$(grep -F "apt install linux-headers-$KREL" /tmp/apt.log) ||
		fail "no-headers: apt's output does not name linux-headers-$KREL"
	group_gid no-headers
	first_gid=$gid
	[ -z "$(find /lib/modules -name 'simple-pmu.ko*')" ] || fail "no-headers: a module was installed"
	echo "--- apt-get install $KPKG: the package the message named"
	run_apt install "$KPKG=$KVERSION" || fail "no-headers: apt-get install $KPKG=$KVERSION exited $rc"
	installed_for "$VERSION" "$KREL" ||
		{ cat /tmp/status; fail "no-headers: installing $KPKG did not build the module for $KREL"; }
	signed_module "$KREL" no-headers
	run_apt purge simple-pmu-dkms || fail "no-headers: purge exited $rc"
	[ -z "$(find /lib/modules -name 'simple-pmu.ko*')" ] || fail "no-headers: a module is left after purge"
	no_dkms_entry no-headers
	group_gid no-headers "$first_gid"
	rm -f "$uname"
	dpkg-divert --local --rename --remove "$uname" > /dev/null
	[ "$(uname -r)" != "$KREL" ] || fail "no-headers: uname is still diverted"
	pass "no-headers: apt install simple-pmu-dkms without headers for the running $KREL built nothing and said:$(echo "$msg" | sed 's/^simple-pmu-dkms://') -- installing it built and signed $ko"
else
	run_apt install "$KPKG=$KVERSION" || fail "setup: apt-get install $KPKG=$KVERSION exited $rc"
fi

# --- install: literally, from the repository; DKMS builds, verifies, signs, installs.
echo "--- apt-get install simple-pmu-dkms"
run_apt install simple-pmu-dkms || fail "install: apt-get install simple-pmu-dkms exited $rc"
echo "--- DKMS's make.log"
dkms_log "$VERSION" | tee /tmp/make.log
grep -q "^HAVE_[A-Z0-9_]* *yes " /tmp/make.log || fail "install: no compat.py table in make.log"
grep -q "against $KREL" /tmp/make.log || fail "install: modverify's report for $KREL missing"
installed_for "$VERSION" "$KREL" || { cat /tmp/status; fail "install: dkms status: not installed for $KREL"; }
signed_module "$KREL" install
[ -e /usr/lib/udev/rules.d/60-simple-pmu-dkms.rules ] || fail "install: no udev rule"
[ -x /usr/libexec/simple-pmu/simple-pmu-rdpmc ] || fail "install: udev helper not executable"
grep -qxF "$DEV_RULE" /usr/lib/udev/rules.d/60-simple-pmu-dkms.rules ||
	fail "install: the udev rule has no line '$DEV_RULE'"
# Made by this install, or (after no-headers) found and kept; members: nobody.
group_gid install "${first_gid:-}"
[ -z "$(echo "$_grp" | cut -d: -f4)" ] || fail "install: the group simple-pmu has members: $_grp"
# The admin lets a user in; every later stage must keep the group, with that member.
adduser --quiet nobody simple-pmu || fail "install: adduser nobody simple-pmu failed"
member=nobody
# The admin's machine-wide choices: none made by the package (issue 23).
grep -qx 'RDPMC_ALWAYS=no' /etc/default/simple-pmu ||
	fail "install: /etc/default/simple-pmu missing or not RDPMC_ALWAYS=no"
dpkg-query -W -f '${Conffiles}\n' simple-pmu-dkms | grep -q ' /etc/default/simple-pmu ' ||
	fail "install: /etc/default/simple-pmu is not a conffile of simple-pmu-dkms"
cp "$ko" "$OUT/"
pass "install: compat.h rendered, built, verified, signed by DKMS, installed: $ko; system group simple-pmu (gid $gid, no members) for the udev rule's /dev/simple-pmu"

# --- second-kernel: installing another kernel's headers builds the module for it too.
if [ -n "$FULL" ]; then
	run_apt install "$K2PKG=$KVERSION" || fail "second-kernel: installing $K2PKG exited $rc"
	installed_for "$VERSION" "$K2REL" ||
		{ cat /tmp/status; fail "second-kernel: the headers' DKMS hook did not install it for $K2REL"; }
	signed_module "$K2REL" second-kernel
	pass "second-kernel: $K2PKG installed; the kernel hooks had DKMS build and sign it for $K2REL: $ko"
fi

# --- userland: the header package (and the Python package where it was built).
userland="simple-pmu-dev"
[ -z "$FULL" ] || userland="$userland python3-simple-pmu"
# The test's own C compiler (a header package does not pull one in; sid's dkms does not).
run_apt install $userland gcc libc6-dev || fail "userland: apt-get install $userland exited $rc"
printf '#include <simple-pmu/cycles.h>\n#include <stdio.h>\n%s\n' \
	'int main(void) { printf("perfmon_available() = %d\n", perfmon_available()); return 0; }' \
	> /tmp/t.c
gcc -O2 -Wall -Wextra -Werror -o /tmp/t /tmp/t.c || fail "userland: <simple-pmu/cycles.h> does not compile"
/tmp/t
detail="<simple-pmu/cycles.h> compiles"
if [ -n "$FULL" ]; then
	/usr/bin/python3 -c 'import simple_pmu, simple_pmu._native' || fail "userland: import simple_pmu"
	src=0; sout=$(simple-pmu status 2>&1) || src=$?
	echo "$sout"
	echo "$sout" | grep -q "module not loaded" || fail "userland: simple-pmu status names no reason"
	detail="$detail; import simple_pmu works; simple-pmu status exits $src naming its reasons"
fi
pass "userland: $detail"

# --- tcyc: the 2011 demo program, unmodified, against the installed header. It comes from
# the seed documents beside the checkout; a plain clone has none: SKIP with the reason
# ($TCYC_SKIP, from pmubuild/common/seeds.py), never a failure and never a pass.
if [ -e "$OUT/tcyc.c" ]; then
	gcc -O2 -Wall -Wextra -Werror -I/usr/include/simple-pmu -o /tmp/tcyc "$OUT/tcyc.c" ||
		fail "tcyc: the 2011 tcyc.c does not compile against /usr/include/simple-pmu"
	trc=0; tout=$(/tmp/tcyc) || trc=$?
	[ "$trc $tout" = "1 no fixed perfmon available" ] || fail "tcyc: exit $trc, '$tout'"
	pass "tcyc: the 2011 tcyc.c compiles with -I/usr/include/simple-pmu and says '$tout'"
else
	[ -n "$TCYC_SKIP" ] || fail "tcyc: no $OUT/tcyc.c and no reason given for its absence"
	skip "tcyc: the 2011 tcyc.c check: $TCYC_SKIP"
fi

# --- upgrade: a newer package version rebuilds for every kernel and drops the old one.
if [ -n "$FULL" ]; then
	mkdir -p /srv/next
	cp "$NEXT"/simple-pmu-dkms_*.deb /srv/next/
	(cd /srv/next && apt-ftparchive packages . > Packages)
	echo 'deb [trusted=yes] file:/srv/next ./' > /etc/apt/sources.list.d/localrepo-next.list
	apt-get update -q > /tmp/update.log 2>&1 || { cat /tmp/update.log; fail "upgrade: apt-get update"; }
	touch /tmp/before-upgrade
	sleep 1
	run_apt install simple-pmu-dkms || fail "upgrade: apt-get install exited $rc"
	for k in "$KREL" "$K2REL"; do
		installed_for "$NEXT_VERSION" "$k" || { cat /tmp/status; fail "upgrade: $NEXT_VERSION not installed for $k"; }
		signed_module "$k" upgrade
	done
	! grep -q "^simple-pmu/$VERSION," /tmp/status || { cat /tmp/status; fail "upgrade: $VERSION still in dkms"; }
	[ ! -e "/usr/src/simple-pmu-$VERSION" ] || fail "upgrade: /usr/src/simple-pmu-$VERSION left"
	n=$(find /lib/modules/"$KREL" /lib/modules/"$K2REL" -name 'simple-pmu.ko*' -newer /tmp/before-upgrade | wc -l)
	[ "$n" = 2 ] || fail "upgrade: $n of 2 modules rebuilt"
	group_gid upgrade "$gid"
	pass "upgrade: $(dpkg-query -W -f '${Version}' simple-pmu-dkms) rebuilt, signed and installed for $KREL and $K2REL; $VERSION gone; group simple-pmu kept (gid $gid)"
fi

# --- remove: the module, DKMS's tree and sources, the udev rule go; the conffile
# /etc/default/simple-pmu stays until purge (Debian policy 10.7.3).
run_apt remove simple-pmu-dkms || fail "remove: apt-get remove exited $rc"
[ -e /etc/default/simple-pmu ] || fail "remove: the conffile /etc/default/simple-pmu went"
[ -z "$(find /lib/modules -name 'simple-pmu.ko*')" ] || fail "remove: a module is left"
[ ! -e /var/lib/dkms/simple-pmu ] || fail "remove: /var/lib/dkms/simple-pmu left"
[ -z "$(ls -d /usr/src/simple-pmu-* 2>/dev/null)" ] || fail "remove: sources left in /usr/src"
[ ! -e /usr/lib/udev/rules.d/60-simple-pmu-dkms.rules ] || fail "remove: udev rule left"
group_gid remove "$gid"
pass "remove: no module, DKMS tree, sources or udev rule left; /etc/default/simple-pmu and group simple-pmu (gid $gid) kept"

# --- purge: nothing of ours left.
run_apt purge $userland simple-pmu-dkms || fail "purge: apt-get purge exited $rc"
left=$(leftovers) || fail "purge: find failed"
[ -z "$left" ] || fail "purge: left behind: $left"
no_dkms_entry purge
# The system group stays (debian/simple-pmu-dkms.postrm, README.Debian).
group_gid purge "$gid"
pass "purge: no module, DKMS tree, sources, udev rule, header, Python module, man page or doc left; group simple-pmu (gid $gid) kept, as Debian leaves system groups"

[ -n "$FULL" ] || exit 0

# --- autopkgtest: the package's own tests (debian/tests/control), run by autopkgtest
# from the source package and the .debs built above, this chroot being the testbed (null;
# breaks-testbed allowed: the overlay is thrown away). Every test must PASS, the "dkms"
# one (DKMS's own script) for both kernels.
# The stages from here on install the version under test only.
rm -f /etc/apt/sources.list.d/localrepo-next.list
apt-get update -q > /tmp/update.log 2>&1 || { cat /tmp/update.log; fail "setup: apt-get update without the newer version"; }
if runs autopkgtest; then
	run_apt install autopkgtest dpkg-dev || fail "autopkgtest: installing autopkgtest exited $rc"
	# Its log, indented: the tests' own "PASS: ..." lines are not this script's verdicts.
	at_log() { sed 's/^/| /' /tmp/autopkgtest.log; }
	ac=0
	autopkgtest --ignore-restrictions=breaks-testbed --output-dir /tmp/autopkgtest-out \
		"$(ls "$DEBS"/simple-pmu_*.dsc)" /srv/repo/*.deb -- null > /tmp/autopkgtest.log 2>&1 || ac=$?
	cat /tmp/autopkgtest-out/summary || true
	[ "$ac" = 0 ] || { at_log; fail "autopkgtest: exited $ac (summary above)"; }
	want="cycles-h dkms module python"
	got=$(awk '$2 == "PASS" { print $1 }' /tmp/autopkgtest-out/summary | sort | tr '\n' ' ')
	[ "$got" = "$want " ] || { at_log; fail "autopkgtest: passed '$got', want '$want'"; }
	# Its summary: "I: PASS simple-pmu/VERSION KREL" (dkms 3.2), "I: PASS KREL" (3.0.10).
	n=$(awk -v a="$KREL" -v b="$K2REL" '$1 == "I:" && $2 == "PASS" && ($NF == a || $NF == b)' \
		/tmp/autopkgtest-out/dkms-stdout | wc -l)
	[ "$n" = 2 ] || { at_log; fail "autopkgtest: dkms: $n of 2 kernels passed"; }
	# The module test's Depends (the headers metapackage) may add the suite's current kernel.
	hk=$(ls -d /lib/modules/*/build | wc -l)
	m=$(grep -c "^PASS: .*installed by DKMS for" /tmp/autopkgtest-out/module-stdout) || true
	[ "$hk" -ge 2 ] && [ "$m" = "$hk" ] || { at_log; fail "autopkgtest: module: $m of $hk kernels checked"; }
	run_apt purge simple-pmu-dkms simple-pmu-dev python3-simple-pmu || fail "autopkgtest: purge exited $rc"
	left=$(leftovers) || fail "autopkgtest: find failed"
	[ -z "$left" ] || fail "autopkgtest: left after purge: $left"
	pass "autopkgtest: debian/tests ($want) PASS on this chroot as the testbed; dkms for $KREL and $K2REL, module for $hk kernels with headers"
fi

# --- broken-headers: headers whose kbuild tools are missing make the install fail
# loudly, install no module, and dpkg can finish once the tools are back.
modpost=$(readlink -f "/usr/src/linux-headers-$KREL/scripts/mod/modpost")
[ -x "$modpost" ] || fail "broken-headers: no modpost at $modpost to take away"
mv "$modpost" /tmp/modpost.saved
if run_apt install simple-pmu-dkms; then fail "broken-headers: apt-get install succeeded"; fi
arc=$rc
grep -q "Bad return status for module build" /tmp/apt.log || fail "broken-headers: DKMS's error not in apt's output"
# The reason itself, in apt's output (debian/simple-pmu-dkms.postinst shows it).
reason=$(grep "kbuild tools missing: scripts/mod/modpost" /tmp/apt.log) ||
	fail "broken-headers: apt's output does not name the missing tool"
[ -z "$(find /lib/modules -name 'simple-pmu.ko*')" ] || fail "broken-headers: a module got installed"
state=$(dpkg-query -W -f '${Status}' simple-pmu-dkms)
[ "$state" = "install ok half-configured" ] || fail "broken-headers: package state '$state'"
V=$(dpkg-query -W -f '${Version}' simple-pmu-dkms | sed 's/-[^-]*$//')
mv /tmp/modpost.saved "$modpost"
dpkg --configure -a > /tmp/configure.log 2>&1 || { cat /tmp/configure.log; fail "broken-headers: dpkg --configure -a after repair"; }
for k in "$KREL" "$K2REL"; do
	installed_for "$V" "$k" || { cat /tmp/status; fail "broken-headers: not installed for $k after repair"; }
done
group_gid broken-headers "$gid" # installed again after a purge: the group found and kept
run_apt purge simple-pmu-dkms || fail "broken-headers: purge exited $rc"
left=$(leftovers) || fail "broken-headers: find failed"
[ -z "$left" ] || fail "broken-headers: left after purge: $left"
no_dkms_entry broken-headers
pass "broken-headers: apt-get exited $arc ('Bad return status for module build'); make.log:$reason; no module installed; package '$state' until the tools came back, then dpkg --configure -a installed it; purge left nothing"

# --- nonfatal-verification: a kernel upgrade (the second kernel's headers configured
# again: their postinst runs DKMS's header_postinst.d hook, whose failure fails it) while
# modverify finds what the kernel would still load (forced: our policy made to forbid
# printk, which the module uses). The upgrade succeeds, the module is built, signed and
# installed, and the finding is a warning in make.log.
run_apt install simple-pmu-dkms || fail "nonfatal-verification: apt-get install exited $rc"
mv=/usr/src/simple-pmu-$VERSION/pmubuild/modverify.py
sed -i '/^# Hash algorithms of a PKCS#7/i NEVER_USED.update(dict.fromkeys(("_printk", "printk"), "forced by test-package"))' "$mv"
grep -q '^NEVER_USED.update.*forced by test-package' "$mv" || fail "nonfatal-verification: could not force the policy finding"
dkms remove -m simple-pmu -v "$VERSION" -k "$K2REL" > /tmp/remove.log 2>&1 ||
	{ cat /tmp/remove.log; fail "nonfatal-verification: dkms remove for $K2REL"; }
! installed_for "$VERSION" "$K2REL" || fail "nonfatal-verification: still installed for $K2REL"
run_apt install --reinstall "$K2PKG=$KVERSION" ||
	fail "nonfatal-verification: the kernel upgrade ($K2PKG configured again) exited $rc"
installed_for "$VERSION" "$K2REL" || { cat /tmp/status; fail "nonfatal-verification: not installed for $K2REL"; }
signed_module "$K2REL" nonfatal-verification
warning=$(dkms_log "$VERSION" | grep "^modverify: warning: .*forced by test-package") ||
	fail "nonfatal-verification: no modverify warning in make.log (was the finding made?)"
run_apt purge simple-pmu-dkms || fail "nonfatal-verification: purge exited $rc"
no_dkms_entry nonfatal-verification
pass "nonfatal-verification: $K2PKG configured again (exit 0) with a finding forced; DKMS built, signed and installed $ko; make.log: $warning"

# --- failed-verification: a module modverify finds the kernel would refuse fails the
# package's configuration (DKMS runs modverify inside MAKE[0]), with the reason in the
# output. The package is unpacked, its modverify made to expect another vermagic (as for
# a kernel built with another configuration), then configured by dpkg as apt would.
deb=$(ls /srv/repo/simple-pmu-dkms_*.deb)
dpkg --unpack "$deb" > /dev/null
mv=/usr/src/simple-pmu-$VERSION/pmubuild/modverify.py
sed -i '/^if __name__ == "__main__":/i expected_vermagic = lambda t: "forced by test-package"' "$mv"
grep -q '^expected_vermagic = lambda t: "forced by test-package"' "$mv" ||
	fail "failed-verification: could not force the vermagic finding"
if dpkg --configure simple-pmu-dkms > /tmp/configure.log 2>&1; then
	fail "failed-verification: dpkg --configure succeeded although modverify failed"
fi
grep -q "modverify: simple-pmu.ko: vermagic .* differs from the target's 'forced by test-package'" /tmp/configure.log ||
	{ cat /tmp/configure.log; fail "failed-verification: the reason is not in dpkg's output"; }
[ -z "$(find /lib/modules -name 'simple-pmu.ko*')" ] || fail "failed-verification: a module got installed"
state=$(dpkg-query -W -f '${Status}' simple-pmu-dkms)
run_apt purge simple-pmu-dkms || fail "failed-verification: purge exited $rc"
left=$(leftovers) || fail "failed-verification: find failed"
[ -z "$left" ] || fail "failed-verification: left after purge: $left"
no_dkms_entry failed-verification
pass "failed-verification: dpkg --configure fails with modverify's reason in its output; no module installed; '$state'; purge left nothing"
