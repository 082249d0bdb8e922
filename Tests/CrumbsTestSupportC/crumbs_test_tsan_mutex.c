// Test-only, and only in a thread-sanitizer build (`make tsan`): lets the sanitizer see
// Synchronization.Mutex's contended lock and unlock, which it otherwise cannot.
//
// On Linux a Mutex is a futex word. Its fast paths (one compare-exchange to lock, one to unlock)
// are inlined into our code and instrumented; its slow paths are not: _lockSlow spins with its
// own compare-exchange, then calls FUTEX_LOCK_PI (the kernel hands the lock over), _unlockSlow
// calls FUTEX_UNLOCK_PI, both inside libswiftSynchronization, built without the sanitizer. A
// contended lock is therefore taken without any acquire the sanitizer sees, and the next holder's
// access to the value is reported as racing with the last holder's. Seen: four threads each
// running `withLock { $0 += 1 }` 200,000 times end at exactly 800,000 and are reported all the
// same (DeliveryLock.held, BreadcrumbRing.openInThisProcess, ForkedSessionReaper.rings in the
// tests). Rather than suppress every report on every Mutex, which would also hide a real race
// on what a Mutex guards, this defines the three slow paths in the executable (its definitions
// come first in symbol lookup), forwards each to libswiftSynchronization's, and tells the
// sanitizer what it did: an acquire of the futex word after a lock, a release before an unlock.
// The fast paths already acquire and release that same word, so every hand-over is seen.
//
// Each is a Swift method on _MutexHandle: `self` (the futex word's address) in the Swift self
// register, which clang's swift_context parameter is; _lockSlow's thread id is its only argument.
// A toolchain whose library no longer has these symbols stops the run with a message, rather
// than leave the sanitizer blind again.
#if defined(__linux__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void __tsan_acquire(void *address);
void __tsan_release(void *address);

#define CRUMBS_TEST_LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define CRUMBS_TEST_TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"
#define CRUMBS_TEST_UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"

typedef __attribute__((swiftcall)) void (*crumbs_test_lock_fn)(uint32_t thread_id,
                                                               __attribute__((swift_context)) void *word);
typedef __attribute__((swiftcall)) bool (*crumbs_test_try_fn)(__attribute__((swift_context)) void *word);
typedef __attribute__((swiftcall)) void (*crumbs_test_unlock_fn)(__attribute__((swift_context)) void *word);

/// libswiftSynchronization's definition of `name`, found once (a race between two first calls
/// finds the same address twice).
static void *crumbs_test_next(void **cache, const char *name) {
  void *found = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (found != NULL) return found;
  found = dlsym(RTLD_NEXT, name);
  if (found == NULL) {
    fprintf(stderr,
            "crumbs_test_tsan_mutex.c: libswiftSynchronization has no %s: update this file for "
            "this toolchain's Mutex\n",
            name);
    abort();
  }
  __atomic_store_n(cache, found, __ATOMIC_RELEASE);
  return found;
}

static void *crumbs_test_next_lock_slow;
static void *crumbs_test_next_try_lock_slow;
static void *crumbs_test_next_unlock_slow;

__attribute__((swiftcall)) void crumbs_test_mutex_lock_slow(
    uint32_t thread_id, __attribute__((swift_context)) void *word) __asm__(CRUMBS_TEST_LOCK_SLOW);
__attribute__((swiftcall)) bool crumbs_test_mutex_try_lock_slow(
    __attribute__((swift_context)) void *word) __asm__(CRUMBS_TEST_TRY_LOCK_SLOW);
__attribute__((swiftcall)) void crumbs_test_mutex_unlock_slow(
    __attribute__((swift_context)) void *word) __asm__(CRUMBS_TEST_UNLOCK_SLOW);

__attribute__((swiftcall)) void crumbs_test_mutex_lock_slow(uint32_t thread_id,
                                                            __attribute__((swift_context)) void *word) {
  crumbs_test_lock_fn next =
      (crumbs_test_lock_fn)crumbs_test_next(&crumbs_test_next_lock_slow, CRUMBS_TEST_LOCK_SLOW);
  next(thread_id, word);
  __tsan_acquire(word);
}

__attribute__((swiftcall)) bool crumbs_test_mutex_try_lock_slow(__attribute__((swift_context)) void *word) {
  crumbs_test_try_fn next =
      (crumbs_test_try_fn)crumbs_test_next(&crumbs_test_next_try_lock_slow, CRUMBS_TEST_TRY_LOCK_SLOW);
  bool taken = next(word);
  if (taken) __tsan_acquire(word);
  return taken;
}

__attribute__((swiftcall)) void crumbs_test_mutex_unlock_slow(__attribute__((swift_context)) void *word) {
  crumbs_test_unlock_fn next =
      (crumbs_test_unlock_fn)crumbs_test_next(&crumbs_test_next_unlock_slow, CRUMBS_TEST_UNLOCK_SLOW);
  __tsan_release(word);
  next(word);
}
#endif
#endif
