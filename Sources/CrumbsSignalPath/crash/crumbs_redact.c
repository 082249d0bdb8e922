// crumbs_redact.c — the one implementation of the pair rule: the values of sensitive
// `key=value` and `key: value` pairs, and URLs' userinfo, in free text. Two users: the crash
// handler on the termination line's message, and the reports' redaction (CrumbsRecorder's
// PairRedaction), so the line and the report never disagree. Fails closed: keys that do not fit
// the handler's storage leave the message withheld. Design: docs/crash-capture.md#redaction
//
// Entry points, in call order:
//   crumbs_redaction_keys_prepare   keys normalized into the caller's storage (both users)
//   crumbs_termination_message_set_redaction  (set-up) the handler's keys, into static storage,
//                                 while no descriptor is published
//   crumbs_redact_pairs           a text's pairs with the keys given (the reports)
//   crumbs__redact_pairs          [crash] the message's pairs with the handler's keys, into a
//                                 stack buffer
//
// ASYNC-SIGNAL-SAFE: crumbs_redaction_keys_prepare, crumbs_redact_pairs, crumbs__redact_pairs
// (no libc call at all: loops over bytes). Set-up functions are not meant for a handler.

#include "crash/crumbs_redact.h"
#include "crumbs_termination_message.h"

#include <stdbool.h>
#include <stddef.h>

/// The handler's keys, prepared (crumbs_redaction_keys_prepare).
static char crumbs__redact_keys[CRUMBS_TERMINATION_REDACTION_KEYS_MAX + 1];
/// Whether the handler redacts URLs' userinfo.
static bool crumbs__redact_urls;
/// Whether the keys given did not fit: the message must not be written.
static bool crumbs__redact_withheld;

static const char crumbs__redact_replacement[] = "[redacted]";
#define CRUMBS__REDACT_REPLACEMENT_LENGTH (sizeof crumbs__redact_replacement - 1)

/// ASCII lowercase, `-` as `_`: how keys are compared. Pure.
static char crumbs__redact_normalized(char c) {
  if (c == '-') return '_';
  return c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
}

size_t crumbs_redaction_keys_prepare(const char *keys, size_t length, char *out, size_t capacity) {
  // Checked whole first: a list that does not fit leaves no key.
  // The bytes kept, a NUL after the last key when the list lacks it, and the list's end.
  size_t needed = 1;
  for (size_t index = 0; index < length; index++) {
    if (keys[index] != '\0' || (index > 0 && keys[index - 1] != '\0')) needed++;
  }
  if (length > 0 && keys[length - 1] != '\0') needed++;
  if (capacity == 0) return needed;
  size_t used = 0;
  if (needed <= capacity) {
    for (size_t index = 0; index < length; index++) {
      // Empty keys (two NULs in a row, or a NUL first) are left out: they would match anything.
      if (keys[index] == '\0' && (used == 0 || out[used - 1] == '\0')) continue;
      out[used++] = crumbs__redact_normalized(keys[index]);
    }
    if (used > 0 && out[used - 1] != '\0') out[used++] = '\0';
  }
  out[used] = '\0';
  return needed;
}

bool crumbs_termination_message_set_redaction(const char *keys, size_t length, bool urls) {
  crumbs__redact_urls = urls;
  // A list that does not fit leaves no key, and the message is withheld (the caller says so).
  size_t needed =
      crumbs_redaction_keys_prepare(keys, length, crumbs__redact_keys, sizeof crumbs__redact_keys);
  crumbs__redact_withheld = needed > sizeof crumbs__redact_keys;
  return !crumbs__redact_withheld;
}

bool crumbs__redact_withholds(void) { return crumbs__redact_withheld; }

static bool crumbs__redact_is_blank(char c) { return c == ' ' || c == '\t'; }
static bool crumbs__redact_is_quote(char c) { return c == '"' || c == '\''; }
static bool crumbs__redact_is_key_byte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' ||
         c == '.';
}
/// Where an unquoted value ends: blanks, line ends, `& , ;`, quotes, closing brackets, `< >`.
static bool crumbs__redact_is_delimiter(char c) {
  switch (c) {
  case ' ':
  case '\t':
  case '\n':
  case '\r':
  case '&':
  case ',':
  case ';':
  case '"':
  case '\'':
  case ')':
  case ']':
  case '}':
  case '<':
  case '>': return true;
  default: return false;
  }
}

static bool crumbs__redact_is_alphanumeric(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool crumbs__redact_is_opening(char c) { return c == '(' || c == '[' || c == '{'; }
static bool crumbs__redact_is_closing(char c) { return c == ')' || c == ']' || c == '}'; }

/// Whether `text[at..<length]` starts with the NUL-terminated `prefix`. Pure.
static bool crumbs__redact_starts_with(const char *text, size_t length, size_t at, const char *prefix) {
  for (size_t offset = 0; prefix[offset] != '\0'; offset++) {
    if (at + offset >= length || text[at + offset] != prefix[offset]) return false;
  }
  return true;
}

/// The userinfo of a URL whose "://" is at `colon` (after a scheme's letter or digit), as
/// [*start, *end): from after the "//" to the authority's last '@' (a password may hold a raw
/// '@'), the authority ending at '/', '?', '#' or a delimiter. False when there is none, or it is
/// redacted already. Pure.
static bool crumbs__redact_userinfo(const char *text, size_t length, size_t colon, size_t *start,
                                    size_t *end) {
  if (colon == 0 || !crumbs__redact_is_alphanumeric(text[colon - 1]) || colon + 2 >= length ||
      text[colon + 1] != '/' || text[colon + 2] != '/') {
    return false;
  }
  size_t first = colon + 3, at = 0;
  bool found = false;
  for (size_t cursor = first; cursor < length; cursor++) {
    char c = text[cursor];
    if (c == '/' || c == '?' || c == '#' || crumbs__redact_is_delimiter(c)) break;
    if (c == '@') {
      at = cursor;
      found = true;
    }
  }
  if (!found || at == first) return false;
  if (at - first == CRUMBS__REDACT_REPLACEMENT_LENGTH &&
      crumbs__redact_starts_with(text, length, first, crumbs__redact_replacement)) {
    return false;
  }
  *start = first;
  *end = at;
  return true;
}

/// Where the bracket opened before `inside` closes: brackets of any kind counted, double-quoted
/// strings (with backslash escapes) skipped; `length` when it never closes. Pure.
static size_t crumbs__redact_balanced_end(const char *text, size_t length, size_t inside) {
  size_t depth = 1;
  for (size_t index = inside; index < length; index++) {
    char c = text[index];
    if (c == '"') {
      index++;
      while (index < length && text[index] != '"') index += text[index] == '\\' ? 2 : 1;
      if (index >= length) return length;
    } else if (crumbs__redact_is_opening(c)) {
      depth++;
    } else if (crumbs__redact_is_closing(c)) {
      if (--depth == 0) return index;
    }
  }
  return length;
}

/// Whether `text[0..<length]` holds `wanted` (a normalized key, NUL-terminated), compared normalized.
static bool crumbs__redact_contains(const char *text, size_t length, const char *wanted) {
  size_t wanted_length = 0;
  while (wanted[wanted_length] != '\0') wanted_length++;
  if (wanted_length == 0 || wanted_length > length) return false;
  for (size_t start = 0; start + wanted_length <= length; start++) {
    size_t offset = 0;
    while (offset < wanted_length && crumbs__redact_normalized(text[start + offset]) == wanted[offset])
      offset++;
    if (offset == wanted_length) return true;
  }
  return false;
}

/// Whether the key `text[0..<length]` contains one of `keys` (prepared).
static bool crumbs__redact_key_matches(const char *keys, const char *text, size_t length) {
  for (const char *key = keys; *key != '\0';) {
    if (crumbs__redact_contains(text, length, key)) return true;
    while (*key != '\0') key++;
    key++;
  }
  return false;
}

/// Whether the word `text[0..<length]` is an HTTP authentication scheme (IANA registry) whose
/// credential follows after one space.
static bool crumbs__redact_is_scheme(const char *text, size_t length) {
  static const char *const schemes[] = {"bearer", "basic", "digest", "negotiate", "ntlm",
                                        "token",  "hoba",  "mutual", "dpop",      "aws4_hmac_sha256"};
  for (size_t index = 0; index < sizeof schemes / sizeof schemes[0]; index++) {
    size_t scheme_length = 0;
    while (schemes[index][scheme_length] != '\0') scheme_length++;
    if (scheme_length == length && crumbs__redact_contains(text, length, schemes[index])) return true;
  }
  return false;
}

/// The value after a separator at `from` (see the file's comment), as [*start, *end); false
/// when it is empty or already redacted.
static bool crumbs__redact_value(const char *text, size_t length, size_t from, bool to_end, size_t *start,
                                 size_t *end) {
  size_t first = from;
  while (first < length && crumbs__redact_is_blank(text[first])) first++;
  // Swift's description of an optional (`Optional("x")`, nested too).
  while (crumbs__redact_starts_with(text, length, first, "Optional(")) first += sizeof "Optional(" - 1;
  if (first >= length) return false;
  if (crumbs__redact_starts_with(text, length, first, crumbs__redact_replacement)) return false;
  // Quoted: `"a b"`, `'a b'`, `\"a b\"` (escaped JSON inside a message).
  size_t quote_length = 0;
  char quote = 0;
  if (crumbs__redact_is_quote(text[first])) {
    quote = text[first];
    quote_length = 1;
  } else if (text[first] == '\\' && first + 1 < length && crumbs__redact_is_quote(text[first + 1])) {
    quote = text[first + 1];
    quote_length = 2;
  }
  if (quote_length > 0) {
    size_t inside = first + quote_length, cursor = inside;
    while (cursor < length) {
      if (quote_length == 1 ? text[cursor] == quote
                            : (text[cursor] == '\\' && cursor + 1 < length && text[cursor + 1] == quote)) {
        break;
      }
      // A backslash escapes the next byte in an unescaped quoted string.
      cursor += quote_length == 1 && text[cursor] == '\\' ? 2 : 1;
    }
    if (cursor > length) cursor = length;
    if (cursor <= inside) return false;
    *start = inside;
    *end = cursor;
    return true;
  }
  size_t cursor = first;
  if (to_end) {
    while (cursor < length && text[cursor] != '\n' && text[cursor] != '\r') cursor++;
  } else if (crumbs__redact_is_opening(text[first])) {
    size_t inside = first + 1;
    cursor = crumbs__redact_balanced_end(text, length, inside);
    if (cursor <= inside) return false;
    if (cursor - inside == CRUMBS__REDACT_REPLACEMENT_LENGTH &&
        crumbs__redact_starts_with(text, length, inside, crumbs__redact_replacement)) {
      return false;
    }
    first = inside;
  } else {
    while (cursor < length && !crumbs__redact_is_delimiter(text[cursor])) cursor++;
    if (cursor == first) return false;
    if (crumbs__redact_is_scheme(text + first, cursor - first) && cursor + 1 < length &&
        text[cursor] == ' ' && !crumbs__redact_is_delimiter(text[cursor + 1])) {
      cursor++;
      while (cursor < length && !crumbs__redact_is_delimiter(text[cursor])) cursor++;
    }
  }
  *start = first;
  *end = cursor;
  return true;
}

/// Appends `length` bytes to `out`, as many as fit; sets `*cut` when some did not.
static size_t crumbs__redact_append(char *out, size_t capacity, size_t used, const char *bytes, size_t length,
                                    bool *cut) {
  for (size_t index = 0; index < length; index++) {
    if (used >= capacity) {
      *cut = true;
      return used;
    }
    out[used++] = bytes[index];
  }
  return used;
}

size_t crumbs_redact_pairs(const char *keys, bool urls, const char *text, size_t length, char *out,
                           size_t capacity, bool *cut) {
  size_t used = 0, copied = 0;
  *cut = false;
  if (text == NULL || length == 0) return 0;
  for (size_t index = 0; index < length; index++) {
    char c = text[index];
    // The separator, and where its value starts.
    size_t value_from;
    if (c == '=') {
      value_from = index + 1 < length && text[index + 1] == '>' ? index + 2 : index + 1;
    } else if (c == ':') {
      size_t user_start, user_end;
      if (urls && crumbs__redact_userinfo(text, length, index, &user_start, &user_end)) {
        used = crumbs__redact_append(out, capacity, used, text + copied, user_start - copied, cut);
        used = crumbs__redact_append(out, capacity, used, crumbs__redact_replacement,
                                     CRUMBS__REDACT_REPLACEMENT_LENGTH, cut);
        copied = user_end;
        index = user_end - 1;
        continue;
      }
      // `::` is a scope (C++, Swift's demangled names), not a pair.
      if ((index + 1 < length && text[index + 1] == ':') || (index > 0 && text[index - 1] == ':')) continue;
      value_from = index + 1;
    } else if (c == '-' && index + 1 < length && text[index + 1] == '>') {
      value_from = index + 2;
    } else {
      continue;
    }
    if (keys == NULL || keys[0] == '\0') continue;
    // The key: the word before the separator, past blanks and a closing quote (`"token": …`,
    // `\"token\":…` inside escaped JSON).
    size_t key_end = index;
    while (key_end > copied && crumbs__redact_is_blank(text[key_end - 1])) key_end--;
    if (key_end > copied && crumbs__redact_is_quote(text[key_end - 1])) key_end--;
    if (key_end > copied && text[key_end - 1] == '\\') key_end--;
    size_t key_start = key_end;
    while (key_start > copied && crumbs__redact_is_key_byte(text[key_start - 1])) key_start--;
    if (key_start == key_end || !crumbs__redact_key_matches(keys, text + key_start, key_end - key_start))
      continue;
    size_t value_start, value_end;
    bool cookie = crumbs__redact_contains(text + key_start, key_end - key_start, "cookie");
    if (!crumbs__redact_value(text, length, value_from, cookie, &value_start, &value_end)) continue;
    used = crumbs__redact_append(out, capacity, used, text + copied, value_start - copied, cut);
    used = crumbs__redact_append(out, capacity, used, crumbs__redact_replacement,
                                 CRUMBS__REDACT_REPLACEMENT_LENGTH, cut);
    copied = value_end;
    if (value_end > index + 1) index = value_end - 1;
  }
  return crumbs__redact_append(out, capacity, used, text + copied, length - copied, cut);
}

size_t crumbs__redact_pairs(const char *text, size_t length, char *out, size_t capacity, bool *cut) {
  return crumbs_redact_pairs(crumbs__redact_keys, crumbs__redact_urls, text, length, out, capacity, cut);
}
