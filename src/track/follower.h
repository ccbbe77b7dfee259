// The follower of a bounded report (docs/bounded-reports.md, "The follower"): `memguard compact
// --follow --detach REPORT`, which folds the report's detail parts into `REPORT.fold-N` as they
// close, so that the parts the writer deletes to keep MEMGUARD_MAX_REPORT_SIZE have their figures
// kept. The writer thread starts it at the report's first rotation (never a hook: posix_spawn and
// a wait for the first child, which exits at once, its child going on in a session of its own).
#pragma once

#include <string>
#include <sys/types.h>

namespace memguard::track {

/// The memguard program the follower runs: `configured` (MEMGUARD_CLI) when given, else `memguard`
/// in ../bin beside the library that holds this code (build/lib and build/bin; the wheel's
/// memguard/_native/lib and _native/bin). "" when it is not an executable file, and `why` says what
/// was looked for.
std::string find_follower_cli(const std::string& configured, std::string& why);

/// Starts `cli compact --follow --detach SPINE` for the report whose spine file is open as
/// `spine_fd` (its path taken from /proc/self/fd: absolute, whatever directory the host is in by
/// then): stdin and stdout on /dev/null, stderr the host's, no signal blocked or caught, and an empty
/// environment (no LD_PRELOAD: memguard must not preload itself into its follower, and no MEMGUARD_*
/// variable). Returns the pid of the child it spawned, reaped (the first child of --detach exits once
/// it has forked the follower) or still to reap with reap_follower(); -1 with `error` set when it
/// cannot be started.
pid_t start_follower(const std::string& cli, int spine_fd, std::string& error);

/// Reaps the spawned child `pid` when it has exited, waiting up to `wait_ms`. True when it is gone
/// (reaped, or not this process's child any more); `status` gets its wait status when reaped here.
bool reap_follower(pid_t pid, int wait_ms, int& status);

}  // namespace memguard::track
