#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the small pickles the memory tests read (run from this directory; kilobytes each).

Nothing here needs CUDA: the snapshot variants are plain dicts and lists in the shapes
torch.cuda.memory._snapshot() produced across versions (research note pytorch-integration.md
§1.2), and the hostile pickles are what pickle.dumps makes of objects whose __reduce__ calls
os.system. The test never unpickles them with Python; it checks that gpudiag refuses them and
that the marker file the payload would create never appears.
"""
import os
import pickle

MARKER = "/tmp/gpudiag_pwned_marker"
MiB = 1 << 20


class Pwn:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


def frames(*names):
    return [{"filename": f, "line": line, "name": n} for f, line, n in names]


USER = frames(("/usr/lib/python3/site-packages/torch/nn/modules/linear.py", 125, "forward"),
              ("/home/u/train.py", 42, "step"))


def modern_expandable():
    """torch ~2.5+: allocator_settings, expandable segments, pending free, oom, annotations."""
    seg_addr = 0x7F0000000000
    blocks = [
        {"address": seg_addr, "size": 40 * MiB, "requested_size": 40 * MiB - 100,
         "state": "active_allocated", "frames": USER},
        {"address": seg_addr + 40 * MiB, "size": 20 * MiB, "requested_size": 20 * MiB,
         "state": "active_awaiting_free", "frames": USER},  # the docstring's spelling
        {"address": seg_addr + 60 * MiB, "size": 20 * MiB, "requested_size": 0,
         "state": "inactive", "frames": []},
    ]
    seg = {"device": 0, "address": seg_addr, "total_size": 80 * MiB, "allocated_size": 40 * MiB,
           "active_size": 60 * MiB, "requested_size": 60 * MiB - 100, "stream": 0,
           "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": True,
           "frames": [], "blocks": blocks}
    t = 1_700_000_000_000_000
    trace = [
        {"action": "segment_alloc", "addr": seg_addr, "size": 20 * MiB, "stream": 0, "time_us": t,
         "frames": USER},
        {"action": "user_defined", "addr": 0, "size": 0, "stream": 0, "time_us": t + 1,
         "frames": [{"name": "START", "filename": "ProfilerStep#0", "line": 0}]},
        {"action": "segment_map", "addr": seg_addr + 20 * MiB, "size": 60 * MiB, "stream": 0,
         "time_us": t + 2, "frames": USER},
        {"action": "alloc", "addr": seg_addr, "size": 40 * MiB, "stream": 0, "time_us": t + 3,
         "frames": USER, "compile_context": "N/A", "user_metadata": ""},
        {"action": "alloc", "addr": seg_addr + 40 * MiB, "size": 20 * MiB, "stream": 0,
         "time_us": t + 4, "frames": USER},
        {"action": "free_requested", "addr": seg_addr + 40 * MiB, "size": 20 * MiB, "stream": 0,
         "time_us": t + 5, "frames": USER},
        {"action": "oom", "size": 900 * MiB, "stream": 0, "time_us": t + 6, "device_free": 30 * MiB,
         "frames": USER},
        {"action": "user_defined", "addr": 0, "size": 0, "stream": 0, "time_us": t + 7,
         "frames": [{"name": "END", "filename": "ProfilerStep#0", "line": 0}]},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t + 8, "frames": []},
    ]
    return {
        "segments": [seg],
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                               "max_split_size": -1, "expandable_segments": True,
                               "garbage_collection_threshold": 0.0,
                               "roundup_power2_divisions": {"1": 0, "2": 0}},
        "external_annotations": [
            {"name": "Optimizer.step#Adam.step", "stage": "START", "device": 0, "time_us": t + 3},
            {"name": "Optimizer.step#Adam.step", "stage": "END", "device": 0, "time_us": t + 5},
        ],
    }


def legacy_2_0():
    """torch 2.0: blocks carry "history" instead of frames/requested_size/address."""
    seg_addr = 0x10000000
    blocks = [
        {"size": 2 * MiB, "state": "active_allocated",
         "history": [{"addr": seg_addr, "real_size": 2 * MiB - 512, "frames": USER}]},
        {"size": 6 * MiB, "state": "inactive", "history": []},
        {"size": 12 * MiB, "state": "active_allocated",
         "history": [{"addr": seg_addr + 8 * MiB, "real_size": 12 * MiB, "frames": USER}]},
    ]
    segs = [{"device": 0, "address": seg_addr, "total_size": 20 * MiB, "allocated_size": 14 * MiB,
             "active_size": 14 * MiB, "stream": 0, "segment_type": "large", "blocks": blocks},
            {"device": 1, "address": 0x20000000, "total_size": 2 * MiB, "allocated_size": 0,
             "active_size": 0, "stream": 0, "segment_type": "small",
             "blocks": [{"size": 2 * MiB, "state": "inactive", "history": []}]}]
    return {"segments": segs, "device_traces": [[], []]}


def bare_segments():
    """memory_snapshot() returns only the list of segments."""
    return [{"device": 0, "address": 0x30000000, "total_size": 2 * MiB, "allocated_size": 512,
             "active_size": 512, "requested_size": 100, "stream": 0, "segment_type": "small",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
             "blocks": [{"address": 0x30000000, "size": 512, "requested_size": 100,
                         "state": "active_allocated", "frames": USER},
                        {"address": 0x30000200, "size": 2 * MiB - 512, "requested_size": 0,
                         "state": "inactive", "frames": []}]}]


def keys_2026(per_device_flags):
    """Made for tests, not by torch: the snapshot keys torch 2.12-2.15 added or proposed, none of
    which this machine (no GPU) can make torch write. allocator_settings has 2.15's keys
    (graph_capture_record_stream_reuse, max_cached_size, max_round_threshold, as torch 2.15's
    _snapshot() returns them); trace_alloc_overflowed/trace_alloc_max_entries (pytorch PR #179276)
    say the trace ring of 4 entries wrapped, either in allocator_settings or, per device, at the
    root; host_segments/host_traces (PR #182407) hold pinned host memory in the device records'
    shapes; one root key no torch writes stands for keys added after the reader."""
    seg = 0x7F1000000000
    host = 0x7E0000000000
    t = 1_760_000_000_000_000
    blocks = [
        {"address": seg, "size": 4 * MiB, "requested_size": 4 * MiB, "state": "active_allocated",
         "frames": USER},
        {"address": seg + 4 * MiB, "size": 16 * MiB, "requested_size": 0, "state": "inactive",
         "frames": []},
    ]
    segments = [{"device": 0, "address": seg, "total_size": 20 * MiB, "allocated_size": 4 * MiB,
                 "active_size": 4 * MiB, "requested_size": 4 * MiB, "stream": 0,
                 "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
                 "frames": [], "blocks": blocks}]
    # The ring kept its last 4 entries: the 6 MiB block freed first was allocated before them.
    trace = [
        {"action": "free_requested", "addr": seg + 4 * MiB, "size": 6 * MiB, "stream": 0,
         "time_us": t, "frames": USER},
        {"action": "free_completed", "addr": seg + 4 * MiB, "size": 6 * MiB, "stream": 0,
         "time_us": t + 1, "frames": USER},
        {"action": "alloc", "addr": seg, "size": 4 * MiB, "stream": 0, "time_us": t + 2,
         "frames": USER},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t + 3, "frames": []},
    ]
    host_blocks = [{"address": host, "size": 8 * MiB, "requested_size": 6 * MiB,
                    "state": "active_allocated", "frames": USER}]
    host_segments = [{"device": 0, "address": host, "total_size": 8 * MiB,
                      "allocated_size": 8 * MiB, "active_size": 8 * MiB,
                      "requested_size": 6 * MiB, "stream": 0, "segment_type": "large",
                      "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                      "blocks": host_blocks}]
    host_traces = [
        {"action": "segment_alloc", "addr": host, "size": 8 * MiB, "stream": 0, "time_us": t,
         "frames": USER},
        {"action": "alloc", "addr": host, "size": 8 * MiB, "stream": 0, "time_us": t + 1,
         "frames": USER},
        {"action": "segment_alloc", "addr": host + 16 * MiB, "size": 2 * MiB, "stream": 0,
         "time_us": t + 2, "frames": USER},
        {"action": "segment_free", "addr": host + 16 * MiB, "size": 2 * MiB, "stream": 0,
         "time_us": t + 3, "frames": USER},
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False,
                "garbage_collection_threshold": 0.0, "graph_capture_record_stream_reuse": False,
                "max_cached_size": -1, "max_round_threshold": -1, "max_split_size": -1,
                "pinned_num_register_threads": 1, "pinned_use_cuda_host_register": False,
                "release_lock_on_cudamalloc": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
    snapshot = {"segments": segments, "device_traces": [trace], "allocator_settings": settings,
                "external_annotations": [], "host_segments": host_segments,
                "host_traces": host_traces, "future_2027_key": {"anything": [1, 2]}}
    if per_device_flags:
        snapshot["trace_alloc_overflowed"] = [True]
        snapshot["trace_alloc_max_entries"] = [4]
    else:
        settings["trace_alloc_overflowed"] = True
        settings["trace_alloc_max_entries"] = 4
    return snapshot


def datatypes(protocol):
    """Every plain type the safe reader supports. Protocol 2 has no bytes opcode (Python writes
    bytes as a call to _codecs.encode there, which the reader rightly refuses), so no bytes."""
    values = {"none": None, "true": True, "false": False, "small": 7, "neg": -3, "i16": 40000,
            "i32": -2_000_000_000, "i64": 1 << 60, "big": 1 << 100, "float": 2.5,
            "str": "héllo", "long_str": "x" * 300, "bytes": b"\x00\x01", "tuple0": (),
            "tuple1": (1,), "tuple2": (1, 2), "tuple3": (1, 2, 3), "tuple4": (1, 2, 3, 4),
            "list": [1, [2, [3]]], "shared": [USER[0], USER[0]]}
    if protocol < 3:
        del values["bytes"]
    return values


def main():
    here = os.path.dirname(os.path.abspath(__file__))

    def write(name, obj, protocol):
        with open(os.path.join(here, name), "wb") as f:
            f.write(pickle.dumps(obj, protocol=protocol))

    write("malicious.pickle", Pwn(), 4)          # STACK_GLOBAL + REDUCE
    write("malicious_p2.pickle", Pwn(), 2)       # GLOBAL + REDUCE
    # A snapshot-shaped dict with the payload hidden deep inside a segment's frames.
    hidden = bare_segments()
    hidden[0]["frames"] = [Pwn()]
    write("malicious_nested.pickle", {"segments": hidden}, 4)
    looped = []
    looped.append(looped)
    write("self_referential.pickle", looped, 4)
    write("snapshot_modern_expandable.pickle", modern_expandable(), 5)
    write("snapshot_legacy_2_0.pickle", legacy_2_0(), 2)
    write("snapshot_bare_segments.pickle", bare_segments(), 4)
    write("snapshot_2026_keys_made_for_tests.pickle", keys_2026(False), 4)
    write("snapshot_2026_keys_per_device_made_for_tests.pickle", keys_2026(True), 4)
    for p in (2, 3, 4, 5):
        write(f"datatypes_p{p}.pickle", datatypes(p), p)


if __name__ == "__main__":
    main()
