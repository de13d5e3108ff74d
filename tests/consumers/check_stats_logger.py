#!/usr/bin/env python3
"""check_stats_logger.py: fp8a_capture.stats_logger (the package as pip installed it) is a logger
nvdlfw_inspect's initialize takes (its BaseLogger) for TE's statistics: loaded with log-config's
YAML and TE's debug features, the values TE's StatsBuffer logs through nvdlfw's MetricLogger land
in LOG/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log in nvdlfw's own line layout
with every digit (the default logger's value={:.4f} gives 0.0000 for a gradient amax of 1.2e-05).
Prints one line: "OK: ..." or "FAIL: ..."."""
import os
import sys
import tempfile
import warnings

from _common import CheckFailed, main
from _te_debug import te_debug_features

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "golden", "reports", "log_config_current_h100.yaml")
VALUES = [("model.decoder.layers.1.mlp.linear_fc1_gradient_cur_amax", 1.2345678e-05, 20),
          ("model.decoder.layers.1.mlp.linear_fc1_gradient_fp8_block_scaling_mse_columnwise", 3.0517578125e-12, 20),
          ("model.decoder.layers.1.mlp.linear_fc1_activation_std", 0.98765432101, 30)]


def check(argv):
    if argv:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    warnings.filterwarnings("ignore")
    import fp8a_capture
    features = te_debug_features()
    import nvdlfw_inspect.api as debug_api
    from nvdlfw_inspect.logging import MetricLogger
    with tempfile.TemporaryDirectory() as d:
        logger = fp8a_capture.stats_logger(d)
        debug_api.initialize(config_file=CONFIG, feature_dirs=[features], log_dir=d, statistics_logger=logger)
        try:
            for name, value, it in VALUES:
                MetricLogger.log_scalar(name, value, it)  # as TE's StatsBuffer.log does
        finally:
            debug_api.end_debug()
        path = os.path.join(d, "nvdlfw_inspect_statistics_logs", "nvdlfw_inspect_globalrank-0.log")
        if not os.path.isfile(path):
            raise CheckFailed("no %s" % path)
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    want = ["%s \t\t\t\t iteration=%06d \t\t\t\t value=%r" % (name, it, value) for name, value, it in VALUES]
    if lines[-len(VALUES):] != want:
        raise CheckFailed("logged %r, expected %r" % (lines, want))
    for line, (_, value, _) in zip(lines[-len(VALUES):], VALUES):
        if float(line.rsplit("value=", 1)[1]) != value:
            raise CheckFailed("%s does not read back as %r" % (line, value))
    return ("stats_logger: nvdlfw_inspect took it; %d values logged in nvdlfw's line layout, each reading back "
            "exactly (%s)" % (len(VALUES), lines[-len(VALUES)].rsplit("value=", 1)[1]))


if __name__ == "__main__":
    sys.exit(main(check))
