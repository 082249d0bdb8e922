// Test-only: threads parked in known functions (see crumbs_test_parked.h).

#define _GNU_SOURCE
#include "crumbs_test_parked.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static int crumbs__parked_ready[2] = {-1, -1}; // each thread writes a byte before it blocks
static int crumbs__parked_never[2] = {-1, -1}; // nobody writes here: reads block for good
static pthread_mutex_t crumbs__parked_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t crumbs__parked_condition = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) int crumbs_test_parked_reader(int descriptor) {
  char byte = 'r';
  (void)!write(crumbs__parked_ready[1], &byte, 1);
  while (read(descriptor, &byte, 1) != 0) {
  }
  // Work after the call: no tail call, so this frame stays on the stack.
  __asm__ volatile("" : "+r"(byte)::"memory");
  return byte;
}

__attribute__((noinline)) int crumbs_test_parked_waiter(int tag) {
  char byte = 'w';
  pthread_mutex_lock(&crumbs__parked_mutex);
  (void)!write(crumbs__parked_ready[1], &byte, 1);
  while (1) pthread_cond_wait(&crumbs__parked_condition, &crumbs__parked_mutex);
  __asm__ volatile("" : "+r"(tag)::"memory");
  return tag;
}

static void *crumbs__parked_main(void *argument) {
  if ((intptr_t)argument == 0) {
    pthread_setname_np(pthread_self(), "parked-reader");
    crumbs_test_parked_reader(crumbs__parked_never[0]);
  } else {
    pthread_setname_np(pthread_self(), "parked-waiter");
    crumbs_test_parked_waiter(7);
  }
  return NULL;
}

int crumbs_test_start_parked_threads(void) {
  if (pipe(crumbs__parked_ready) != 0 || pipe(crumbs__parked_never) != 0) return -1;
  for (intptr_t index = 0; index < 2; index++) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, crumbs__parked_main, (void *)index) != 0) return -1;
    pthread_detach(thread);
  }
  for (int answered = 0; answered < 2;) {
    char byte;
    ssize_t count = read(crumbs__parked_ready[0], &byte, 1);
    if (count == 1) answered++;
    if (count == 0) return -1;
  }
  return 0;
}
