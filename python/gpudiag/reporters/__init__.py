# SPDX-License-Identifier: Apache-2.0
"""The renderers written in Python: ``html`` (the notebook and ``--html`` report) and ``svg``
(its charts). Text, JSON and Prometheus are C++'s (``gpudiag._core.render_text``,
``render_json``, ``render_prometheus``). Every word and number here comes from C++ as well: the
renderers lay out what the native report (``gpudiag._core.Report``) declares and print its
figures with ``_core.format_figure``, ``figure_row``, ``column_heading`` and the ``describe_*``
calls, so the HTML says what the text says.
"""
