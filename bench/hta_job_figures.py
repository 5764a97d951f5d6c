#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Holistic Trace Analysis' job figures for a folder of rank traces, to check gpudiag's job view
against: per-rank communication/computation overlap (get_comm_comp_overlap), the potential
stragglers (get_potential_stragglers: the ranks that start the dominant collective last) and the
temporal breakdown. Run it with HTA installed (see bench/compare_hta.sh for a throw-away venv):

    /tmp/hta-venv/bin/python bench/hta_job_figures.py DIR_OF_RANK_TRACES
"""

import logging
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis


def main() -> int:
    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    print("ranks", analysis.t.get_ranks())
    print(analysis.get_comm_comp_overlap(visualize=False).to_string())
    print("profiler steps", analysis.get_profiler_steps())
    print(
        "potential stragglers", analysis.get_potential_stragglers(num_candidates=2, visualize=False)
    )
    print(analysis.get_temporal_breakdown(visualize=False).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
