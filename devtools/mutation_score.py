"""Score a mutmut run and fail `make mutation` below the agreed threshold.

    mutmut results --all true > .mutmut-results.txt
    python -m devtools.mutation_score .mutmut-results.txt [--threshold 90]

mutmut 3 prints per-mutant statuses but neither a score nor an exit code that
reflects one, and issue 2 asks for at least 90 % of mutants killed. This turns
its listing into killed/total, lists the mutants that were not killed, and
exits non-zero when the score is too low or the run did not finish.

How each mutmut status counts:

- killed, timeout, segfault, caught by type check: killed. The mutant made the
  test run fail, hang (mutmut stops it and reports a timeout, or a segfault
  when the stop needed SIGKILL) or not type-check: it was detected.
- survived, no tests, suspicious: not killed. "no tests" means no test reaches
  the mutated code, and "suspicious" is an exit code mutmut cannot interpret;
  both are counted against the score rather than explained away.
- skipped (``# pragma: no mutate``): left out of the total.
- not checked, check was interrupted by user: the run is incomplete, so no
  score is given (exit status 2).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
NOT_KILLED = frozenset({"survived", "no tests", "suspicious"})
EXCLUDED = frozenset({"skipped"})
INCOMPLETE = frozenset({"not checked", "check was interrupted by user"})
KNOWN = KILLED | NOT_KILLED | EXCLUDED | INCOMPLETE


class ResultsError(ValueError):
    """The results file is empty, unreadable or from an unfinished run."""


@dataclass(frozen=True, slots=True)
class Score:
    """Counts of one mutmut run, by status, and what they add up to."""

    by_status: dict[str, int]
    not_killed: list[tuple[str, str]]

    @property
    def killed(self) -> int:
        return sum(n for status, n in self.by_status.items() if status in KILLED)

    @property
    def total(self) -> int:
        return sum(n for status, n in self.by_status.items() if status not in EXCLUDED)

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.total if self.total else 0.0


def parse(lines: list[str]) -> Score:
    """Read `mutmut results --all true` output: one ``<mutant name>: <status>`` a line."""
    by_status: Counter[str] = Counter()
    not_killed: list[tuple[str, str]] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        name, sep, status = line.rpartition(": ")
        if not sep or not name or status not in KNOWN:
            raise ResultsError(f"line {number}: not a mutmut result: {line!r}")
        by_status[status] += 1
        if status in NOT_KILLED:
            not_killed.append((name, status))
    if not by_status:
        raise ResultsError("no mutants listed; did `mutmut run` fail before testing any?")
    unfinished = sum(by_status[status] for status in INCOMPLETE)
    if unfinished:
        raise ResultsError(f"{unfinished} mutants were not checked; the run did not finish")
    return Score(by_status=dict(by_status), not_killed=not_killed)


def report(score: Score, threshold: float) -> str:
    rows = [f"  {status:<22} {count:>5}" for status, count in sorted(score.by_status.items())]
    survived = score.by_status.get("survived", 0)
    lines = [
        "mutmut results by status:",
        *rows,
        f"killed {score.killed}, survived {survived}, total {score.total} (skipped mutants excluded)",
        f"mutation score: {score.killed}/{score.total} = {score.percent:.1f}% killed "
        f"(threshold {threshold:g}%)",
    ]
    if score.not_killed:
        lines.append(f"not killed ({len(score.not_killed)}; inspect with `mutmut show <name>`):")
        lines += [f"  {name}  [{status}]" for name, status in score.not_killed]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", type=Path, help="output of `mutmut results --all true`")
    parser.add_argument("--threshold", type=float, default=90.0, help="minimum %% killed (default 90)")
    args = parser.parse_args(argv)
    try:
        score = parse(args.results.read_text(encoding="utf-8").splitlines())
    except (OSError, ResultsError) as exc:
        print(f"mutation_score: {exc}", file=sys.stderr)
        return 2
    print(report(score, args.threshold))
    if score.percent < args.threshold:
        print(f"FAIL: {score.percent:.1f}% killed is below {args.threshold:g}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
