// crumbs_format.c — text into caller buffers (see crumbs_format.h for the contract).
//
// ASYNC-SIGNAL-SAFE: everything in this file. No libc calls, no static state, no allocation.

#include "kit/crumbs_format.h"

size_t crumbs__format_length(const char *text) {
  size_t length = 0;
  if (text == NULL) return 0;
  while (text[length] != '\0') length++;
  return length;
}

size_t crumbs__format_append(char *buffer, size_t capacity, size_t length, const char *text) {
  if (capacity == 0) return 0;
  if (length >= capacity) length = capacity - 1;
  if (text != NULL) {
    while (*text != '\0' && length + 1 < capacity) buffer[length++] = *text++;
  }
  buffer[length] = '\0';
  return length;
}

size_t crumbs__format_copy(char *buffer, size_t capacity, const char *text) {
  return crumbs__format_append(buffer, capacity, 0, text);
}

size_t crumbs__format_append_decimal(char *buffer, size_t capacity, size_t length, int64_t value) {
  // Digits come out least significant first: build them backwards from the end of `digits`.
  char digits[21]; // "-9223372036854775808" and the NUL
  size_t start = sizeof digits - 1;
  digits[start] = '\0';
  uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
  do {
    digits[--start] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (value < 0) digits[--start] = '-';
  return crumbs__format_append(buffer, capacity, length, &digits[start]);
}

size_t crumbs__format_append_hex(char *buffer, size_t capacity, size_t length, uint64_t value) {
  char digits[19]; // "0x", 16 digits, the NUL
  size_t start = sizeof digits - 1;
  digits[start] = '\0';
  do {
    digits[--start] = "0123456789abcdef"[value & 15u];
    value >>= 4;
  } while (value != 0);
  digits[--start] = 'x';
  digits[--start] = '0';
  return crumbs__format_append(buffer, capacity, length, &digits[start]);
}

size_t crumbs__format_append_uuid(char *buffer, size_t capacity, size_t length, const uint8_t bytes[16]) {
  char text[37]; // 32 digits, 4 dashes, the NUL
  size_t used = 0;
  for (size_t index = 0; index < 16; index++) {
    if (index == 4 || index == 6 || index == 8 || index == 10) text[used++] = '-';
    text[used++] = "0123456789abcdef"[bytes[index] >> 4];
    text[used++] = "0123456789abcdef"[bytes[index] & 15u];
  }
  text[used] = '\0';
  return crumbs__format_append(buffer, capacity, length, text);
}
