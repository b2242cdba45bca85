#!/usr/bin/env python3
"""docs/experiments/verdicts.py — the seed × claim × verdict table of docs/experiments/README.md,
made from the verdicts netsweep recorded in each committed seed results directory
(docs/experiments/<seed>/index.json). It rewrites the table between the README's two markers;
with --check it only says whether the committed table is that one (exit 1 when not).
docs/experiments/regenerate runs it after the scenarios; tests/report/experiments.rs checks it.
"""

import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "README.md")
BEGIN = "<!-- verdicts: written by docs/experiments/verdicts.py from the committed results; do not edit -->"
END = "<!-- end of verdicts -->"


def cell(text):
    """Text fit for one table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table():
    rows = ["| seed | page | claim (the seed's words, or ours) | check | verdict | the numbers |",
            "|---|---|---|---|---|---|"]
    seeds = 0
    claims = 0
    for index in sorted(glob.glob(os.path.join(HERE, "*", "index.json"))):
        d = os.path.dirname(index)
        name = os.path.basename(d)
        if not os.path.isfile(os.path.join(d, "page.md")):
            continue
        with open(index) as f:
            verdicts = json.load(f).get("verdicts") or []
        seeds += 1
        for v in verdicts:
            claims += 1
            words = f"“{v['seed']}”" if v.get("seed") else v.get("says", "")
            numbers = f"{v.get('statistic_is', '')}: {v.get('reason', '')}".strip(": ")
            rows.append(f"| {name[:3]} | [{name}]({name}/page.md) | {cell(words)} | "
                        f"`{cell(v['check'])}` | **{v['outcome']}** | {cell(numbers)} |")
    return "\n".join(rows), seeds, claims


def main():
    check = "--check" in sys.argv[1:]
    with open(README) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"verdicts.py: {README} has no verdict markers ({BEGIN!r} … {END!r})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body, seeds, claims = table()
    new = f"{head}{BEGIN}\n{body}\n{END}{tail}"
    print(f"verdicts.py: {claims} claims from {seeds} seed results directories")
    if check:
        if new != text:
            print("verdicts.py: the README's verdict table is not the committed verdicts: "
                  "run docs/experiments/verdicts.py and commit README.md")
            sys.exit(1)
        return
    with open(README, "w") as f:
        f.write(new)


if __name__ == "__main__":
    main()
