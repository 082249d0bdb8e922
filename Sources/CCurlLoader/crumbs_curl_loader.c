// crumbs_curl_loader.c — see include/crumbs_curl_loader.h.

#include "crumbs_curl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

typedef int (*setopt_fn)(void *, int, ...);

static struct {
  int (*global_init)(long);
  void *(*easy_init)(void);
  void (*easy_cleanup)(void *);
  setopt_fn easy_setopt;
  int (*easy_perform)(void *);
  void *(*slist_append)(void *, const char *);
  void (*slist_free_all)(void *);
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure;
static char load_failure_text[512];

static void *symbol(void *library, const char *name) {
  void *address = dlsym(library, name);
  if (address == NULL && load_failure == NULL) {
    snprintf(load_failure_text, sizeof load_failure_text, "libcurl.so.4 has no %s", name);
    load_failure = load_failure_text;
  }
  return address;
}

static void load(void) {
  // RTLD_LOCAL: curl's symbols stay out of the global namespace, as they were never linked.
  void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char *reason = dlerror();
    snprintf(load_failure_text, sizeof load_failure_text, "cannot load libcurl.so.4 (%s)",
             reason ? reason : "not found");
    load_failure = load_failure_text;
    return;
  }
  curl.global_init = (int (*)(long))symbol(library, "curl_global_init");
  curl.easy_init = (void *(*)(void))symbol(library, "curl_easy_init");
  curl.easy_cleanup = (void (*)(void *))symbol(library, "curl_easy_cleanup");
  curl.easy_setopt = (setopt_fn)symbol(library, "curl_easy_setopt");
  curl.easy_perform = (int (*)(void *))symbol(library, "curl_easy_perform");
  curl.slist_append = (void *(*)(void *, const char *))symbol(library, "curl_slist_append");
  curl.slist_free_all = (void (*)(void *))symbol(library, "curl_slist_free_all");
  if (load_failure != NULL) return;
  // CURL_GLOBAL_DEFAULT; once, here, because curl_easy_init would otherwise do it without a lock
  // on versions whose global init is not thread-safe.
  int code = curl.global_init(3);
  if (code != 0) {
    snprintf(load_failure_text, sizeof load_failure_text, "curl_global_init failed (%d)", code);
    load_failure = load_failure_text;
  }
}

const char *crumbs_curl_load(void) {
  pthread_once(&load_once, load);
  return load_failure;
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

long crumbs_curl_perform(void *handle) { return curl.easy_perform(handle); }

void *crumbs_curl_slist_append(void *list, const char *value) { return curl.slist_append(list, value); }
void crumbs_curl_slist_free_all(void *list) { curl.slist_free_all(list); }
