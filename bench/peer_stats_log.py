#!/usr/bin/env python3
"""The peer of the statistics-only run's benchmark: a plain Python reader of the same log that
keeps, per (layer, tensor, statistic), the worst value and its step (what a hand-written script
over nvdlfw_inspect's logs would do). Usage: peer_stats_log.py LOG"""
import re
import sys

LINE = re.compile(r"(\S+)\s+iteration=(\d+)\s+value=(\S+)")


def main():
    worst = {}
    with open(sys.argv[1]) as f:
        for line in f:
            m = LINE.search(line)
            if m is None:
                continue
            name, step, value = m.group(1), int(m.group(2)), float(m.group(3))
            w = worst.get(name)
            if w is None or value > w[0]:
                worst[name] = (value, step)
    print("%d statistics, worst underflow %.4f" % (
        len(worst), max(v for k, (v, s) in worst.items() if k.endswith("underflows%"))))


if __name__ == "__main__":
    main()
