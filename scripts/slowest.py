#!/usr/bin/env python3
"""Prints the N slowest tests of a JUnit report (cargo nextest's), slowest first.

Usage: scripts/slowest.py target/nextest/ci/junit.xml [N]
"""
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    root = ET.parse(sys.argv[1]).getroot()
    cases = []
    for case in root.iter("testcase"):
        cases.append((float(case.get("time", "0")), case.get("classname", ""), case.get("name", "")))
    cases.sort(reverse=True)
    print(f"  {'seconds':>8}  test (of {len(cases)})")
    for secs, binary, name in cases[:count]:
        print(f"  {secs:8.1f}  {binary} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
