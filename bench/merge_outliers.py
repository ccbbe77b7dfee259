#!/usr/bin/env python3
"""How long `memguard merge` takes to find the outlier ranks of a fleet from rank summaries
(docs/rank-summary.md): the 1024 synthetic summaries of the test report.rank_outliers
(tests/report/synthetic_summaries.py: three planted outliers), merged N times.

    bench/merge_outliers.py build/bin/memguard [--ranks 1024] [--repeats 5] [--fat]

--fat gives every site 12 frames of 200 characters (as deep C++ stacks with long symbols do), so
that each summary is near the largest a real one gets. --unique-sites gives every rank sites of
its own (no site matches across ranks: the most figures to compare, 12 per rank); the planted
ranks are then looked for among the peak's and categories' outliers only.

Prints each run's wall time, the minimum, median and maximum, the peak RSS of the slowest run,
and checks that every run named the three planted ranks.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "report"))
import synthetic_summaries  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--fat", action="store_true")
    ap.add_argument("--unique-sites", action="store_true")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="mgbench-outliers.")
    try:
        planted = synthetic_summaries.write_fleet(d, args.ranks)
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        for n, f in enumerate(files):
            if not (args.fat or args.unique_sites):
                break
            with open(f) as fh:
                s = json.load(fh)
            for site in s["sites_at_peak"]["top"]:
                if args.fat:
                    site["frames"] = (site["frames"] + [f"libdeep.so {site['label']} " + "x" * 200] * 12)[:12]
                    site["frames"] = [fr[:200] + str(k) for k, fr in enumerate(site["frames"])]
                if args.unique_sites:
                    site["frames"] = site["frames"] + [f"librank.so rank_{n}"]
            with open(f, "w") as fh:
                json.dump(s, fh, indent=1)
        size = sum(os.path.getsize(f) for f in files)
        print(f"{len(files)} summaries, {size / len(files) / 1024:.1f} KiB each on average")
        times = []
        for i in range(args.repeats):
            start = time.perf_counter()
            p = subprocess.run([args.cli, "merge", "--json"] + files, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if p.returncode != 0:
                sys.exit(f"merge failed: {p.stderr}")
            merged = json.loads(p.stdout)["outliers"]
            found = sorted(int(o["rank"]) for o in merged["ranks"]
                           if not args.unique_sites or any(x["figure"] != "site" for x in o["figures"]))
            if found != planted:
                sys.exit(f"merge found {found}, planted {planted}")
            print(f"run {i + 1}: {times[-1]:.3f} s ({merged['figures']} figures)")
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"wall: min {min(times):.3f} s, median {statistics.median(times):.3f} s, max {max(times):.3f} s; "
              f"peak RSS {rss / 1024:.1f} MiB; outliers found: {planted}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
