// crumbs_curl_loader.h — libcurl's easy interface, loaded with dlopen at the first request, so
// that nothing links libcurl (and its TLS, Kerberos, LDAP… libraries) until a report is sent.
// CurlTransport (CrumbsDelivery) is the only user. Typed wrappers stand for the variadic
// curl_easy_setopt, which Swift cannot call.
//
// The option and info numbers are libcurl's (curl/curl.h), stable across its versions; the
// library is not needed to build, only to send.
// Entry points: crumbs_curl_acquire → crumbs_curl_easy_init → crumbs_curl_setopt_* →
// crumbs_curl_perform → crumbs_curl_easy_cleanup → crumbs_curl_release; then, once the caller
// has nothing more to send for a while, crumbs_curl_unload_if_unused (the next acquire loads
// it again). crumbs_curl_load only loads (to ask whether libcurl is there).
//
// Which library: libcurl.so.4, or the file the CRUMBS_LIBCURL environment variable names (read
// with secure_getenv at each try: a test hides libcurl with a path where none is, or a machine
// points at one outside the linker's search path). A library that is not there is looked for
// again at the next crumbs_curl_load, so one installed while the program runs is used.
// Before libcurl's global init, OpenSSL (when libcurl uses it) is initialised without its exit
// hook, so a short-lived program's exit never tears TLS down under the uploader's thread
// (crumbs_curl_loader.c, docs/platform-facts.md).
// Not signal-safe.

#ifndef CRUMBS_CURL_LOADER_H
#define CRUMBS_CURL_LOADER_H

#include <stddef.h>
#include <stdint.h>

/// A curl_write_callback, curl_read_callback or header callback: all three have this shape.
typedef size_t (*crumbs_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);
/// A curl_xferinfo_callback (7.32 or later): totals and counts so far, each way; non-zero aborts
/// the transfer (CURLE_ABORTED_BY_CALLBACK).
typedef int (*crumbs_curl_progress_callback)(void *context, int64_t download_total, int64_t downloaded,
                                             int64_t upload_total, int64_t uploaded);

enum {
  CRUMBS_CURLOPT_WRITEDATA = 10001,
  CRUMBS_CURLOPT_URL = 10002,
  CRUMBS_CURLOPT_READDATA = 10009,
  CRUMBS_CURLOPT_WRITEFUNCTION = 20011,
  CRUMBS_CURLOPT_READFUNCTION = 20012,
  /// The idle bound before 7.32 (no CURLOPT_XFERINFOFUNCTION).
  CRUMBS_CURLOPT_LOW_SPEED_LIMIT = 19,
  CRUMBS_CURLOPT_LOW_SPEED_TIME = 20,
  CRUMBS_CURLOPT_HTTPHEADER = 10023,
  CRUMBS_CURLOPT_HEADERDATA = 10029,
  CRUMBS_CURLOPT_NOPROGRESS = 43,
  CRUMBS_CURLOPT_XFERINFODATA = 10057,
  CRUMBS_CURLOPT_CUSTOMREQUEST = 10036,
  CRUMBS_CURLOPT_POST = 47,
  CRUMBS_CURLOPT_FOLLOWLOCATION = 52,
  CRUMBS_CURLOPT_SSL_VERIFYPEER = 64,
  CRUMBS_CURLOPT_HEADERFUNCTION = 20079,
  CRUMBS_CURLOPT_XFERINFOFUNCTION = 20219,
  CRUMBS_CURLOPT_SSL_VERIFYHOST = 81,
  CRUMBS_CURLOPT_NOSIGNAL = 99,
  CRUMBS_CURLOPT_POSTFIELDSIZE_LARGE = 30120,
  CRUMBS_CURLOPT_TIMEOUT_MS = 155,
  CRUMBS_CURLOPT_CONNECTTIMEOUT_MS = 156,
  /// Deprecated since 7.85 for CURLOPT_PROTOCOLS_STR, which older versions lack.
  CRUMBS_CURLOPT_PROTOCOLS = 181,
  CRUMBS_CURLOPT_PROTOCOLS_STR = 10318,
  /// 7.54 or later.
  CRUMBS_CURLOPT_SUPPRESS_CONNECT_HEADERS = 265,
};

enum {
  CRUMBS_CURLPROTO_HTTP = 1 << 0,
  CRUMBS_CURLPROTO_HTTPS = 1 << 1,
};

/// CURLcode values the transport tells apart.
enum {
  CRUMBS_CURLE_OK = 0,
  CRUMBS_CURLE_UNSUPPORTED_PROTOCOL = 1,
  CRUMBS_CURLE_URL_MALFORMAT = 3,
  CRUMBS_CURLE_COULDNT_RESOLVE_PROXY = 5,
  CRUMBS_CURLE_COULDNT_RESOLVE_HOST = 6,
  CRUMBS_CURLE_COULDNT_CONNECT = 7,
  CRUMBS_CURLE_WEIRD_SERVER_REPLY = 8,
  CRUMBS_CURLE_HTTP2 = 16,
  CRUMBS_CURLE_PARTIAL_FILE = 18,
  CRUMBS_CURLE_WRITE_ERROR = 23,
  CRUMBS_CURLE_OPERATION_TIMEDOUT = 28,
  CRUMBS_CURLE_ABORTED_BY_CALLBACK = 42,
  CRUMBS_CURLE_UNKNOWN_OPTION = 48,
  CRUMBS_CURLE_GOT_NOTHING = 52,
  CRUMBS_CURLE_SEND_ERROR = 55,
  CRUMBS_CURLE_RECV_ERROR = 56,
  CRUMBS_CURLE_HTTP2_STREAM = 92,
  CRUMBS_CURLE_HTTP3 = 95,
};

/// The library file crumbs_curl_load opens: CRUMBS_LIBCURL if set (and not empty), else
/// "libcurl.so.4".
const char *crumbs_curl_library_name(void);

/// Loads libcurl and initialises it. Thread-safe. 0 when it is usable (kept loaded until
/// crumbs_curl_unload_if_unused); otherwise -1 and why not in `why` (dlerror's text, a missing
/// symbol; cut to `size` bytes). A library that could not be opened is tried again at the next
/// call; one that opened but is unusable is not.
int crumbs_curl_load(char *why, size_t size);

/// crumbs_curl_load, and on success counts one more user: libcurl stays loaded until a matching
/// crumbs_curl_release. Thread-safe.
int crumbs_curl_acquire(char *why, size_t size);
/// Ends one crumbs_curl_acquire's use (its easy handles already cleaned up).
void crumbs_curl_release(void);
/// When libcurl is loaded and no acquire is outstanding: curl_global_cleanup, then dlclose
/// (libraries linked with -z nodelete, OpenSSL 3 and p11-kit on Debian 12, stay mapped).
/// Returns 1 when it unloaded. Thread-safe.
int crumbs_curl_unload_if_unused(void);
/// Never unload libcurl from now on: a request ended while its name lookup may still run. With
/// the threaded resolver, curl_easy_cleanup detaches a lookup thread that has not finished, and
/// that thread returns into libcurl's code once getaddrinfo does: unmapped, it would crash.
void crumbs_curl_keep_loaded(void);

/// The wrappers below may be called only between crumbs_curl_acquire returning 0 and the
/// matching crumbs_curl_release.
void *crumbs_curl_easy_init(void);
void crumbs_curl_easy_cleanup(void *handle);
long crumbs_curl_setopt_long(void *handle, long option, long value);
long crumbs_curl_setopt_pointer(void *handle, long option, const void *value);
long crumbs_curl_setopt_offset(void *handle, long option, int64_t value);
long crumbs_curl_setopt_callback(void *handle, long option, crumbs_curl_data_callback value);
/// CURLOPT_XFERINFOFUNCTION.
long crumbs_curl_setopt_progress(void *handle, crumbs_curl_progress_callback value);
long crumbs_curl_perform(void *handle);
/// curl_slist_append / curl_slist_free_all on an opaque list (NULL is the empty list).
void *crumbs_curl_slist_append(void *list, const char *value);
void crumbs_curl_slist_free_all(void *list);

#endif
