// crumbs_redact.h — the crash handler's redaction of the termination line's message (see
// crumbs_redact.c); the keys are set through crumbs_termination_message_set_redaction
// (include/crumbs_termination_message.h).

#ifndef CRUMBS_REDACT_H
#define CRUMBS_REDACT_H

#include <stdbool.h>
#include <stddef.h>

/// `text[0..<length]` with the value of every sensitive pair replaced by "[redacted]", into
/// `out` (`capacity` bytes, not NUL-terminated); returns the bytes written, and sets `*cut`
/// when the result did not fit. Safe to call from a signal handler (no libc call).
size_t crumbs__redact_pairs(const char *text, size_t length, char *out, size_t capacity, bool *cut);

/// Whether the keys set did not fit: the message must be left out of the line, since it cannot
/// be redacted with them. Safe to call from a signal handler (reads a static).
bool crumbs__redact_withholds(void);

#endif
