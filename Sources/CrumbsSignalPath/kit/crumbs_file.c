// crumbs_file.c — see include/crumbs_file.h.
//
// ASYNC-SIGNAL-SAFE: everything in this file. libc calls: syscall (renameat2), link, unlink.

#define _GNU_SOURCE
#include "crumbs_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

int crumbs_file_publish(const char *creating, const char *path) {
  if (syscall(SYS_renameat2, AT_FDCWD, creating, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return 0;
  int error = errno;
  // EINVAL: the file system has no RENAME_NOREPLACE; ENOSYS: a kernel older than 3.15.
  if (error != EINVAL && error != ENOSYS) return error;
  if (link(creating, path) != 0) return errno;
  unlink(creating);
  return 0;
}
