// SPDX-License-Identifier: GPL-2.0
/*
 * runas UID[:GROUP] CMD [ARGS...]: drop to uid and gid UID, with GROUP (a gid)
 * as the only supplementary group if given (none otherwise), and exec CMD.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	uid_t uid;
	gid_t group;
	char *sep;

	if (argc < 3) {
		fprintf(stderr, "usage: runas UID[:GROUP] CMD [ARGS...]\n");
		return 2;
	}
	uid = (uid_t)atoi(argv[1]);
	sep = strchr(argv[1], ':');
	if (sep)
		group = (gid_t)atoi(sep + 1);
	if (setgroups(sep ? 1 : 0, sep ? &group : NULL) || setgid(uid) ||
	    setuid(uid)) {
		perror("runas");
		return 2;
	}
	execvp(argv[2], argv + 2);
	perror("runas: exec");
	return 127;
}
