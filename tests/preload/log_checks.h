// Expectations that compare a report with what a single-threaded test application logged.
#pragma once

#include "test_support.h"

#include <string>
#include <vector>

namespace preload_test {

/// Indices of the report's blocks in allocation order, leaving out a null block of size 0
/// (a successful cudaMalloc(&p, 0) returns a null pointer; the tests do not require memguard to
/// record or to skip it).
std::vector<size_t> nonnull_blocks(const memguard::report::Report& report);

/// Expects the report to hold exactly the logged allocations, in order (address, size, kind, api,
/// device, stream), each freed by the logged free (api) or live at the end when the log has no
/// free for it, and the file's F records (less those undone by R) to match the logged frees in
/// order (address, size, api, stream).
void expect_report_matches_log(const memguard::report::Report& report, const std::string& report_path,
                               const AppLog& log);

/// Expects the stack of each logged allocation's block to contain the function that logged it,
/// inside a module whose path ends with `module_suffix` (any module when empty).
void expect_stacks_name_functions(const memguard::report::Report& report, const AppLog& log,
                                  const std::string& module_suffix = "");

}  // namespace preload_test
