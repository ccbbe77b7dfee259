#!/usr/bin/env python3
"""The reader at scale (issue 23; docs/benchmarks.md): wall time and peak RSS of the CLI's commands on
reports of 10^6, 10^7 (and 10^8) events, before (an older memguard CLI) and after (this one), side
by side.

The reports come from bench/report_churn.cpp under the preloaded library over the fake runtime:
cudaMalloc/cudaFree pairs from 8 sites, a ring of LIVE blocks each live for LIVE pairs and 16 blocks
that live to the end, so the live set is the same at every length and a reader bounded by it keeps
the same RSS (--ooms N: N failed cudaMalloc calls of more than the device holds spread through it,
out-of-memory E records for oom and summary to explain and count). Arms are interleaved (before,
after, before, after, ...) so that load on the shared machine falls on both; each cell is the median of the repetitions, and the ratio's spread is the
range of the per-repetition ratios.

  bench/report_scale.py --before OLD/memguard --after build/bin/memguard \\
      [--lib build/lib/libmemguard.so] [--churn build/bin/memguard_bench_report_churn] \\
      [--events 1e6,1e7] [--reps 3] [--steps-every N] [--ooms 0] [--pipe] [--dir /tmp/report_scale] [--keep]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def run_timed(cmd, pipes=()):
    """Runs cmd under /usr/bin/time; returns (seconds, peak RSS in MiB, exit status). Each argument of
    cmd that is in `pipes` is given as a pipe instead (bash's <(cat FILE)): read once, as
    `memguard summary <(zcat r.mgr.gz)` reads it."""
    fmt = "MEMGUARD_BENCH %e %M"
    if pipes:
        import shlex
        line = " ".join("<(cat %s)" % shlex.quote(x) if x in pipes else shlex.quote(x) for x in cmd)
        cmd = ["bash", "-c", "exec " + line]
    p = subprocess.run(["/usr/bin/time", "-f", fmt] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = [l for l in p.stderr.splitlines() if l.startswith("MEMGUARD_BENCH ")][-1].split()
    return float(line[1]), int(line[2]) / 1024.0, p.returncode


def add_steps(text_path, out_path, every):
    """Copies a text report with an s record (a training step's end, memguard.step()'s) after every
    `every` A or F records, at that record's time: steps need Python (the optimizer hooks or
    memguard.step()), which the churn does not run."""
    step = 0
    seen = 0
    with open(text_path) as src, open(out_path, "w") as dst:
        for line in src:
            dst.write(line)
            if line[:2] in ("A ", "F "):
                seen += 1
                if seen % every == 0:
                    step += 1
                    dst.write("s %s 1 %d api churn\n" % (line.split(" ", 2)[1], step))


def make_report(args, events, path, encoding):
    pairs = events // 2
    t0 = time.time()
    churn_path = path + ".churn" if args.steps_every else path
    churn_encoding = "text" if args.steps_every else encoding
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(args.lib), MEMGUARD_OUTPUT=churn_path,
               MEMGUARD_REPORT_ENCODING=churn_encoding)
    churn = [args.churn, str(pairs), str(args.live)] + ([str(args.ooms)] if args.ooms else [])
    subprocess.run(churn, env=env, check=True)
    if args.steps_every:
        text_path = path + ".text" if encoding == "binary" else path
        add_steps(churn_path, text_path, args.steps_every)
        os.remove(churn_path)
        if encoding == "binary":  # the newer CLI transcodes (`export --binary`)
            subprocess.run([args.after, "export", "--binary", text_path, "-o", path], check=True,
                           stdout=subprocess.DEVNULL)
            os.remove(text_path)
    return time.time() - t0


def commands(report, end_s):
    mid = "%.3f" % (end_s / 2)
    return [
        ("summary", ["summary", report]),
        ("top --at peak", ["top", report, "--at", "peak"]),
        ("top --at exit", ["top", report, "--at", "exit"]),
        ("top --at T (mid-run)", ["top", report, "--at", mid]),
        ("top --by category", ["top", report, "--by", "category"]),
        ("phases", ["phases", report]),
        ("steps", ["steps", report]),
        ("cycles", ["cycles", report]),
        ("oom", ["oom", report]),
        ("diff A A", ["diff", report, report]),
        ("merge A A", ["merge", report, report]),
    ]


def end_seconds(cli, report):
    out = subprocess.run([cli, "summary", "--json", report], capture_output=True, text=True, check=True).stdout
    import json

    return json.loads(out)["duration_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the older memguard CLI")
    ap.add_argument("--after", required=True, help="the memguard CLI measured")
    ap.add_argument("--lib", default="build/lib/libmemguard.so")
    ap.add_argument("--churn", default="build/bin/memguard_bench_report_churn")
    ap.add_argument("--events", default="1e6,1e7", help="comma-separated event counts (an event: an A or F record)")
    ap.add_argument("--live", type=int, default=1000, help="blocks in the churn's ring")
    ap.add_argument("--ooms", type=int, default=0,
                    help="out-of-memory failures spread through the churn (E records: what oom explains)")
    ap.add_argument("--encoding", choices=("text", "binary"), default="text",
                    help="the reports' encoding (text: what a CLI from before the binary encoding reads)")
    ap.add_argument("--after-encoding", choices=("text", "binary"), default=None,
                    help="the after arm reads the same churn in this encoding instead (the before arm reads "
                         "--encoding's): an old CLI on text against the new one on its binary default")
    ap.add_argument("--steps-every", type=int, default=0,
                    help="add an s record (a step's end) after every N A or F records, so that `steps` and the "
                         "rank summary's steps have rows to fold (0: none, the churn as recorded)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated command names to run (default: all)")
    ap.add_argument("--after-only-from", type=float, default=0,
                    help="from this many events up, run only the after arm (the before arm's RSS would not fit)")
    ap.add_argument("--pipe", action="store_true",
                    help="give each command its report as a pipe (<(cat REPORT)), which it can read only once")
    ap.add_argument("--dir", default="/tmp/report_scale")
    ap.add_argument("--keep", action="store_true", help="keep the reports")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    print("# %s, %s; before %s, after %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.uname().nodename,
                                            args.before, args.after))
    print("| events | report | command | before s | after s | after/before time (range) | events/s after | before RSS MiB | after RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in args.events.split(","):
        events = int(float(spec))
        reports = {}
        for arm, encoding in (("before", args.encoding), ("after", args.after_encoding or args.encoding)):
            steps = ".steps%d" % args.steps_every if args.steps_every else ""
            ooms = ".ooms%d" % args.ooms if args.ooms else ""
            reports[arm] = os.path.join(args.dir, "churn.%d%s%s.%s.mgr" % (events, steps, ooms, encoding))
            if not os.path.exists(reports[arm]):
                secs = make_report(args, events, reports[arm], encoding)
                print("generated %s (%d events) in %.1f s" % (reports[arm], events, secs), file=sys.stderr)
        report = reports["after"]
        size_mb = os.path.getsize(report) / 1e6
        end_s = end_seconds(args.after, report)
        arms = [("after", args.after)] if args.after_only_from and events >= args.after_only_from else [
            ("before", args.before), ("after", args.after)]
        only = set(x.strip() for x in args.only.split(",") if x.strip())
        for name, argv in commands(report, end_s):
            if only and name not in only:
                continue
            res = {a: [] for a, _ in arms}
            for _ in range(args.reps):
                for arm, cli in arms:
                    secs, rss, rc = run_timed([cli] + [reports[arm] if x == report else x for x in argv],
                                              (reports[arm],) if args.pipe else ())
                    res[arm].append((secs, rss, rc))
            def med(arm, i):
                return statistics.median(x[i] for x in res[arm]) if arm in res else None
            b_t, a_t = med("before", 0), med("after", 0)
            b_m, a_m = med("before", 1), med("after", 1)
            if b_t is not None:
                ratios = [a[0] / b[0] for a, b in zip(res["after"], res["before"]) if b[0] > 0]
                ratio = "%.2f (%.2f-%.2f)" % (statistics.median(ratios), min(ratios), max(ratios))
            else:
                ratio = "-"
            rcs = sorted(set(x[2] for arm in res for x in res[arm]))
            note = "" if rcs == [0] else " (exit %s)" % ",".join(map(str, rcs))
            print("| %.0e | %.0f MB | %s%s | %s | %.2f | %s | %.2g | %s | %.0f |" % (
                events, size_mb, name, note, "-" if b_t is None else "%.2f" % b_t, a_t, ratio,
                events / a_t if a_t else 0, "-" if b_m is None else "%.0f" % b_m, a_m))
            sys.stdout.flush()
        if not args.keep:
            for path in set(reports.values()):
                os.remove(path)
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
