// crumbs_test_requests.c — hostile answers to `crumbs threads` and a pid reused on cue (see
// crumbs_test_requests.h). Test-only.
//
// ASYNC-SIGNAL-SAFE: crumbs_test_request_handler (write); the child of
// crumbs_test_spawn_with_pid (rt_sigaction, rt_sigprocmask, ppoll through raw syscalls).
#define _GNU_SOURCE
#include "crumbs_test_requests.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int crumbs_test_request_pipe = -1;

static void crumbs_test_request_handler(int signal_number, siginfo_t *info, void *context) {
  (void)signal_number;
  (void)context;
  int saved = errno;
  uint32_t cookie = (uint32_t)info->si_value.sival_int;
  if (write(crumbs_test_request_pipe, &cookie, sizeof cookie) < 0) {
    // Nothing to do: the test sees no plant and fails on its own.
  }
  errno = saved;
}

int crumbs_test_catch_requests(int signal_number) {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return -1;
  crumbs_test_request_pipe = ends[1];
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs_test_request_handler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, NULL) != 0) return -1;
  return ends[0];
}

int64_t crumbs_test_next_request(int fd) {
  uint32_t cookie;
  size_t have = 0;
  while (have < sizeof cookie) {
    ssize_t got = read(fd, (char *)&cookie + have, sizeof cookie - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    have += (size_t)got;
  }
  return cookie;
}

int crumbs_test_watch_opens(const char *path) {
  int fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fanotify_mark(fd, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, path) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int crumbs_test_allow_open(int fd, int event_fd) {
  struct fanotify_response response = {.fd = event_fd, .response = FAN_ALLOW};
  ssize_t written = write(fd, &response, sizeof response);
  close(event_fd);
  return written == (ssize_t)sizeof response ? 0 : -1;
}

int crumbs_test_next_open(int fd, int ignored_pid, int timeout_ms, int *pid, int *event_fd) {
  for (;;) {
    struct pollfd waiting = {.fd = fd, .events = POLLIN};
    int ready = poll(&waiting, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return ready;
    char buffer[4096] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    int found = 0;
    struct fanotify_event_metadata *event = (struct fanotify_event_metadata *)buffer;
    for (; FAN_EVENT_OK(event, got); event = FAN_EVENT_NEXT(event, got)) {
      if (event->fd < 0) continue;
      if (!found && event->pid != ignored_pid) {
        found = 1;
        *pid = event->pid;
        *event_fd = event->fd;
      } else {
        crumbs_test_allow_open(fd, event->fd);
      }
    }
    if (found) return 1;
  }
}

// clone3's argument (Linux 5.5 layout, with set_tid), spelled out for older headers.
struct crumbs_test_clone_args {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  uint64_t set_tid, set_tid_size, cgroup;
};

int crumbs_test_spawn_with_pid(int pid, int signal_number) {
  pid_t wanted = pid;
  struct crumbs_test_clone_args arguments;
  memset(&arguments, 0, sizeof arguments);
  arguments.exit_signal = SIGCHLD;
  arguments.set_tid = (uint64_t)(uintptr_t)&wanted;
  arguments.set_tid_size = 1;
  long result = syscall(SYS_clone3, &arguments, sizeof arguments);
  if (result != 0) return (int)result; // the parent (the child's pid), or -1 with errno
  // The child: a copy of a multithreaded process, so raw system calls only.
  struct {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
  } action = {SIG_DFL, 0, NULL, 0};
  syscall(SYS_rt_sigaction, signal_number, &action, NULL, 8);
  uint64_t none = 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
  for (;;) syscall(SYS_ppoll, NULL, 0, NULL, NULL, 0);
}

int crumbs_test_reap_if_ended(int pid) {
  int status = 0;
  pid_t result = waitpid(pid, &status, WNOHANG);
  return result == pid ? status : -1;
}
