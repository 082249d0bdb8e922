// crumbs_curl_loader.c — see include/crumbs_curl_loader.h.

#ifndef _GNU_SOURCE
#define _GNU_SOURCE // secure_getenv
#endif
#include "crumbs_curl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*setopt_fn)(void *, int, ...);

static struct {
  int (*global_init)(long);
  void (*global_cleanup)(void);
  void *(*easy_init)(void);
  void (*easy_cleanup)(void *);
  setopt_fn easy_setopt;
  int (*easy_perform)(void *);
  void *(*slist_append)(void *, const char *);
  void (*slist_free_all)(void *);
} curl;

// Guards everything below: a load may be tried again, from any thread.
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
// 1 while libcurl is loaded and initialised (crumbs_curl_unload_if_unused ends that).
static int loaded;
// The library's handle while loaded, and the requests using it now (acquire/release).
static void *library_handle;
static int users;
// 1 once a request may have left a thread running libcurl's code (crumbs_curl_keep_loaded):
// from then on libcurl is never unloaded.
static int kept;
// 1 when the library was found but cannot be used (a symbol missing, curl_global_init failed):
// trying again would not change that, and the library stays mapped.
static int unusable;
static char failure[512];

static void *symbol(void *library, const char *name) {
  void *address = dlsym(library, name);
  if (address == NULL && !unusable) {
    snprintf(failure, sizeof failure, "%s has no %s", crumbs_curl_library_name(), name);
    unusable = 1;
  }
  return address;
}

const char *crumbs_curl_library_name(void) {
  // secure_getenv: a set-user-ID program never loads a library its caller names.
  const char *named = secure_getenv("CRUMBS_LIBCURL");
  return named != NULL && named[0] != '\0' ? named : "libcurl.so.4";
}

// OpenSSL's initialisation (libcurl's global init runs it) registers OPENSSL_cleanup with
// atexit unless told not to. That hook runs before every exit hook registered earlier (the
// application's, Crumbs' own) while other threads still run — the uploader's thread can be in
// the middle of a TLS exchange when a short-lived program returns from main — and frees what
// they use: a crash at exit, in a process that did nothing wrong (openssl/openssl#6214, #10016).
// Initialising it first with OPENSSL_INIT_NO_ATEXIT keeps it usable until the process ends; the
// kernel frees its memory then. Only the first initialisation's options count: a program that
// initialised OpenSSL itself before the first upload keeps its own choice. A libcurl built on
// another TLS library has no OPENSSL_init_crypto among its dependencies: nothing to do.
// dlsym on libcurl's handle searches libcurl and the libraries it depends on
// (docs/platform-facts.md, "Dynamic loading").
static void keep_tls_through_exit(void *library) {
  int (*init_crypto)(uint64_t, const void *) =
      (int (*)(uint64_t, const void *))dlsym(library, "OPENSSL_init_crypto");
  if (init_crypto != NULL) (void)init_crypto(0x00080000u, NULL); // OPENSSL_INIT_NO_ATEXIT
}

// Called with load_lock held, while neither loaded nor unusable.
static void load(void) {
  // RTLD_LOCAL: curl's symbols stay out of the global namespace, as they were never linked.
  void *library = dlopen(crumbs_curl_library_name(), RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char *reason = dlerror();
    snprintf(failure, sizeof failure, "cannot load %s (%s)", crumbs_curl_library_name(),
             reason ? reason : "not found");
    return; // not installed (yet): the next call looks again
  }
  curl.global_init = (int (*)(long))symbol(library, "curl_global_init");
  curl.global_cleanup = (void (*)(void))symbol(library, "curl_global_cleanup");
  curl.easy_init = (void *(*)(void))symbol(library, "curl_easy_init");
  curl.easy_cleanup = (void (*)(void *))symbol(library, "curl_easy_cleanup");
  curl.easy_setopt = (setopt_fn)symbol(library, "curl_easy_setopt");
  curl.easy_perform = (int (*)(void *))symbol(library, "curl_easy_perform");
  curl.slist_append = (void *(*)(void *, const char *))symbol(library, "curl_slist_append");
  curl.slist_free_all = (void (*)(void *))symbol(library, "curl_slist_free_all");
  if (unusable) return;
  keep_tls_through_exit(library);
  // CURL_GLOBAL_DEFAULT; once, here, because curl_easy_init would otherwise do it without a lock
  // on versions whose global init is not thread-safe.
  int code = curl.global_init(3);
  if (code != 0) {
    snprintf(failure, sizeof failure, "curl_global_init failed (%d)", code);
    unusable = 1;
    return;
  }
  library_handle = library;
  loaded = 1;
}

int crumbs_curl_load(char *why, size_t size) {
  pthread_mutex_lock(&load_lock);
  if (!loaded && !unusable) load();
  int usable = loaded;
  if (!usable && why != NULL && size > 0) snprintf(why, size, "%s", failure);
  pthread_mutex_unlock(&load_lock);
  return usable ? 0 : -1;
}

int crumbs_curl_acquire(char *why, size_t size) {
  pthread_mutex_lock(&load_lock);
  if (!loaded && !unusable) load();
  int usable = loaded;
  if (usable) {
    users += 1;
  } else if (why != NULL && size > 0) {
    snprintf(why, size, "%s", failure);
  }
  pthread_mutex_unlock(&load_lock);
  return usable ? 0 : -1;
}

void crumbs_curl_release(void) {
  pthread_mutex_lock(&load_lock);
  if (users > 0) users -= 1;
  pthread_mutex_unlock(&load_lock);
}

int crumbs_curl_unload_if_unused(void) {
  pthread_mutex_lock(&load_lock);
  int unloaded = 0;
  if (loaded && users == 0 && !kept) {
    // No easy handle is left (each request cleans its own up before it releases), so the global
    // cleanup frees what curl_global_init made; dlclose then unmaps libcurl and the libraries
    // only it needed. Those linked with -z nodelete (OpenSSL 3, p11-kit) stay mapped.
    curl.global_cleanup();
    (void)dlclose(library_handle);
    library_handle = NULL;
    memset(&curl, 0, sizeof curl);
    loaded = 0;
    unloaded = 1;
  }
  pthread_mutex_unlock(&load_lock);
  return unloaded;
}

void crumbs_curl_keep_loaded(void) {
  pthread_mutex_lock(&load_lock);
  kept = 1;
  pthread_mutex_unlock(&load_lock);
}

void *crumbs_curl_easy_init(void) { return curl.easy_init(); }
void crumbs_curl_easy_cleanup(void *handle) { curl.easy_cleanup(handle); }

long crumbs_curl_setopt_long(void *handle, long option, long value) {
  return curl.easy_setopt(handle, (int)option, value);
}

long crumbs_curl_setopt_pointer(void *handle, long option, const void *value) {
  return curl.easy_setopt(handle, (int)option, value);
}

long crumbs_curl_setopt_offset(void *handle, long option, int64_t value) {
  // curl_off_t is a 64-bit integer on every platform libcurl supports.
  return curl.easy_setopt(handle, (int)option, (long long)value);
}

long crumbs_curl_setopt_callback(void *handle, long option, crumbs_curl_data_callback value) {
  return curl.easy_setopt(handle, (int)option, value);
}

long crumbs_curl_setopt_progress(void *handle, crumbs_curl_progress_callback value) {
  return curl.easy_setopt(handle, CRUMBS_CURLOPT_XFERINFOFUNCTION, value);
}

long crumbs_curl_perform(void *handle) { return curl.easy_perform(handle); }

void *crumbs_curl_slist_append(void *list, const char *value) { return curl.slist_append(list, value); }
void crumbs_curl_slist_free_all(void *list) { curl.slist_free_all(list); }
