// crumbs_terminate.cpp — the std::terminate handler: what an uncaught C++ exception was.
//
// Why C++: the exception's what() is reachable only by rethrowing it and catching
// std::exception, which needs the C++ runtime (libstdc++, which libswiftCore links already).
// Why a terminate handler: by the time abort() raises SIGABRT, the exception object is
// unreachable from a signal handler; std::terminate runs first, on the throwing thread, with the
// exception still current. Entry points and who reads what: crumbs_terminate.h.
//
// What it records (into crumbs__crash_uncaught, pre-allocated): the exception's type as
// type_info::name() gives it (mangled, "St13runtime_error": demangling allocates, so the report
// builder demangles it later) and, for a std::exception, what(); both copied with a bound and
// flagged when cut. Only the first terminating thread records. Then the previous handler runs
// (libstdc++'s verbose handler prints the same and calls abort()); if it returns, abort().
//
// NOT A SIGNAL HANDLER, but allocation-free anyway (a terminate after std::bad_alloc must still
// be recorded): __cxa_current_exception_type, a rethrow and catch of the current exception
// (no allocation: the exception object exists), what(), plain stores. Re-entry (a previous
// handler that chains back to us) goes straight to abort().

#include "crash/crumbs_terminate.h"

#include <cstdlib>
#include <cxxabi.h>
#include <exception>
#include <typeinfo>

extern "C" {
crumbs_crash_message crumbs__crash_uncaught;
}

namespace {

std::terminate_handler crumbs_previous_terminate = nullptr;
bool crumbs_terminate_saved = false;
int crumbs_terminate_claimed = 0; // atomic: the first terminating thread records
thread_local bool crumbs_terminate_running = false;

/// Copies at most `capacity` bytes of `text` up to its NUL; reads one byte past what it copied
/// only to learn whether the text goes on (that byte is the text's own, or its NUL).
uint32_t copy_bounded(char *destination, uint32_t capacity, const char *text, bool *truncated) {
  uint32_t length = 0;
  *truncated = false;
  if (text == nullptr) return 0;
  while (length < capacity && text[length] != '\0') {
    destination[length] = text[length];
    length++;
  }
  *truncated = length == capacity && text[length] != '\0';
  return length;
}

void record_uncaught_exception() noexcept {
  std::type_info *type = abi::__cxa_current_exception_type();
  if (type == nullptr) return; // std::terminate without an exception (or a foreign one)
  int expected = 0;
  if (!__atomic_compare_exchange_n(&crumbs_terminate_claimed, &expected, 1, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return;
  }
  crumbs_crash_message *message = &crumbs__crash_uncaught;
  uint32_t flags = CRUMBS_CRASH_CXX_EXCEPTION;
  bool truncated = false;
  message->cxx_type_length =
      copy_bounded(message->cxx_type, CRUMBS_CRASH_CXX_TYPE_SIZE, type->name(), &truncated);
  if (truncated) flags |= CRUMBS_CRASH_MESSAGE_TRUNCATED;
  try {
    throw; // the current exception, to learn whether it is a std::exception
  } catch (const std::exception &error) {
    message->cxx_what_length =
        copy_bounded(message->cxx_what, CRUMBS_CRASH_CXX_WHAT_SIZE, error.what(), &truncated);
    flags |= CRUMBS_CRASH_CXX_HAS_WHAT;
    if (truncated) flags |= CRUMBS_CRASH_CXX_WHAT_TRUNCATED;
  } catch (...) {
  }
  __atomic_store_n(&message->cxx_flags, flags, __ATOMIC_RELEASE);
}

[[noreturn]] void crumbs_terminate() {
  if (!crumbs_terminate_running) {
    crumbs_terminate_running = true;
    record_uncaught_exception();
    std::terminate_handler previous = crumbs_previous_terminate;
    if (previous != nullptr) previous();
  }
  std::abort();
}

} // namespace

extern "C" void crumbs__terminate_install(void) {
  if (std::get_terminate() == crumbs_terminate) return;
  std::terminate_handler replaced = std::set_terminate(crumbs_terminate);
  // A re-assert after another library replaced ours keeps the original previous handler: that
  // library probably chains to ours, and chaining back to it would loop.
  if (!crumbs_terminate_saved) {
    crumbs_previous_terminate = replaced;
    crumbs_terminate_saved = true;
  }
}

extern "C" void crumbs__terminate_uninstall(void) {
  if (std::get_terminate() == crumbs_terminate && crumbs_terminate_saved) {
    std::set_terminate(crumbs_previous_terminate);
  }
}
