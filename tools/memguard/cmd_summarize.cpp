// memguard summarize FILE...: writes the rank summary of each report beside it,
// FILE.summary.json (rank_summary.h, docs/rank-summary.md), for reports that `memguard run` did
// not summarize (a job preloaded by hand or through `memguard env`, a report copied from elsewhere).
#include <iostream>

#include "cli.h"
#include "common/text.h"
#include "output.h"
#include "rank_summary.h"
#include "report/units.h"

namespace memguard::cli {

int run_summarize(const Args& args) {
    int rc = kExitOk;
    for (const std::string& file : args.files) {
        try {
            const std::string path = write_rank_summary(file);
            print("wrote %s\n", path.c_str());
        } catch (const report::ReportError& e) {
            // One unreadable report does not stop the others; the status says some failed.
            std::cout.flush();
            std::cerr << "memguard: error: " << text::printable(e.what()) << "\n";
            rc = kExitUsage;
        }
    }
    return rc;
}

}  // namespace memguard::cli
