// memguard compact FILE [--through N]: folds a bounded report's older detail parts into figures
// (report/fold.h, docs/bounded-reports.md).
#include "cli.h"
#include "output.h"
#include "report/fold.h"

namespace memguard::cli {

int run_compact(const Args& args) {
    const report::CompactResult r = report::compact_report(args.file, args.through);
    print("%s\n", r.message.c_str());
    return kExitOk;
}

}  // namespace memguard::cli
