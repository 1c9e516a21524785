#!/usr/bin/env python3
"""The workspace's ignored tests: each is `#[ignore = "needs <component> ..."]` and runs only when
asked for. scripts/test.sh asks for all of them except those whose component this machine lacks.

  ignored-tests.py list                 every ignored test: binary id, name, reason
  ignored-tests.py filter COMPONENT...   a nextest filterset of the tests that need none of them

A component is what follows "needs " or " and " in the reason, e.g. "a kube-apiserver", "the real
model", "root", "prometheus" (`needs prometheus and a kube-apiserver ...` needs both).
"""
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IGNORE = re.compile(r'^\s*#\[ignore = "(needs [^"]*)"\]')
FN = re.compile(r'^\s*(?:pub )?(?:async )?fn (\$?\w+)')


def package_of(path: Path) -> str:
    rel = path.relative_to(REPO).parts
    if rel[0] == "tests":
        return "quarry-e2e"
    # operator/<dir>: the controller crate is the package quarry-operator.
    crate = {"controller": "operator"}.get(rel[1], rel[1])
    return "quarry" if crate == "quarry" else f"quarry-{crate}"


def ignored():
    files = sorted(REPO.glob("tests/tests/*.rs")) + sorted(REPO.glob("operator/*/tests/*.rs"))
    for path in files:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = IGNORE.match(line)
            if not m:
                continue
            for follow in lines[i + 1:i + 6]:
                f = FN.match(follow)
                if f:
                    # Tests a macro writes ($name) need only what test.sh always installs.
                    if not f.group(1).startswith("$"):
                        yield f"{package_of(path)}::{path.stem}", f.group(1), m.group(1)
                    break
            else:
                sys.exit(f"{path}:{i + 1}: #[ignore] not followed by a test fn")


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("list", "filter"):
        sys.exit(__doc__)
    tests = list(ignored())
    if sys.argv[1] == "list":
        for binary, name, reason in tests:
            print(f"{binary}\t{name}\t{reason}")
        return
    missing = sys.argv[2:]
    excluded = [
        f"(binary_id(={binary}) & test(={name}))"
        for binary, name, reason in tests
        if any(f"needs {c}" in reason or f" and {c}" in reason for c in missing)
    ]
    print(f"not ({' | '.join(excluded)})" if excluded else "all()")


if __name__ == "__main__":
    main()
