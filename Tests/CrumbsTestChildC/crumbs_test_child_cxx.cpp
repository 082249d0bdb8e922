// Test-only C++ for the crash scenarios: an uncaught exception, and terminate handlers around
// the crash handler's own (see include/crumbs_test_child.h).
#include "crumbs_test_child.h"

#include <cstdlib>
#include <exception>
#include <stdexcept>

namespace crumbs_test {
/// An application's own exception type, to show its demangled name in a report.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
} // namespace crumbs_test

namespace {
std::terminate_handler replaced_by_arming = nullptr;

[[noreturn]] void terminate_plainly() { std::abort(); }

[[noreturn]] void arm_guard_then_chain() {
  crumbs_test_arm_malloc_guard();
  if (replaced_by_arming != nullptr) replaced_by_arming();
  std::abort();
}
} // namespace

extern "C" void crumbs_test_cxx_throw(int kind, const char *what) {
  if (kind == 1) throw 42;
  throw crumbs_test::Failure(what);
}

extern "C" void crumbs_test_cxx_terminate_plainly(void) { std::set_terminate(terminate_plainly); }

extern "C" void crumbs_test_cxx_arm_guard_in_terminate(void) {
  replaced_by_arming = std::set_terminate(arm_guard_then_chain);
}
