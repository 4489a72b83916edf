// SPDX-License-Identifier: GPL-2.0-only
/*
 * join_check - how include/cycles.h lets a reader in through the module's
 * device node, driven from a test.
 *
 * Built with -DCYCLES_SYSFS_DIR (a fake driver directory), -DCYCLES_DEV_NODE
 * (a file standing in for the node) and -Wl,--wrap=ioctl: the ioctls
 * cycles.h makes are counted here, never reach a kernel, and succeed.
 * arm64 (run under qemu-aarch64) lets a thread in with SPMU_IOC_JOIN. x86
 * (built natively, also with -Wl,--wrap=mmap,--wrap=munmap) lets the
 * process in with a mapping of the node: mmap()s of a descriptor open on
 * the node are counted, their arguments kept, and made for real on the
 * stand-in file (an empty file: its page, like the node's, is never
 * touched), or refused with the errno `mmaperr` set; munmap()s of such a
 * mapping are counted; any ioctl at all is counted too (x86 makes none).
 * One command per line on stdin, one answer line on stdout:
 *
 *   nodac    drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (a root test
 *            run then meets the node's mode as a user does) -> ok | err
 *   state    perfmon_available() (re-chooses the path), then
 *                   -> avail=A path=P joined=J joins=N leaves=L in_guard=G
 *                      mapped=M tries=T ioctls=I
 *   why      cycles_unavailable_reason()          -> ok | the reason
 *   read     cycles_read(CYCLES_CORE)             -> rc=R flags=F joins=N
 *   window   a module-path window with one read    -> begin=B end=E joins=N
 *   join     cycles_join()                        -> rc=R errno=E joins=N
 *   leave    cycles_leave()                       -> rc=R joined=J leaves=L
 *   fork     fork(); the child reports its `state` (its own thread)
 *                   -> child: joined_at_fork=J mapped_at_fork=M avail=A
 *                      path=P joins=N ...
 *   nodefds  descriptors open on CYCLES_DEV_NODE (one left open would
 *            keep the module from unloading)     -> fds=N
 *   threads N  N new threads, released together, each perfmon_available()
 *            on its first use           -> ok=K joins=N (K on the module path)
 *   other C  command C (any of these but `other`) run by the other thread:
 *            one more thread, made at the first `other` and kept (its
 *            cycles_tls stays), while the main thread waits -> C's answer
 *   mmaperr E  x86: node mmap()s fail with errno E from now on (0: they
 *            work)                                -> ok
 *   mapargs  x86: the last node mmap()'s arguments -> addr=A len=L
 *            pagesize=P prot=R flags=F off=O nodefd=1 unmapped_len=U
 *   racehook U R  x86 (also built with -Wl,--wrap=pthread_mutex_unlock,
 *            --wrap=opendir): from now on every release of
 *            cycles_module_lock sleeps U us after it (the thread is
 *            preempted just out of the lock), and every refill of the
 *            placement cache R us inside it (its opendir() of the driver's
 *            directory, while the cache is empty); 0 0: neither  -> ok
 *
 * joins counts the let-ins made (SPMU_IOC_JOIN; x86: node mappings made),
 * tries the attempts (x86: node mmap()s, failed ones too), leaves the
 * take-outs (SPMU_IOC_LEAVE; x86: munmap()s of a node mapping), in_guard
 * the calls made while a guard was on (from the fault handler's side of a
 * read: never allowed); mapped is 1 while cycles.h holds a mapping (x86).
 */
#define _GNU_SOURCE 1
#define CYCLES_SCOPE_CPU 1
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include "cycles.h"

/* Counted by several threads (`threads`): atomically. */
static int joins, leaves, in_guard, tries, ioctls;

#define count(v)	__atomic_add_fetch(&(v), 1, __ATOMIC_SEQ_CST)
#define counted(v)	__atomic_load_n(&(v), __ATOMIC_SEQ_CST)

int __real_ioctl(int fd, unsigned long request, ...);
int __wrap_ioctl(int fd, unsigned long request, ...);

int __wrap_ioctl(int fd, unsigned long request, ...)
{
	(void)fd;
	count(ioctls);
	if (cycles_tls.guarding)
		count(in_guard);
#if defined(__x86_64__)
	errno = ENOTTY;		/* the x86 driver has no ioctl */
	return -1;
#endif
	if (request == CYCLES_IOC_JOIN) {
		count(joins);
		return 0;
	}
	if (request == CYCLES_IOC_LEAVE) {
		count(leaves);
		return 0;
	}
	errno = ENOTTY;
	return -1;
}

/* Whether @fd is open on CYCLES_DEV_NODE. */
static int node_fd(int fd)
{
	char link[64], target[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return !strcmp(target, CYCLES_DEV_NODE);
}

#if defined(__x86_64__)
#define process_mapped()	(cycles_let_in_map != NULL)

static int map_errno;
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	void *addr, *got;
	size_t len, unmapped_len;
	int prot, flags, nodefd;
	off_t off;
} last;
/* The node mappings made and not yet unmapped. */
static void *mapped[64];

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);
int __real_munmap(void *addr, size_t len);
int __wrap_munmap(void *addr, size_t len);

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	void *p;
	unsigned int i;

	if (fd < 0 || !node_fd(fd))
		return __real_mmap(addr, len, prot, flags, fd, off);
	count(tries);
	if (cycles_tls.guarding)
		count(in_guard);
	pthread_mutex_lock(&map_lock);
	last.addr = addr;
	last.len = len;
	last.prot = prot;
	last.flags = flags;
	last.off = off;
	last.nodefd = 1;
	if (map_errno) {
		errno = map_errno;
		pthread_mutex_unlock(&map_lock);
		return MAP_FAILED;
	}
	p = __real_mmap(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED) {
		count(joins);
		last.got = p;
		for (i = 0; i < sizeof(mapped) / sizeof(mapped[0]); i++)
			if (!mapped[i]) {
				mapped[i] = p;
				break;
			}
	}
	pthread_mutex_unlock(&map_lock);
	return p;
}

int __wrap_munmap(void *addr, size_t len)
{
	unsigned int i;

	pthread_mutex_lock(&map_lock);
	for (i = 0; i < sizeof(mapped) / sizeof(mapped[0]); i++)
		if (addr && mapped[i] == addr) {
			mapped[i] = NULL;
			last.unmapped_len = len;
			count(leaves);
		}
	pthread_mutex_unlock(&map_lock);
	return __real_munmap(addr, len);
}

/*
 * `racehook`: widen the race between a refill of the placement cache,
 * which empties it under cycles_module_lock, and a thread that looks at it
 * without the lock right after leaving it (found only now and then by
 * chance on a two-CPU host): the leaving thread sleeps, another takes the
 * lock meanwhile and sleeps in its refill while the cache is empty.
 */
static int race_unlock_us, race_refill_us;

int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m);
DIR *__real_opendir(const char *name);
DIR *__wrap_opendir(const char *name);

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
	int rc = __real_pthread_mutex_unlock(m);
	int us = counted(race_unlock_us);

	if (m == &cycles_module_lock && us)
		usleep((useconds_t)us);
	return rc;
}

DIR *__wrap_opendir(const char *name)
{
	int us = counted(race_refill_us);

	if (us && !strcmp(name, CYCLES_SYSFS_DIR))
		usleep((useconds_t)us);
	return __real_opendir(name);
}

/* `racehook U R` */
static void racehook(const char *args)
{
	int unlock_us, refill_us;

	if (sscanf(args, "%d %d", &unlock_us, &refill_us) != 2) {
		printf("unknown command\n");
		return;
	}
	__atomic_store_n(&race_unlock_us, unlock_us, __ATOMIC_SEQ_CST);
	__atomic_store_n(&race_refill_us, refill_us, __ATOMIC_SEQ_CST);
	printf("ok\n");
}
#else
#define process_mapped()	0
#endif

static int drop_dac(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2];
	unsigned int drop = (1U << CAP_DAC_OVERRIDE) |
			    (1U << CAP_DAC_READ_SEARCH);

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	data[0].effective &= ~drop;
	data[0].permitted &= ~drop;
	data[0].inheritable &= ~drop;
	return (int)syscall(SYS_capset, &hdr, data);
}

static int node_fds(void)
{
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int fds = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			fds += node_fd(atoi(e->d_name));
	closedir(d);
	return fds;
}

static void state(const char *prefix)
{
	int avail = perfmon_available();

	printf("%savail=%d path=%d joined=%d joins=%d leaves=%d in_guard=%d "
	       "mapped=%d tries=%d ioctls=%d\n", prefix, avail, cycles_path(),
	       cycles_tls.joined, counted(joins), counted(leaves),
	       counted(in_guard), process_mapped(), counted(tries),
	       counted(ioctls));
}

struct racer {
	pthread_barrier_t *go;
	int avail, path;
};

/* A new thread's first use of the header, at the same time as the others'. */
static void *race(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->go);
	r->avail = perfmon_available();
	r->path = cycles_path();
	return NULL;
}

/* `threads N`: -> ok=K joins=J */
static void threads(int n)
{
	struct racer r[64];
	pthread_t tid[64];
	pthread_barrier_t go;
	int i, ok = 0;

	if (n < 1 || n > 64)
		n = 1;
	pthread_barrier_init(&go, NULL, (unsigned int)n);
	for (i = 0; i < n; i++) {
		r[i].go = &go;
		pthread_create(&tid[i], NULL, race, &r[i]);
	}
	for (i = 0; i < n; i++) {
		pthread_join(tid[i], NULL);
		ok += r[i].avail > 0 && r[i].path == CYCLES_PATH_MODULE;
	}
	pthread_barrier_destroy(&go);
	printf("ok=%d joins=%d\n", ok, counted(joins));
}

static void command(const char *line);

/* `other`: the one more thread, and the command it is to run. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t tid;
	int started, busy;
	char line[64];
} other = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void *other_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&other.lock);
	for (;;) {
		while (!other.busy)
			pthread_cond_wait(&other.cond, &other.lock);
		pthread_mutex_unlock(&other.lock);
		command(other.line);
		pthread_mutex_lock(&other.lock);
		other.busy = 0;
		pthread_cond_broadcast(&other.cond);
	}
	return NULL;
}

/* `other C`: C run by the other thread, the main thread waiting for it. */
static void on_other(const char *line)
{
	if (other.started && pthread_equal(pthread_self(), other.tid)) {
		printf("unknown command\n");
		return;
	}
	if (!other.started) {
		if (pthread_create(&other.tid, NULL, other_main, NULL)) {
			printf("unknown command\n");
			return;
		}
		other.started = 1;
	}
	pthread_mutex_lock(&other.lock);
	snprintf(other.line, sizeof(other.line), "%s", line);
	other.busy = 1;
	pthread_cond_broadcast(&other.cond);
	while (other.busy)
		pthread_cond_wait(&other.cond, &other.lock);
	pthread_mutex_unlock(&other.lock);
}

static void command(const char *line)
{
	struct cycles_reading r;
	struct cycles_window w;
	char prefix[96];
	const char *why;
	int rc, begin, status, n;
	unsigned int end;
	pid_t pid;

	if (!strncmp(line, "other ", 6)) {
		on_other(line + 6);
	} else if (!strcmp(line, "nodac\n")) {
		printf("%s\n", drop_dac() == 0 ? "ok" : "err");
	} else if (!strcmp(line, "state\n")) {
		state("");
	} else if (!strcmp(line, "why\n")) {
		why = cycles_unavailable_reason();
		printf("%s\n", why ? why : "ok");
	} else if (!strcmp(line, "read\n")) {
		rc = cycles_read(CYCLES_CORE, &r);
		printf("rc=%d flags=%u joins=%d\n", rc, r.flags,
		       counted(joins));
	} else if (!strcmp(line, "window\n")) {
		begin = cycles_window_begin(&w);
		if (begin == 0)
			(void)cycles_window_read(&w, CYCLES_CORE);
		end = cycles_window_end(&w);
		printf("begin=%d end=%u joins=%d\n", begin, end,
		       counted(joins));
	} else if (!strcmp(line, "join\n")) {
		errno = 0;
		rc = cycles_join();
		printf("rc=%d errno=%d joins=%d\n", rc, rc ? errno : 0,
		       counted(joins));
	} else if (!strcmp(line, "leave\n")) {
		rc = cycles_leave();
		printf("rc=%d joined=%d leaves=%d\n", rc,
		       cycles_tls.joined, counted(leaves));
	} else if (!strcmp(line, "fork\n")) {
		pid = fork();
		if (pid == 0) {
			snprintf(prefix, sizeof(prefix),
				 "child: joined_at_fork=%d "
				 "mapped_at_fork=%d ", cycles_tls.joined,
				 process_mapped());
			state(prefix);
			_exit(0);
		}
		waitpid(pid, &status, 0);
	} else if (!strcmp(line, "nodefds\n")) {
		printf("fds=%d\n", node_fds());
	} else if (sscanf(line, "threads %d", &n) == 1) {
		threads(n);
#if defined(__x86_64__)
	} else if (sscanf(line, "mmaperr %d", &n) == 1) {
		pthread_mutex_lock(&map_lock);
		map_errno = n;
		pthread_mutex_unlock(&map_lock);
		printf("ok\n");
	} else if (!strcmp(line, "mapargs\n")) {
		pthread_mutex_lock(&map_lock);
		printf("addr=%lu len=%zu pagesize=%ld prot=%d flags=%d "
		       "off=%lld nodefd=%d unmapped_len=%zu\n",
		       (unsigned long)last.addr, last.len,
		       sysconf(_SC_PAGESIZE), last.prot, last.flags,
		       (long long)last.off, last.nodefd,
		       last.unmapped_len);
		pthread_mutex_unlock(&map_lock);
	} else if (!strncmp(line, "racehook ", 9)) {
		racehook(line + 9);
#endif
	} else {
		printf("unknown command\n");
	}
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		command(line);
	return 0;
}
