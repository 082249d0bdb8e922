#!/usr/bin/env python3
"""Run a command and write its peak resident set size, as the kernel counts it (wait4's
ru_maxrss), to a file: for tests that bound how much memory `crumbs` uses.

Usage: peak_rss.py OUT_FILE COMMAND [ARGS...]
  OUT_FILE  receives the peak RSS in bytes
  The command's stdin, stdout and stderr are this script's; the exit status is the command's
  (128 + signal when a signal ended it). The command dies with this script (PR_SET_PDEATHSIG).

Why not wait4 in the test process itself: posix_spawn starts children with vfork, and on exec
the kernel folds the spawner's own peak RSS into the child's ru_maxrss, so a child of a large
test runner would seem as large as the runner. A child fork()ed from this small interpreter
starts from its size instead (about 10 MB).
"""
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main():
    out, argv = sys.argv[1], sys.argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    with open(out, "w") as f:
        f.write(str(usage.ru_maxrss * 1024))
    if os.WIFSIGNALED(status):
        sys.exit(128 + os.WTERMSIG(status))
    sys.exit(os.WEXITSTATUS(status))


if __name__ == "__main__":
    main()
