"""tests/guest/src/failnth.c, the debug guest's fault-injection helper, on this host:
its refusals of bad use, and its error where the kernel has no per-task fail-nth."""

import subprocess
from pathlib import Path

import pytest

from pmubuild.guests import guest

FAIL_NTH = Path("/proc/thread-self/fail-nth")


@pytest.fixture(scope="module")
def failnth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("failnth")
    (exe,) = [p for p in guest.compile_programs("amd64", out) if p.name == "failnth"]
    return exe


def run(exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True)


@pytest.mark.parametrize("args, says", [
    ((), "usage: failnth N"),
    (("1", "load"), "usage: failnth N"),
    (("-1", "load", "/x"), "N must be 0 (inject nothing) or more, not -1"),
    (("x", "load", "/x"), "bad N: x"),
])
def test_bad_use_is_refused_before_anything_is_armed(failnth, args, says):
    p = run(failnth, *args)
    assert p.returncode == 2 and says in p.stderr and p.stdout == ""


def test_a_kernel_without_fail_nth_is_named_or_the_call_reports(failnth, tmp_path):
    target = tmp_path / "f"
    target.write_text("")
    p = run(failnth, "1", "write", str(target), "abc")
    if not FAIL_NTH.exists():
        assert p.returncode == 2 and "fail-nth" in p.stderr
        assert "CONFIG_FAULT_INJECTION" in p.stderr
    else:  # a fault-injection host: the write makes a fault-capable call or none
        assert p.returncode == 0
        assert p.stdout.startswith("n=1 rc=") and "injected=" in p.stdout
    bad = run(failnth, "1", "frob", str(target))
    assert bad.returncode == 2 and "bad use: 1 frob" in bad.stderr


# --- failnth against a model of per-task fail-nth (no fault-injection kernel needed) -----
#
# A shim preloaded into failnth stands for the kernel: /proc/thread-self/fail-nth is a file
# of the test's, the armed call (write, finit_module, the JOIN ioctl) makes FAKE_POINTS
# fault-capable calls, and the N-th fails (ENOMEM) when N <= FAKE_POINTS, as the kernel
# does; a read of fail-nth after it gives 0 then, else N - FAKE_POINTS. FAKE_ABSORB=1: the
# failure is absorbed and the call succeeds. Each armed call is logged (FAKE_LOG) with the
# arguments it got, so what failnth asks of the kernel is checked as well as what it says.
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ctl = -1;
static long armed, left = -1;

static void note(const char *fmt, ...)
{
	va_list ap;
	FILE *f = fopen(getenv("FAKE_LOG"), "a");

	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* One armed call: 1 when the fault is injected and not absorbed (the call fails). */
static int fault(void)
{
	long points = atol(getenv("FAKE_POINTS"));

	if (!armed)
		return 0;
	left = armed <= points ? 0 : armed - points;
	note("armed=%ld\n", armed);
	armed = left;  /* as the kernel: what is left stays armed until written 0 */
	return left == 0 && !getenv("FAKE_ABSORB");
}

/* failnth must disarm before it prints and exits (the printf's own allocations). */
__attribute__((destructor)) static void at_exit(void)
{
	if (armed)
		note("still armed at exit: %ld\n", armed);
}

int open(const char *path, int flags, ...)
{
	static int (*real)(const char *, int, ...);
	va_list ap;
	int mode, fd;

	va_start(ap, flags);
	mode = va_arg(ap, int);
	va_end(ap);
	if (!real)
		real = dlsym(RTLD_NEXT, "open");
	if (armed) {  /* an open is fault-capable too: only the call itself may be armed */
		note("open %s\n", path);
		if (fault()) {
			errno = ENOMEM;
			return -1;
		}
	}
	if (strcmp(path, "/proc/thread-self/fail-nth"))
		return real(path, flags, mode);
	if (!getenv("FAKE_FAILNTH")) {
		errno = ENOENT;
		return -1;
	}
	fd = real(getenv("FAKE_FAILNTH"), flags, mode);
	ctl = fd;
	return fd;
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	char s[32] = "";

	if (fd != ctl) {
		errno = EBADF;
		return -1;
	}
	memcpy(s, buf, len < 31 ? len : 31);
	armed = atol(s);
	left = armed;
	return (ssize_t)len;
}
ssize_t pwrite64(int, const void *, size_t, off_t) __attribute__((alias("pwrite")));

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	if (fd != ctl) {
		errno = EBADF;
		return -1;
	}
	return snprintf(buf, len, "%ld\n", left);
}
ssize_t pread64(int, void *, size_t, off_t) __attribute__((alias("pread")));

ssize_t write(int fd, const void *buf, size_t len)
{
	static ssize_t (*real)(int, const void *, size_t);

	if (!real)
		real = dlsym(RTLD_NEXT, "write");
	if (armed) {
		note("write %.*s\n", (int)len, (const char *)buf);
		if (fault()) {
			errno = ENOMEM;
			return -1;
		}
	}
	return real(fd, buf, len);
}

long syscall(long nr, ...)
{
	va_list ap;
	long fd;
	const char *params;

	va_start(ap, nr);
	fd = va_arg(ap, long);
	params = va_arg(ap, const char *);
	va_end(ap);
	if (nr != SYS_finit_module || !armed) {
		errno = ENOSYS;
		return -1;
	}
	note("finit_module fd=%s params=%s\n", fd >= 0 ? "ok" : "bad", params);
	if (fault()) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	if (!armed) {
		errno = ENOTTY;
		return -1;
	}
	note("ioctl 0x%lx\n", req);
	if (fault()) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}
"""


@pytest.fixture(scope="module")
def modelled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """failnth built to run dynamically (the guest's is static), and the shim."""
    out = tmp_path_factory.mktemp("failnth-model")
    src = Path(guest.GUEST_TESTS) / "src"
    (out / "shim.c").write_text(SHIM)
    for argv in (["gcc", "-O2", "-shared", "-fPIC", "-o", out / "shim.so", out / "shim.c",
                  "-ldl"],
                 ["gcc", "-O2", "-Wall", "-Werror", "-U_FORTIFY_SOURCE", "-I",
                  guest.REPO / "include", "-o", out / "failnth", src / "failnth.c"]):
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    return out / "failnth", out / "shim.so"


def fi(modelled, tmp: Path, points: int, *args: str, absorb: bool = False):
    exe, shim = modelled
    (tmp / "fail-nth").write_text("0\n")
    log = tmp / "calls"
    log.unlink(missing_ok=True)
    env = {"LD_PRELOAD": str(shim), "FAKE_FAILNTH": str(tmp / "fail-nth"),
           "FAKE_POINTS": str(points), "FAKE_LOG": str(log), "PATH": "/usr/bin:/bin"}
    if absorb:
        env["FAKE_ABSORB"] = "1"
    p = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env)
    return p, (log.read_text().splitlines() if log.exists() else [])


def test_a_write_sweep_reports_each_injected_failure_and_its_end(modelled, tmp_path):
    """The sweep the guest scripts run: N = 1..3 fail (3 fault points), N = 4 is the
    first with nothing injected, and says how many points the call made (N - left)."""
    target = tmp_path / "attr"
    for n in (1, 2, 3):
        target.write_text("old")
        p, calls = fi(modelled, tmp_path, 3, str(n), "write", str(target), "abc")
        assert p.returncode == 0, p.stderr
        assert p.stdout == f"n={n} rc=-1 errno=ENOMEM injected=1 left=0\n"
        assert calls == ["write abc", f"armed={n}"]  # armed with N, just for the write
        assert target.read_text() == "old"
    p, calls = fi(modelled, tmp_path, 3, "4", "write", str(target), "abc")
    assert p.stdout == "n=4 rc=3 errno=0 injected=0 left=1\n"
    assert calls == ["write abc", "armed=4"]  # and disarmed before its own output
    assert target.read_text() == "abc"


def test_an_absorbed_failure_is_injected_with_the_call_succeeding(modelled, tmp_path):
    target = tmp_path / "attr"
    target.write_text("")
    p, _ = fi(modelled, tmp_path, 5, "2", "write", str(target), "ring", absorb=True)
    assert p.stdout == "n=2 rc=4 errno=0 injected=1 left=0\n" and target.read_text() == "ring"


def test_load_passes_the_module_and_its_parameters(modelled, tmp_path):
    ko = tmp_path / "m.ko"
    ko.write_text("")
    p, calls = fi(modelled, tmp_path, 2, "2", "load", str(ko), "events=0x11")
    assert p.stdout == "n=2 rc=-1 errno=ENOMEM injected=1 left=0\n", p.stderr
    assert calls == ["finit_module fd=ok params=events=0x11", "armed=2"]
    p, calls = fi(modelled, tmp_path, 2, "7", "load", str(ko))
    assert p.stdout == "n=7 rc=0 errno=0 injected=0 left=5\n"
    assert calls == ["finit_module fd=ok params=", "armed=7"]


def test_join_asks_the_modules_join_ioctl(modelled, tmp_path):
    node = tmp_path / "node"
    node.write_text("")
    join = "0x%x" % (0xB9 << 8 | 0x01)  # _IO(0xB9, 0x01): CYCLES_IOC_JOIN of cycles.h
    p, calls = fi(modelled, tmp_path, 1, "1", "join", str(node))
    assert p.stdout == "n=1 rc=-1 errno=ENOMEM injected=1 left=0\n", p.stderr
    assert calls == [f"ioctl {join}", "armed=1"]
    p, _ = fi(modelled, tmp_path, 1, "2", "join", str(node))
    assert p.stdout == "n=2 rc=0 errno=0 injected=0 left=1\n"


def test_a_missing_target_is_named_and_nothing_is_armed(modelled, tmp_path):
    p, calls = fi(modelled, tmp_path, 1, "1", "write", str(tmp_path / "none"), "1")
    assert p.returncode == 2 and f"{tmp_path / 'none'}: No such file" in p.stderr
    assert calls == []


@pytest.mark.parametrize("args", [
    ("1", "write", "/x"), ("1", "write", "/x", "v", "w"), ("1", "join", "/x", "y"),
    ("1", "load", "/x", "p", "q"),
])
def test_wrong_argument_counts_are_bad_use(failnth, args):
    p = run(failnth, *args)
    assert p.returncode == 2 and "failnth: bad use" in p.stderr and p.stdout == ""
