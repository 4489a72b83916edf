// SPDX-License-Identifier: GPL-2.0
/* runas UID CMD [ARGS...]: drop to UID/GID (no supplementary groups), exec CMD. */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	uid_t uid;

	if (argc < 3) {
		fprintf(stderr, "usage: runas UID CMD [ARGS...]\n");
		return 2;
	}
	uid = (uid_t)atoi(argv[1]);
	if (setgroups(0, NULL) || setgid(uid) || setuid(uid)) {
		perror("runas");
		return 2;
	}
	execvp(argv[2], argv + 2);
	perror("runas: exec");
	return 127;
}
