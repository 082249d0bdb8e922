// crumbs_termination_message.c — the crash line for the orchestrator (see
// include/crumbs_termination_message.h for its shape and who reads it): formatted into a stack
// buffer once the record is complete, one write(2) to the file the client opened at start.
// Design (the app's top frame, its name): docs/crash-capture.md#the-termination-message
//
// Entry points, in call order: crumbs_termination_message_set_fd (set-up) → [crash]
// crumbs__termination_message_write (crumbs_crash_handler.c, after the record).
//
// ASYNC-SIGNAL-SAFE: crumbs__termination_message_write and everything it calls. libc calls:
//   open, fstat, close, write; pread (crumbs_elf_symbol.c); process_vm_readv, memcmp, memcpy
//   (module lookups, crumbs_modules.c); none in the redaction (crumbs_redact.c). No malloc, no
//   locks, no stdio.
// crumbs_termination_message_set_fd is set-up code; the testing functions are not meant for a
// handler (the file variant opens and closes a file).

#define _GNU_SOURCE
#include "crumbs_termination_message.h"
#include "crash/crumbs_crash.h"
#include "unwind/crumbs_unwind.h"
#include "crash/crumbs_elf_symbol.h"
#include "kit/crumbs_format.h"
#include "crash/crumbs_redact.h"
#include "crumbs_signal_names.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/// The descriptor the line goes to, -1 when none. Written by set-up, read by the handler.
static int crumbs__termination_fd = -1;

int crumbs_termination_message_set_fd(int fd) {
  if (fd >= 0) {
    // Binds now what the handler calls beyond install's list (crumbs_crash_install.c binds open
    // and close), so no lazy PLT binding (the loader's lock) happens at crash time: fstat, a
    // pread refused on this write-only descriptor, and a write of nothing.
    struct stat status;
    char byte;
    (void)fstat(fd, &status);
    (void)pread(fd, &byte, 0, 0);
    (void)write(fd, &byte, 0);
  }
  return __atomic_exchange_n(&crumbs__termination_fd, fd < 0 ? -1 : fd, __ATOMIC_ACQ_REL);
}

/// Frames of the crashing thread looked at for the app's top frame: deeper than this, the crash
/// is named by module + offset.
#define CRUMBS__TERMINATION_FRAMES 32u
/// Bytes of a symbol name kept (a Swift mangled name of a generic specialization runs long).
#define CRUMBS__TERMINATION_NAME_SIZE 256u
/// Bytes of the Swift fatal message kept in the line.
#define CRUMBS__TERMINATION_MESSAGE_SIZE 240u

/// The frame the line names.
typedef struct crumbs__termination_frame {
  int module;                               // row in the record's module table, -1 outside every module
  uint64_t address;                         // the frame's address (a pc, or a return address)
  char name[CRUMBS__TERMINATION_NAME_SIZE]; // "" when unnamed
} crumbs__termination_frame;

/// Names the executable's frames among the first CRUMBS__TERMINATION_FRAMES: the first whose
/// symbol is not Crumbs' goes into `frame` (with its name when one was found). Returns false
/// when no frame lies in the executable. Safe to call from a signal handler (open, fstat,
/// pread, close; module lookups).
static bool crumbs__termination_app_frame(const crumbs_crash_record *record,
                                          crumbs__termination_frame *frame) {
  const crumbs__module_table modules = crumbs__module_table_of(record);
  crumbs__elf_query queries[CRUMBS__TERMINATION_FRAMES];
  uint64_t addresses[CRUMBS__TERMINATION_FRAMES];
  uint32_t count = 0;
  uint32_t frames = record->frame_count < CRUMBS_CRASH_MAX_FRAMES ? record->frame_count
                                                                  : CRUMBS_CRASH_MAX_FRAMES;
  uint64_t bias = record->modules[0].load_bias;
  for (uint32_t index = 0; index < frames && count < CRUMBS__TERMINATION_FRAMES; index++) {
    uint64_t address = record->frames[index];
    // A return address points after the call: look up the call itself.
    uint64_t lookup = index == 0 || address == 0 ? address : address - 1;
    if (crumbs__modules_for_text(&modules, lookup) != 0) continue;
    addresses[count] = address;
    queries[count].address = lookup - bias;
    count++;
  }
  if (count == 0) return false;
  frame->module = 0;
  frame->address = addresses[0];
  frame->name[0] = '\0';

  crumbs__elf_file file = {.fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), .bytes = NULL, .size = 0};
  if (file.fd < 0) return true;
  struct stat status;
  crumbs__elf_strings strings;
  if (fstat(file.fd, &status) == 0 && status.st_size > 0) {
    file.size = (uint64_t)status.st_size;
    if (crumbs__elf_symbols_find(&file, queries, count, &strings)) {
      // The first named frame that is not Crumbs' own; if every named one is, the first frame.
      char name[CRUMBS__TERMINATION_NAME_SIZE];
      bool chosen = false;
      for (uint32_t index = 0; index < count && !chosen; index++) {
        if (!queries[index].found) {
          // Unnamed (a stripped part of the table): it cannot be told from ours; it is the
          // app's top frame as far as can be known.
          frame->address = addresses[index];
          chosen = true;
          break;
        }
        if (crumbs__elf_symbol_name(&file, &strings, queries[index].name_offset, name, sizeof name) == 0 ||
            crumbs__symbol_is_crumbs(name)) {
          continue;
        }
        frame->address = addresses[index];
        crumbs__format_copy(frame->name, sizeof frame->name, name);
        chosen = true;
      }
      if (!chosen && queries[0].found) {
        crumbs__elf_symbol_name(&file, &strings, queries[0].name_offset, frame->name, sizeof frame->name);
      }
    }
  }
  close(file.fd);
  return true;
}

/// The part of `path` after its last '/'. Pure.
static const char *crumbs__basename(const char *path) {
  const char *base = path;
  for (const char *cursor = path; *cursor != '\0'; cursor++) {
    if (*cursor == '/') base = cursor + 1;
  }
  return base;
}

/// Appends the Swift runtime's message from the record: control characters (its trailing
/// newline among them) as spaces, runs of spaces as one, sensitive pairs' values and URLs'
/// userinfo redacted, at most CRUMBS__TERMINATION_MESSAGE_SIZE bytes, "..." when cut; only
/// "[message withheld]" when the redaction keys did not fit. Pure but for the redaction rules.
static size_t crumbs__append_swift_message(char *line, size_t capacity, size_t used,
                                           const crumbs_crash_message *message) {
  uint32_t length = message->swift_length;
  if (length > CRUMBS_CRASH_SWIFT_MESSAGE_SIZE) length = CRUMBS_CRASH_SWIFT_MESSAGE_SIZE;
  char text[CRUMBS__TERMINATION_MESSAGE_SIZE + 4];
  size_t kept = 0;
  bool space = true, cut = false;
  for (uint32_t index = 0; index < length; index++) {
    char c = message->swift_message[index];
    if ((unsigned char)c < 0x20 || c == 0x7f) c = ' ';
    if (c == ' ' && space) continue;
    if (kept == CRUMBS__TERMINATION_MESSAGE_SIZE) {
      cut = true;
      break;
    }
    text[kept++] = c;
    space = c == ' ';
  }
  while (kept > 0 && text[kept - 1] == ' ') kept--;
  if (kept == 0) return used;
  // Keys that did not fit cannot redact it: left out, never written as it is.
  if (crumbs__redact_withholds()) return crumbs__format_append(line, capacity, used, "; [message withheld]");
  // Sensitive pairs' values out (crumbs_redact.c): "[redacted]" may be longer than a value.
  char redacted[CRUMBS__TERMINATION_MESSAGE_SIZE + 4];
  bool redaction_cut = false;
  kept = crumbs__redact_pairs(text, kept, redacted, CRUMBS__TERMINATION_MESSAGE_SIZE, &redaction_cut);
  cut = cut || redaction_cut;
  for (size_t index = 0; index < kept; index++) text[index] = redacted[index];
  if (cut || (message->swift_flags & CRUMBS_CRASH_MESSAGE_TRUNCATED)) {
    text[kept++] = '.';
    text[kept++] = '.';
    text[kept++] = '.';
  }
  text[kept] = '\0';
  used = crumbs__format_append(line, capacity, used, "; ");
  return crumbs__format_append(line, capacity, used, text);
}

/// Formats the line (without its "\n") into `line`. Safe to call from a signal handler.
static size_t crumbs__termination_format(const crumbs_crash_record *record, char *line, size_t capacity) {
  const crumbs__module_table modules = crumbs__module_table_of(record);
  char signal_name[24];
  crumbs_signal_name_text(record->signal_number, signal_name, sizeof signal_name);
  size_t used = crumbs__format_copy(line, capacity, "Crumbs: ");
  used = crumbs__format_append(line, capacity, used, signal_name);

  crumbs__termination_frame frame;
  bool known = crumbs__termination_app_frame(record, &frame);
  if (!known && record->frame_count > 0) {
    frame.address = record->frames[0];
    frame.module = crumbs__modules_for_text(&modules, frame.address);
    frame.name[0] = '\0';
    known = true;
  }
  if (known) {
    if (frame.name[0] != '\0') {
      char readable[CRUMBS__TERMINATION_NAME_SIZE];
      const char *shown = frame.name;
      if (crumbs__swift_name_simplify(frame.name, readable, sizeof readable) > 0) shown = readable;
      used = crumbs__format_append(line, capacity, used, " in ");
      used = crumbs__format_append(line, capacity, used, shown);
      used = crumbs__format_append(line, capacity, used, " (");
    } else {
      used = crumbs__format_append(line, capacity, used, " at ");
    }
    if (frame.module >= 0 && (uint32_t)frame.module < CRUMBS_CRASH_MAX_MODULES) {
      const crumbs_crash_module *module = &record->modules[frame.module];
      char path[CRUMBS_CRASH_PATH_SIZE];
      crumbs__format_copy(path, sizeof path, module->path); // NUL-terminated even if damaged
      used = crumbs__format_append(line, capacity, used, crumbs__basename(path));
      used = crumbs__format_append(line, capacity, used, "+");
      used = crumbs__format_append_hex(line, capacity, used, frame.address - module->load_bias);
    } else {
      used = crumbs__format_append_hex(line, capacity, used, frame.address);
    }
    if (frame.name[0] != '\0') used = crumbs__format_append(line, capacity, used, ")");
  }
  used = crumbs__format_append(line, capacity, used, "; report ");
  used = crumbs__format_append_uuid(line, capacity, used, record->session_id);
  return crumbs__append_swift_message(line, capacity, used, &record->message);
}

void crumbs__termination_message_write(const crumbs_crash_record *record) {
  int fd = __atomic_load_n(&crumbs__termination_fd, __ATOMIC_ACQUIRE);
  if (fd < 0 || record == NULL) return;
  char line[CRUMBS_TERMINATION_MESSAGE_MAX];
  // Room for the "\n" after what the formatter cuts to fit.
  size_t used = crumbs__termination_format(record, line, sizeof line - 1);
  line[used++] = '\n';
  ssize_t written;
  do {
    written = write(fd, line, used);
  } while (written < 0 && errno == EINTR);
}
