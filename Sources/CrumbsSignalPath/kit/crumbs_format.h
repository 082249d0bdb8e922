// crumbs_format.h — text into caller buffers: copy, append, decimal, hex. Internal to
// CrumbsSignalPath (not in include/: Swift has its own strings).
//
// Why our own: the crash handler and the signal-breadcrumb handler build their messages inside
// signal handlers, where snprintf is not async-signal-safe (locale, possibly malloc), and the
// signal path keeps its list of libc calls to what it really needs: these are plain loops.
//
// Contract, for every function here: `buffer` holds `capacity` bytes; `length` is how many are
// in use (a length at or past the end is treated as capacity - 1); text is cut to fit and the
// buffer is always NUL-terminated (unless capacity is 0, when nothing is written). Each returns
// the new length, so appends chain:
//   size_t used = crumbs__format_copy(buffer, sizeof buffer, "SIG");
//   used = crumbs__format_append_decimal(buffer, sizeof buffer, used, 34);
//
// SIGNAL SAFETY: every function is async-signal-safe and reentrant: no libc call at all, no
// static state; they touch only the caller's buffer.

#ifndef CRUMBS_FORMAT_H
#define CRUMBS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/// Bytes before the NUL of `text`; 0 for NULL. Safe to call from a signal handler.
size_t crumbs__format_length(const char *text);

/// Copies `text` (NULL counts as "") to the start of `buffer`. Returns its length there.
/// Safe to call from a signal handler.
size_t crumbs__format_copy(char *buffer, size_t capacity, const char *text);

/// Appends `text` (NULL counts as "") at `length`. Safe to call from a signal handler.
size_t crumbs__format_append(char *buffer, size_t capacity, size_t length, const char *text);

/// Appends `value` in decimal ("-42"). Safe to call from a signal handler.
size_t crumbs__format_append_decimal(char *buffer, size_t capacity, size_t length, int64_t value);

/// Appends `value` in lowercase hexadecimal with a 0x prefix and no leading zeros ("0x0",
/// "0x7ffd1234"). Safe to call from a signal handler.
size_t crumbs__format_append_hex(char *buffer, size_t capacity, size_t length, uint64_t value);

/// Appends 16 bytes as a lowercase UUID ("3f2c09a1-…"), the text Swift's SessionID prints and
/// ring and record file names use. Safe to call from a signal handler.
size_t crumbs__format_append_uuid(char *buffer, size_t capacity, size_t length, const uint8_t bytes[16]);

#endif // CRUMBS_FORMAT_H
