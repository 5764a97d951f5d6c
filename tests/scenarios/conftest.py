# SPDX-License-Identifier: Apache-2.0
"""Scenario tests: the examples' verdicts, replayed from their committed GPU recordings."""
