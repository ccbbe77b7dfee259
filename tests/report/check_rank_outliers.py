#!/usr/bin/env python3
"""Rank summaries and `memguard merge`'s outlier ranks (docs/rank-summary.md).

    check_rank_outliers.py CLI GOLDEN_DIR

- 1024 synthetic rank summaries with three planted outliers (synthetic_summaries.py): merge names
  exactly those three, each with the figures that diverged; identical ranks and small differences
  name none; of two ranks, the heavier is named where the two differ by more than the floor.
- Summaries that are not summaries: one error naming the file and the field, exit 2.
- `memguard summarize` on golden reports (copied): each summary is small and says what summary,
  top, steps and oom say of the report; merge reads them instead of the reports, with the same
  output as from the reports.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synthetic_summaries as syn  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def run(cli, *args, rc=0, cwd=None):
    p = subprocess.run([cli] + list(args), capture_output=True, text=True, cwd=cwd)
    check(p.returncode == rc, f"memguard {' '.join(args[:4])}...: exit {p.returncode}, expected {rc}; "
                              f"stderr: {p.stderr[-2000:]}")
    return p


def outlier_ranks(merged):
    return {o["rank"]: o["figures"] for o in merged["outliers"]["ranks"]} if merged["outliers"] else None


def check_fleet(cli, tmp):
    d = os.path.join(tmp, "fleet")
    os.mkdir(d)
    planted = syn.write_fleet(d, 1024)
    files = sorted(os.path.join(d, f) for f in os.listdir(d))
    merged = json.loads(run(cli, "merge", "--json", *files).stdout)
    found = outlier_ranks(merged)
    check(sorted(found, key=int) == [str(r) for r in planted], f"1024 ranks: outliers {sorted(found)}, planted {planted}")
    check(merged["outliers"]["ranks_compared"] == 1024, "1024 ranks compared")
    check(all(r["from_summary"] for r in merged["ranks"]), "every rank read from its summary")

    def names(rank):
        return {(f["figure"], f["name"]) for f in found.get(rank, [])}

    check({("category", "nccl"), ("site", "libnccl.so.2 ncclCuMemAlloc"), ("peak", "tensors")} <= names("7"),
          f"rank 7 diverged in nccl, its site and its peak: {names('7')}")
    check({("category", "activation"), ("site", "forward at model.py:88")} <= names("300"),
          f"rank 300 diverged in activations at model.py:88: {names('300')}")
    check(("site", "cache_batch at train.py:120") in names("1000"), f"rank 1000's own site: {names('1000')}")
    nccl = [f for f in found.get("7", []) if f["figure"] == "category"][0]
    check(nccl["bytes"] == int(8.8 * syn.GiB) and abs(nccl["median_bytes"] - 1.2 * syn.GiB) < 0.02 * syn.GiB,
          f"rank 7's nccl figures: {nccl}")
    text = run(cli, "merge", *files).stdout
    check("3 outlier ranks of 1024" in text, "the text says how many outlier ranks")
    check("  rank 7: nccl 8.80 GiB against a median of 1.20 GiB; " in text, "rank 7's line names NCCL first")
    check("site libnccl.so.2 ncclCuMemAlloc 8.80 GiB against a median of 1.20 GiB" in text, "rank 7's NCCL site")
    # A rank lists its 12 largest sites of more: one it does not list counts as its smallest listed.
    check("  rank 1000: " in text and "site cache_batch at train.py:120 3.00 GiB against a median of 32.00 MiB" in text,
          "rank 1000's site")
    check(text.count("\n  rank ") == 3, "three outlier lines")


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def check_quiet_fleets(cli, tmp):
    d = os.path.join(tmp, "quiet")
    os.mkdir(d)
    base = syn.rank_summary(0, __import__("random").Random(1))
    same = [write(os.path.join(d, f"same{r}.summary.json"), dict(base, rank=r)) for r in range(5)]
    merged = json.loads(run(cli, "merge", "--json", *same).stdout)
    check(outlier_ranks(merged) == {}, f"identical ranks: no outlier ({outlier_ranks(merged)})")
    check("no outlier rank (5 ranks;" in run(cli, "merge", *same).stdout, "identical ranks: the text says none")
    # 100 MiB more NCCL on one rank of 5 with equal others: under the 256 MiB floor.
    small = json.loads(json.dumps(base))
    small["rank"] = 4
    for c in small["categories_at_peak"]:
        if c["name"] == "nccl":
            c["bytes"] += 100 * syn.MiB
    small["peak"]["bytes"] += 100 * syn.MiB
    small["tensors"]["peak_bytes"] += 100 * syn.MiB
    files = same[:4] + [write(os.path.join(d, "small.summary.json"), small)]
    check(outlier_ranks(json.loads(run(cli, "merge", "--json", *files).stdout)) == {},
          "a small difference is no outlier")
    # The same rank with 6 GiB more (over 20% of the median peak): an outlier; low peaks count too.
    big = json.loads(json.dumps(small))
    big["peak"]["bytes"] += 6 * syn.GiB
    big["tensors"]["peak_bytes"] += 6 * syn.GiB
    low = dict(json.loads(json.dumps(base)), rank=3)
    low["peak"]["bytes"] //= 4
    low["tensors"]["peak_bytes"] //= 4
    files = same[:3] + [write(os.path.join(d, "low.summary.json"), low), write(os.path.join(d, "big.summary.json"), big)]
    found = outlier_ranks(json.loads(run(cli, "merge", "--json", *files).stdout))
    check(sorted(found) == ["3", "4"], f"a high and a low peak: {sorted(found)}")
    # Two ranks: no median to differ from; the heavier is named where the two differ by more than
    # the floor (256 MiB and 20% of the lighter), against the other.
    merged = json.loads(run(cli, "merge", "--json", *same[:2]).stdout)
    check(merged["outliers"] is not None and merged["outliers"]["pair"] and outlier_ranks(merged) == {},
          f"two equal ranks: compared, none heavier: {merged['outliers']}")
    check("no heavier rank (2 ranks" in run(cli, "merge", *same[:2]).stdout, "two equal ranks: said so")
    pair = [same[0], os.path.join(d, "big.summary.json")]
    merged = json.loads(run(cli, "merge", "--json", *pair).stdout)
    found = outlier_ranks(merged)
    check(sorted(found) == ["4"], f"two ranks, one 6 GiB heavier: {sorted(found)}")
    peak = [f for f in found.get("4", []) if f["figure"] == "peak"]
    check(len(peak) == 1 and peak[0]["bytes"] - peak[0]["median_bytes"] == 6 * syn.GiB + 100 * syn.MiB and
          "on the other rank" in peak[0]["text"], f"the heavier rank's peak against the other's: {peak}")
    text = run(cli, "merge", *pair).stdout
    check("the heavier of 2 ranks" in text and "rank 4: " in text, f"two ranks, text: {text[-600:]}")


def check_bad_summaries(cli, tmp):
    d = os.path.join(tmp, "bad")
    os.mkdir(d)
    good = syn.rank_summary(0, __import__("random").Random(1))
    cases = []
    path = os.path.join(d, "cut.summary.json")
    with open(path, "w") as f:
        f.write(json.dumps(good)[:200])
    cases.append((path, f"{path}: not a rank summary: invalid JSON at byte 201"))
    v2 = dict(good, schema_version=2)
    cases.append((write(os.path.join(d, "v2.summary.json"), v2),
                  "field 'schema_version': version 2 (this memguard reads version 1)"))
    neg = json.loads(json.dumps(good))
    neg["sites_at_peak"]["top"][3]["bytes"] = -5
    cases.append((write(os.path.join(d, "neg.summary.json"), neg),
                  "field 'sites_at_peak.top[3].bytes': expected a whole number >= 0"))
    missing = json.loads(json.dumps(good))
    del missing["collections"]["by_trigger"]
    cases.append((write(os.path.join(d, "missing.summary.json"), missing),
                  "field 'collections.by_trigger': missing"))
    other = write(os.path.join(d, "other.summary.json"), {"schema": "something.else"})
    cases.append((other, "field 'schema': expected \"memguard.rank_summary\""))
    big = os.path.join(d, "big.summary.json")
    with open(big, "w") as f:
        f.write(" " * (2 << 20))
    cases.append((big, "more than a summary's 1 MiB at most"))
    ok = write(os.path.join(d, "ok.summary.json"), good)
    for path, message in cases:
        p = run(cli, "merge", ok, path, ok, rc=2)
        check(message in p.stderr and p.stderr.count("\n") == 1 and p.stderr.startswith("memguard: error: "),
              f"{os.path.basename(path)}: one error with '{message}', got {p.stderr!r}")


GOLDEN_REPORTS = ["steps_flat.mgr", "steps_growth.mgr", "oom_torch.mgr", "alloc.mgr", "gc.mgr", "graphs.mgr",
                  "basic.mgr", "categories_interpose.mgr"]


def check_summarize(cli, golden, tmp):
    d = os.path.join(tmp, "reports")
    os.mkdir(d)
    for name in GOLDEN_REPORTS:
        shutil.copy(os.path.join(golden, name), d)
    files = [os.path.join(d, n) for n in GOLDEN_REPORTS]
    # merge before any summary: from the reports
    from_reports = run(cli, "merge", *files, cwd=golden)
    from_reports_json = json.loads(run(cli, "merge", "--json", *files, cwd=golden).stdout)
    check(not any(r["from_summary"] for r in from_reports_json["ranks"]), "no summary yet: the reports are read")
    p = run(cli, "summarize", *files, "/no/such/report.mgr", rc=2, cwd=golden)
    check(p.stdout.count("wrote ") == len(files), f"summarize wrote every summary: {p.stdout}")
    check("memguard: error: " in p.stderr and "/no/such/report.mgr" in p.stderr, "a missing report is named")
    for f in files:
        path = f + ".summary.json"
        check(os.path.getsize(path) <= 64 * 1024, f"{path}: at most 64 KiB")
        s = json.load(open(path))
        check(s["schema"] == "memguard.rank_summary" and s["schema_version"] == 1, f"{path}: schema")
        check(s["report_bytes"] == os.path.getsize(f), f"{path}: the report's size")
        summ = json.loads(run(cli, "summary", "--json", f, cwd=golden).stdout)
        check(s["gpu"]["peak_bytes"] == summ["peak_bytes"], f"{path}: GPU peak as summary says")
        check(s["hazards"]["count"] == summ["hazards"], f"{path}: hazards as summary says")
        check(s["ooms"]["count"] == summ["ooms"] and s["ooms"]["recovered"] == summ["recovered_cuda_failures"],
              f"{path}: OOMs as summary says")
        for t, n in summ["collections"].items():
            check(s["collections"]["by_trigger"][t]["count"] == n, f"{path}: {t} collections as summary says")
            check(s["collections"]["by_trigger"][t]["cuda_bytes_freed"] == summ["cuda_bytes_freed_by_collections"][t],
                  f"{path}: bytes {t} collections freed")
        if s["tensors"] is not None:
            check(s["tensors"]["peak_bytes"] == summ["tensors"]["peak_bytes"], f"{path}: tensor peak")
        top = json.loads(run(cli, "top", "--json", f, cwd=golden).stdout)
        check(s["peak"]["bytes_of"] == top["bytes_of"], f"{path}: the peak's bytes as top counts them")
        check(s["sites_at_peak"]["count"] == top["site_count"], f"{path}: sites at the peak as top finds them")
        check([x["bytes"] for x in s["sites_at_peak"]["top"]] == [x["bytes"] for x in top["sites"]][:12],
              f"{path}: the sites' bytes as top gives them")
        if s["categories_at_peak"] is not None:
            check(sum(c["bytes"] for c in s["categories_at_peak"]) == summ["categories_at_peak"]["total_bytes"],
                  f"{path}: categories add up to the breakdown's total")
        steps = json.loads(run(cli, "steps", "--json", f, cwd=golden).stdout) if s["steps"] else None
        if steps:
            check(s["steps"]["count"] == len(steps["steps"]), f"{path}: steps as steps counts them")
            check((s["steps"]["growth"] is None) == (steps["growth"] is None), f"{path}: the growth as steps finds it")
    # merge reads the summaries now, and says the same
    from_summaries = run(cli, "merge", *files, cwd=golden)
    check(from_summaries.stdout == from_reports.stdout, "merge says the same from summaries as from the reports:\n"
          + from_summaries.stdout + "\n---\n" + from_reports.stdout)
    j = json.loads(run(cli, "merge", "--json", *files, cwd=golden).stdout)
    check(all(r["from_summary"] for r in j["ranks"]), "the summaries are read")
    for r in j["ranks"] + from_reports_json["ranks"]:
        del r["from_summary"]
    check(j == from_reports_json, "merge --json says the same from summaries as from the reports")
    # a summary of a report of another size (the report grew since): the report is read
    stale = json.load(open(files[0] + ".summary.json"))
    stale["report_bytes"] += 1
    write(files[0] + ".summary.json", stale)
    j = json.loads(run(cli, "merge", "--json", *files, cwd=golden).stdout)
    check(not j["ranks"][0]["from_summary"] and j["ranks"][1]["from_summary"], "a stale summary is not used")


def check_long_names(cli, golden, tmp):
    """Names of thousands of control characters (escaped 6 bytes each in JSON) and long paths: every
    string of the summary takes at most 256 bytes of its JSON, cut with '...'."""
    d = os.path.join(tmp, "long")
    os.mkdir(d)
    lines = open(os.path.join(golden, "steps_growth.mgr")).read().split("\n")
    for i, line in enumerate(lines):
        w = line.split(" ")
        if w[0] == "p":  # p ID LINE FUNCTION FILE
            w[3] = "%01" * 300 + "x" * 3000 + str(i)
            w[4] = w[4] + "/" + "%1b[31m" * 200
            lines[i] = " ".join(w)
    report = os.path.join(d, "long.mgr")
    with open(report, "w") as f:
        f.write("\n".join(lines))
    run(cli, "summarize", report)
    text = open(report + ".summary.json").read()
    check(len(text.encode()) <= 64 * 1024, "long names: at most 64 KiB")
    s = json.loads(text)
    strings = [site["label"] for site in s["sites_at_peak"]["top"]] + \
        [f for site in s["sites_at_peak"]["top"] for f in site["frames"]]
    check(all(len(json.dumps(x, ensure_ascii=False)) <= 256 + 2 for x in strings), "long names: cut to 256 bytes")
    check(any(x.endswith("...") for x in strings), "long names: a cut string ends with ...")
    check(len(s["sites_at_peak"]["top"]) == s["sites_at_peak"]["count"], "long names: every site kept")


def main():
    cli, golden = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="mgtest-outliers.")
    try:
        check_fleet(cli, tmp)
        check_quiet_fleets(cli, tmp)
        check_bad_summaries(cli, tmp)
        check_summarize(cli, golden, tmp)
        check_long_names(cli, golden, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'FAILED' if FAILURES else 'passed'}: {len(FAILURES)} failures")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
