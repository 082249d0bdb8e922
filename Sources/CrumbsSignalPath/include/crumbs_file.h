// crumbs_file.h — giving a finished file its name, once and only if the name is free.
//
// A ring file is made under a name no reader looks at (`<session>.ring.creating`), locked,
// sized and formatted there, and only then given its real name: BreadcrumbRing.create in Swift,
// crumbs_fork.c in a forked child. Both use crumbs_file_publish.
//
// SIGNAL SAFETY: async-signal-safe (a forked child of a multithreaded process calls it). libc
// calls: syscall(SYS_renameat2), link, unlink.
#ifndef CRUMBS_FILE_H
#define CRUMBS_FILE_H

/// Renames `creating` to `path` unless `path` exists (renameat2 with RENAME_NOREPLACE; on a file
/// system without it, link then unlink, which leaves the old name only if the process dies in
/// between). Returns 0, or an errno value: EEXIST when `path` exists.
int crumbs_file_publish(const char *creating, const char *path);

#endif
