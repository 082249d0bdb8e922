// crumbs_termination_message.h — the one line the crash handler writes for the orchestrator
// (Kubernetes reads /dev/termination-log when a container ends and shows it in `kubectl
// describe pod`), after the crash record is complete:
//
//   Crumbs: SIGSEGV in MyApp.Parser.parse (MyApp+0x1f2c4); report 3f2a…; Fatal error: …
//
// the signal, the top frame in the app's own code (named from the executable's symbol table
// when it has one; always module + offset, the offset as the file sees it, for addr2line), the
// session id (the crash report's id), and the Swift runtime's fatal-error message when it left
// one. One write of at most CRUMBS_TERMINATION_MESSAGE_MAX bytes, ending in "\n".
//
// The message's `key=value` / `key: value` pairs whose key contains one of the redaction keys
// have their value replaced by "[redacted]", and URLs' userinfo too (crumbs_redact.c), as
// reports' redaction does: the orchestrator keeps the line (Kubernetes stores it in the pod's
// status). When the keys did not fit, the message is left out ("; [message withheld]").
//
// Entry points, in call order:
//   crumbs_termination_message_set_redaction  (set-up) the keys, while no descriptor is set
//   crumbs_termination_message_set_fd   (set-up) the file the line goes to, opened by the caller
//   [crash] the handler writes the line (crumbs_termination_message.c)
// Tests and fuzzing reach the pieces through the test-only target's crumbs_*_testing_*
// functions (Tests/CrumbsSignalPathTesting).
//
// SIGNAL SAFETY: crumbs_termination_message_set_fd is set-up code (not signal-safe: the Swift
// wrapper serializes it). What runs in the
// handler is listed in crumbs_termination_message.c.

#ifndef CRUMBS_TERMINATION_MESSAGE_H
#define CRUMBS_TERMINATION_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The longest line written, its "\n" included (Kubernetes keeps at most 4096 bytes).
#define CRUMBS_TERMINATION_MESSAGE_MAX 512

/// Gives the crash handler the descriptor its line is written to (-1: no line). The handler
/// only writes it; the caller opened it (O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC) and owns
/// it. Returns the descriptor held before (-1 when none), for the caller to close. Not
/// signal-safe.
int crumbs_termination_message_set_fd(int fd);

/// The longest key list crumbs_termination_message_set_redaction keeps, in bytes.
#define CRUMBS_TERMINATION_REDACTION_KEYS_MAX 512

/// The redaction rules for the line's message: `length` bytes of keys, each ended by a NUL
/// (ASCII case-insensitive, `-` and `_` alike, substrings of a pair's key; an empty list: no
/// pair redacted), and whether URLs' userinfo is redacted. Returns false when the keys exceed
/// CRUMBS_TERMINATION_REDACTION_KEYS_MAX: then no key is kept and the line leaves the message
/// out (fails closed: a message that cannot be redacted is not written). Empty keys are skipped.
/// Call it while no descriptor is set (crumbs_termination_message_set_fd(-1) first): the
/// handler reads the rules without a lock once it saw a descriptor. Not signal-safe.
bool crumbs_termination_message_set_redaction(const char *keys, size_t length, bool urls);

// MARK: - The symbol rule, for the reports too

/// The rank crumbs_elf_symbol_rank gives a function (STT_FUNC, STT_GNU_IFUNC): above any other.
#define CRUMBS_ELF_RANK_FUNCTION 16

/// Whether an ELF symbol-table entry can name code, and how it ranks among entries at one
/// address: 0 when it cannot (undefined, absolute or special section, a name offset of 0 or
/// outside the string table's `names_size` bytes; not a function, unless a sized object or
/// untyped symbol in a section that holds code: `code_section`, SHF_EXECINSTR), else
/// CRUMBS_ELF_RANK_FUNCTION for a function, + 4 global / + 2 weak, + 1 when sized. The one rule
/// of the crash handler's symbol lookup and the reports' symbol tables (which add a rank for a
/// name not starting with `_`). `info`, `section`, `size` are st_info, st_shndx, st_size. Safe to
/// call from a signal handler (pure).
uint8_t crumbs_elf_symbol_rank(uint8_t info, uint16_t section, uint64_t size, uint64_t name_offset,
                               uint64_t names_size, bool code_section);

// MARK: - The pair rule, for the reports too

/// Prepares `length` bytes of keys (each ended by a NUL, the last one may lack it) for
/// crumbs_redact_pairs into `out`: ASCII lowercase, `-` as `_`, empty keys left out, each
/// ended by a NUL, an empty key after the last. Returns the bytes the list needs, its end
/// included: when that is more than `capacity`, `out` holds an empty list (no key). Safe to
/// call from a signal handler (pure).
size_t crumbs_redaction_keys_prepare(const char *keys, size_t length, char *out, size_t capacity);

/// `text[0..<length]` with the value of every sensitive pair whose key contains one of `keys`
/// (prepared by crumbs_redaction_keys_prepare; NULL or empty: no pair) replaced by
/// "[redacted]", and with `urls` every URL's userinfo, into `out` (`capacity` bytes, not
/// NUL-terminated); returns the bytes written and sets `*cut` when the result did not fit.
/// Each replacement follows a separator and takes at least one byte, so `length * 6 + 16`
/// bytes always suffice. The rule the crash handler applies to its line (crumbs_redact.c).
/// Safe to call from a signal handler (pure).
size_t crumbs_redact_pairs(const char *keys, bool urls, const char *text, size_t length, char *out,
                           size_t capacity, bool *cut);

#ifdef __cplusplus
}
#endif

#endif // CRUMBS_TERMINATION_MESSAGE_H
