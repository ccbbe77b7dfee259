// Keeping errno as the host left it: what memguard does inside a host's call (a record, a lookup,
// a lock registration) must not change the errno the host sees after the call.
#pragma once

#include <cerrno>

namespace memguard {

class ErrnoKeeper {
public:
    ErrnoKeeper() : saved_(errno) {}
    ~ErrnoKeeper() { errno = saved_; }
    ErrnoKeeper(const ErrnoKeeper&) = delete;
    ErrnoKeeper& operator=(const ErrnoKeeper&) = delete;

private:
    int saved_;
};

}  // namespace memguard
