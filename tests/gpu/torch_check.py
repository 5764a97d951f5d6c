#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch evidence of the device check (tests/gpu/device_check.sh runs it on the GPU machine).

Uses the gpudiag module built in the same run (PYTHONPATH=<build>/python, no pip) from the box's
python3, and measures in fresh subprocesses, so no part inherits another's CUPTI state:

  timing    gpudiag's durations of torch.cuda._sleep kernels against torch.cuda.Event around
            them, in a fresh process and again after a torch.profiler run (U3: Kineto's timestamp
            callback); a CUDA-graph training step replayed under a session (recorded)
  coexist   torch.profiler before, during and after a gpudiag session: the profiler sees kernels
            each time, gpudiag sees kernels launched after the profiler ends, `paused` is cleared
  u6        a session started before `import torch`: how many libcupti copies are mapped
  overhead  a training step with no tool, with gpudiag's default session, in deep mode and with
            torch.profiler (CUDA activities), one process each, alternating over ROUNDS rounds: a
            launch-bound toy model and a transformer step of about 20-50 ms; medians, p90, the
            ratios, gpudiag's own account of its cost (the live report's "cost" section) and the
            table for docs/overhead.md (printed as OVERHEAD-TABLE lines)
  examples  every examples/python scenario (each <= 20 s), recorded, its verdict held to
            tests/scenarios/expectations.json

Every part passes only on evidence. Results: $OUT/torch_check.json (rewritten after each part),
recordings and logs under $GPUDIAG_RECORD_DIR. Exit status: 0 all parts passed, 1 one failed or
was skipped for time, 77 no PyTorch with CUDA here (the preflight's case).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = Path(os.environ.get("OUT", "."))
RECORDED = Path(os.environ.get("GPUDIAG_RECORD_DIR", str(OUT / "recorded")))
BUDGET_S = float(os.environ.get("GPUDIAG_TORCH_BUDGET_S", "330"))
ROUNDS = int(os.environ.get("GPUDIAG_TORCH_ROUNDS", "4"))  # x 4 tools: 16 worker processes
PARTS = os.environ.get("GPUDIAG_TORCH_PARTS", "timing,coexist,u6,overhead,examples").split(",")
EXAMPLE_LIMIT_S = 20.0
TOLERANCE = 0.05  # kernel durations against cudaEvent timings
TOY_STEPS = int(os.environ.get("GPUDIAG_TOY_STEPS", "200"))
REAL_STEPS = int(os.environ.get("GPUDIAG_REAL_STEPS", "30"))
STARTED = time.monotonic()
# The overhead part's tools: none, gpudiag's default session, deep mode, torch.profiler (CUDA).
MODES = ("none", "gpudiag", "deep", "profiler")
MODE_LABELS = {
    "none": "no tool",
    "gpudiag": "gpudiag (default)",
    "deep": "gpudiag (deep)",
    "profiler": "torch.profiler (CUDA)",
}


# =============================================================== worker side (fresh processes)
def toy_model(torch: Any) -> Any:
    """A launch-bound step: a deep, narrow MLP; the GPU waits for the launches."""
    layers: list[Any] = []
    for _ in range(16):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(64, 512, device="cuda")

    def step() -> None:
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def real_model(torch: Any) -> Any:
    """A realistic step (about 20-50 ms on an H200): a 12-layer transformer encoder in bf16."""
    layer = torch.nn.TransformerEncoderLayer(
        d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True, norm_first=True
    )
    model = torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 512, 1024, device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def timed_steps(torch: Any, step: Any, steps: int, mark: Any = None) -> list[float]:
    """Milliseconds per step, each ended by a synchronisation (as `loss.item()` would); `mark`
    (a session's step()) marks each step as a training loop would, its cost inside the time."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if mark is not None:
            mark()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def cuda_kernels_seen(prof: Any) -> int:
    """GPU events torch.profiler collected (Kineto's raw list: building prof.events() for tens of
    thousands of kernels would cost seconds of device time)."""
    from torch.autograd import DeviceType

    try:
        raw = prof.profiler.kineto_results.events()
        return sum(1 for e in raw if e.device_type() == DeviceType.CUDA)
    except AttributeError:  # another torch version's internals: the public, slower way
        return sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)


def capture_evidence(session: Any) -> dict[str, Any]:
    """What the session's capture says about itself, for judging whether it was really on."""
    import gpudiag

    st = session.status()
    level = str(gpudiag._core.capture_level_name(st.level))
    return {
        "level": level,
        "events": int(st.events),
        "dropped": int(st.dropped),
        "paused": bool(st.paused),
        "reasons": list(st.reasons),
    }


def capturing(evidence: dict[str, Any]) -> bool:
    return evidence["level"] in ("cupti_activity", "cupti_deep") and evidence["events"] > 0


def worker_step(mode: str) -> dict[str, Any]:
    """One process of the overhead comparison: both models under one tool (or none)."""
    import torch

    result: dict[str, Any] = {"mode": mode}
    for name, build, steps, warmup in (
        ("toy", toy_model, TOY_STEPS, 20),
        ("real", real_model, REAL_STEPS, 5),
    ):
        step = build(torch)
        timed_steps(torch, step, warmup)
        if mode == "none":
            result[name] = {"ms": timed_steps(torch, step, steps)}
        elif mode in ("gpudiag", "deep"):
            import gpudiag

            with gpudiag.session(deep=mode == "deep") as s:
                ms = timed_steps(torch, step, steps, mark=s.step)
                evidence = capture_evidence(s)
                cost = own_cost(s)
            result[name] = {"ms": ms, "capture": evidence, "cost": cost}
        else:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                ms = timed_steps(torch, step, steps)
            result[name] = {"ms": ms, "profiler_kernels": cuda_kernels_seen(prof)}
    return result


def own_cost(session: Any) -> dict[str, float]:
    """The live report's "cost" section: what gpudiag says it cost, to set beside the step times."""
    report = session.report()
    section = report.section("cost") if report is not None else None
    if section is None:
        return {}
    return {key: float(fig["value"]) for key, fig in section.get("figures", {}).items()}


def chrome_kernels(recording: Path) -> list[dict[str, Any]]:
    """The kernels of a recording (name, ts and dur in microseconds), through gpudiag's export."""
    import gpudiag

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        gpudiag._core.export_chrome_trace([str(recording)], str(out))
        doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]


def spin_vs_events(torch: Any, recording: Path) -> dict[str, Any]:
    """torch.cuda._sleep kernels (one kernel each, "spin_kernel") timed by gpudiag and by events."""
    import gpudiag

    cycles = [2_000_000, 4_000_000, 8_000_000] * 3
    pairs = []
    with gpudiag.session(record=recording) as s:
        for c in cycles:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(c)
            b.record()
            pairs.append((a, b))
        torch.cuda.synchronize()
        evidence = capture_evidence(s)
    event_ms = [a.elapsed_time(b) for a, b in pairs]
    spins = sorted(
        (k for k in chrome_kernels(recording) if "spin" in k["name"]), key=lambda k: k["ts"]
    )
    got_ms = [k["dur"] / 1e3 for k in spins]
    rel = [abs(g - e) / e for g, e in zip(got_ms, event_ms)]
    ordered = all(
        spins[i]["ts"] >= spins[i - 1]["ts"] + spins[i - 1]["dur"] - 1.0
        for i in range(1, len(spins))
    )
    ok = len(spins) == len(cycles) and max(rel, default=1.0) <= TOLERANCE and ordered
    return {
        "ok": ok,
        "capture": evidence,
        "event_ms": event_ms,
        "gpudiag_ms": got_ms,
        "worst_relative_difference": max(rel, default=None),
        "kernels": len(spins),
        "launched": len(cycles),
        "monotonic": ordered,
    }


def cuda_graph_step(torch: Any, recording: Path) -> dict[str, Any]:
    """A toy training step captured as a CUDA graph, replayed without and with a session."""
    import gpudiag

    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, 512, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm up on a side stream, as torch.cuda.graphs requires
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        model(x).square().mean().backward()
        opt.step()
    replays = 200

    def replay_ms() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / replays

    replay_ms()
    plain = replay_ms()
    with gpudiag.session(record=recording) as s:
        traced = replay_ms()
        evidence = capture_evidence(s)
    kernels = len(chrome_kernels(recording))
    return {
        "ok": capturing(evidence) and kernels >= replays,
        "capture": evidence,
        "replays": replays,
        "kernels_recorded": kernels,
        "replay_ms_plain": plain,
        "replay_ms_gpudiag": traced,
        "ratio": traced / plain,
    }


def worker_timing() -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.zeros(1, device="cuda")
    fresh = spin_vs_events(torch, RECORDED / "torch_timing.gpudiag")
    graph = cuda_graph_step(torch, RECORDED / "torch_cuda_graph.gpudiag")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(1_000_000)
        torch.cuda.synchronize()
    after = spin_vs_events(torch, RECORDED / "torch_timing_after_profiler.gpudiag")
    return {
        "fresh": fresh,
        "after_profiler": after,
        "profiler_kernels": cuda_kernels_seen(prof),
        "cuda_graph": graph,
        "ok": fresh["ok"] and after["ok"] and graph["ok"],
    }


def worker_coexist() -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import gpudiag

    step = toy_model(torch)

    def profiled() -> int:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            timed_steps(torch, step, 5)
        return cuda_kernels_seen(prof)

    timed_steps(torch, step, 5)
    before = profiled()
    recording = RECORDED / "torch_coexistence.gpudiag"
    with gpudiag.session(record=recording) as s:
        timed_steps(torch, step, 10)
        started = capture_evidence(s)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            timed_steps(torch, step, 5)
            during_session = capture_evidence(s)
        during = cuda_kernels_seen(prof)
        timed_steps(torch, step, 5)
        for _ in range(5):  # marker kernels, launched only after the profiler has ended
            torch.cuda._sleep(100_000)
        torch.cuda.synchronize()
        resumed = capture_evidence(s)
    after = profiled()
    spins = sum(1 for k in chrome_kernels(recording) if "spin" in k["name"])
    ok = (
        before > 0
        and during > 0
        and after > 0
        and capturing(started)
        and spins >= 5
        and not resumed["paused"]
    )
    return {
        "ok": ok,
        "profiler_kernels": {"before": before, "during": during, "after": after},
        "gpudiag_kernels_after_resume": spins,
        "capture_at_start": started,
        "capture_while_profiling": during_session,
        "capture_after_profiler": resumed,
    }


def cupti_mappings() -> list[str]:
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "libcupti" in line})


def worker_u6() -> dict[str, Any]:
    import gpudiag

    s = gpudiag.session()
    s.start()
    import torch  # after the session started: a second libcupti would show up now

    torch.zeros(1, device="cuda")
    torch.cuda._sleep(10_000)
    torch.cuda.synchronize()
    evidence = capture_evidence(s)
    mapped = cupti_mappings()
    s.stop()
    return {
        "ok": len(mapped) >= 1,
        "libcupti_mapped": mapped,
        "copies": len(mapped),
        "capture": evidence,
    }


WORKERS = {"timing": worker_timing, "coexist": worker_coexist, "u6": worker_u6}


def worker_main(argv: list[str]) -> int:
    kind = argv[0]
    result = worker_step(argv[1]) if kind == "step" else WORKERS[kind]()
    print("RESULT " + json.dumps(result))
    return 0


# =============================================================== parent side
RESULTS: dict[str, Any] = {}


def left_s() -> float:
    return BUDGET_S - (time.monotonic() - STARTED)


def save() -> None:
    RESULTS["elapsed_s"] = round(time.monotonic() - STARTED, 1)
    (OUT / "torch_check.json").write_text(json.dumps(RESULTS, indent=1))


def run_worker(args: list[str], timeout: float) -> dict[str, Any] | None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", *args]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"CHECK worker {args} timed out after {timeout:.0f} s")
        return None
    tail = [line for line in proc.stdout.splitlines() if not line.startswith("RESULT ")]
    if proc.returncode != 0 or not proc.stdout:
        print(f"CHECK worker {args} failed rc={proc.returncode}:\n{proc.stderr[-3000:]}")
    for line in tail[-5:]:
        print(f"  [{args[0]}] {line}")
    results = [line[7:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(results[-1]) if results else None


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def part_timing() -> bool:
    r = run_worker(["timing"], 90) or {"ok": False}
    RESULTS["timing"] = r
    for key in ("fresh", "after_profiler"):
        t = r.get(key, {})
        print(
            f"TIMING {key}: {t.get('kernels')}/{t.get('launched')} spin kernels, worst "
            f"difference to torch.cuda.Event {t.get('worst_relative_difference')}, "
            f"monotonic {t.get('monotonic')}"
        )
    g = r.get("cuda_graph", {})
    print(
        f"GRAPH replay {g.get('replay_ms_plain')} ms plain, {g.get('replay_ms_gpudiag')} ms "
        f"under gpudiag (ratio {g.get('ratio')}), {g.get('kernels_recorded')} kernels recorded"
    )
    return bool(r.get("ok"))


def part_coexist() -> bool:
    r = run_worker(["coexist"], 90) or {"ok": False}
    RESULTS["coexistence"] = r
    print(
        f"PROFILER kernels seen by torch.profiler {r.get('profiler_kernels')}; gpudiag kernels "
        f"after the profiler ended {r.get('gpudiag_kernels_after_resume')}; paused while "
        f"profiling {r.get('capture_while_profiling', {}).get('paused')}, after "
        f"{r.get('capture_after_profiler', {}).get('paused')}"
    )
    return bool(r.get("ok"))


def part_u6() -> bool:
    r = run_worker(["u6"], 60) or {"ok": False}
    RESULTS["u6_cupti_copies"] = r
    print(
        f"U6 session before import torch: {r.get('copies')} libcupti mapped "
        f"{r.get('libcupti_mapped')} (capture {r.get('capture', {}).get('level')})"
    )
    return bool(r.get("ok"))


def summarize_overhead(rounds: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    out: dict[str, Any] = {}
    ok = True
    for model in ("toy", "real"):
        per_mode: dict[str, Any] = {}
        for mode in MODES:
            medians = [statistics.median(r[mode][model]["ms"]) for r in rounds]
            pooled = [ms for r in rounds for ms in r[mode][model]["ms"]]
            per_mode[mode] = {
                "median_ms": statistics.median(pooled),
                "p90_ms": quantile(pooled, 0.9),
                "process_medians_ms": medians,
            }
        ratios = {}
        for mode in MODES[1:]:
            rs = [
                statistics.median(r[mode][model]["ms"]) / statistics.median(r["none"][model]["ms"])
                for r in rounds
            ]
            ratios[mode] = {
                "median": statistics.median(rs),
                "min": min(rs),
                "max": max(rs),
                "per_round": rs,
            }
        on = all(capturing(r[m][model]["capture"]) for r in rounds for m in ("gpudiag", "deep"))
        seen = all(r["profiler"][model]["profiler_kernels"] > 0 for r in rounds)
        ok = ok and on and seen
        said = {
            m: statistics.median(r[m][model]["cost"].get("share_of_step", -1.0) for r in rounds)
            for m in ("gpudiag", "deep")
        }
        out[model] = {
            "steps": per_mode,
            "ratio_vs_none": ratios,
            "own_cost_share_of_step": said,
            "gpudiag_capturing": on,
            "profiler_saw_kernels": seen,
        }
        print(
            f"OVERHEAD {model}: step median none {per_mode['none']['median_ms']:.3f} ms "
            f"(p90 {per_mode['none']['p90_ms']:.3f}); gpudiag x{ratios['gpudiag']['median']:.3f} "
            f"[{ratios['gpudiag']['min']:.3f}..{ratios['gpudiag']['max']:.3f}]; deep "
            f"x{ratios['deep']['median']:.3f}; torch.profiler "
            f"x{ratios['profiler']['median']:.3f} [{ratios['profiler']['min']:.3f}.."
            f"{ratios['profiler']['max']:.3f}] over {len(rounds)} rounds; capture on {on}"
        )
    real = out["real"]["steps"]["none"]["median_ms"]
    if not 20.0 <= real <= 50.0:
        print(f"OVERHEAD note: the realistic step took {real:.1f} ms, outside 20-50 ms")
    out["table_md"] = overhead_table(out)
    for line in out["table_md"].splitlines():
        print(f"OVERHEAD-TABLE {line}")
    return out, ok


def overhead_table(out: dict[str, Any]) -> str:
    """The rows docs/overhead.md takes from a GPU run: each workload, each tool, measured here."""
    rows = [
        "| workload | tool | step median (ms) | vs no tool | gpudiag's own account (share of step) |",
        "|---|---|---|---|---|",
    ]
    for model in ("toy", "real"):
        o = out[model]
        for mode in MODES:
            ratio = o["ratio_vs_none"].get(mode, {}).get("median")
            said = o["own_cost_share_of_step"].get(mode)
            rows.append(
                f"| {model} | {MODE_LABELS[mode]} | {o['steps'][mode]['median_ms']:.3f} | "
                + (f"{(ratio - 1) * 100:+.2f} %" if ratio is not None else "-")
                + " | "
                + (f"{said * 100:.3f} %" if said is not None and said >= 0 else "-")
                + " |"
            )
    return "\n".join(rows)


def part_overhead() -> bool:
    modes = list(MODES)
    rounds = []
    for i in range(ROUNDS):
        if left_s() < 60:
            print(f"CHECK overhead: time budget spent after {i} rounds")
            break
        k = i % len(modes)
        order = modes[k:] + modes[:k]  # rotate so no tool always runs first
        got = {mode: run_worker(["step", mode], 120) for mode in order}
        if any(v is None for v in got.values()):
            RESULTS["overhead"] = {"error": f"a worker of round {i} failed"}
            return False
        rounds.append(got)
    if len(rounds) < ROUNDS:
        RESULTS["overhead"] = {"error": f"only {len(rounds)} of {ROUNDS} rounds"}
        return False
    summary, ok = summarize_overhead(rounds)
    RESULTS["overhead"] = {
        "rounds": ROUNDS,
        "toy_steps": TOY_STEPS,
        "real_steps": REAL_STEPS,
        **summary,
    }
    return ok


def example_scripts() -> list[Path]:
    return sorted(p for p in (ROOT / "examples" / "python").glob("*.py") if p.stem != "_common")


def judge_verdict(name: str, verdict: dict[str, Any], expectations: dict[str, Any]) -> str:
    exp = expectations[name]
    got, serious = verdict.get("findings", []), verdict.get("serious", [])
    missing = [r for r in exp.get("required", []) if r not in got]
    forbidden = [f for f in exp.get("forbidden", []) if f in got]
    if exp.get("healthy") and serious:
        return "unhealthy: " + ",".join(serious)
    if missing or forbidden:
        return f"missing {missing} forbidden {forbidden}"
    return "ok"


def run_example(script: Path, expectations: dict[str, Any]) -> dict[str, Any]:
    import gpudiag

    name = script.stem
    folder = RECORDED / "examples"
    folder.mkdir(parents=True, exist_ok=True)
    recording = folder / f"{name}.gpudiag"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(script), "--record", str(recording)],
            check=False,
            capture_output=True,
            text=True,
            timeout=EXAMPLE_LIMIT_S,
        )
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, output = -1, f"timed out after {EXAMPLE_LIMIT_S} s\n{e.stdout or ''}"
    secs = time.monotonic() - t0
    (folder / f"{name}.log").write_text(output if isinstance(output, str) else str(output))
    lines = [line[8:] for line in output.splitlines() if line.startswith("VERDICT ")]
    verdict = json.loads(lines[-1]) if lines else {}
    judged = judge_verdict(name, verdict, expectations) if lines else "no verdict"
    try:
        replay = sorted({f.id for f in gpudiag.analyze(str(recording)).findings})
        readable = True
    except (gpudiag.GpudiagError, OSError) as e:  # an unreadable recording is evidence too
        replay, readable = [f"unreadable: {e!r}"], False
    ok = rc == 0 and judged == "ok" and readable
    print(
        f"EXAMPLE {name:<20} rc={rc:<3} {secs:5.1f}s {judged:<14} live {verdict.get('findings')}"
        f" replay {replay}"
    )
    return {
        "ok": ok,
        "rc": rc,
        "seconds": round(secs, 1),
        "verdict": verdict,
        "judged": judged,
        "replay_findings": replay,
        "recording": recording.name,
    }


def part_examples() -> bool:
    expectations = json.loads((ROOT / "tests" / "scenarios" / "expectations.json").read_text())
    results: dict[str, Any] = {}
    for script in example_scripts():
        if left_s() < EXAMPLE_LIMIT_S + 5:
            results[script.stem] = {"ok": False, "judged": "skipped: time budget spent"}
            continue
        results[script.stem] = run_example(script, expectations)
    RESULTS["examples"] = results
    return all(r["ok"] for r in results.values())


def examples_declared() -> bool:
    """Every example has an expectation, and every expectation an example (checked on CPU too)."""
    expectations = json.loads((ROOT / "tests" / "scenarios" / "expectations.json").read_text())
    names = {p.stem for p in example_scripts()}
    declared = {k for k in expectations if not k.startswith("_")}
    if names != declared:
        print(
            f"CHECK examples and tests/scenarios/expectations.json differ: "
            f"{sorted(names ^ declared)}"
        )
        return False
    return True


PART_FUNCTIONS = {
    "timing": part_timing,
    "coexist": part_coexist,
    "u6": part_u6,
    "overhead": part_overhead,
    "examples": part_examples,
}
# Device seconds a part needs at least; a part is skipped (and fails the check) below that.
PART_MINIMUM_S = {"timing": 40, "coexist": 30, "u6": 20, "overhead": 90, "examples": 30}


def main() -> int:
    import gpudiag  # the module built in this run (PYTHONPATH); no pip

    print(f"gpudiag {gpudiag.__version__} from {gpudiag.__file__}")
    print(gpudiag.status())
    if not examples_declared():
        return 1
    try:
        import torch
    except ImportError as e:
        print(f"torch_check: no PyTorch here ({e}): needs the GPU machine")
        return 77
    if not torch.cuda.is_available():
        print("torch_check: PyTorch sees no CUDA device: needs the GPU machine")
        return 77
    OUT.mkdir(parents=True, exist_ok=True)
    RECORDED.mkdir(parents=True, exist_ok=True)
    RESULTS.update(
        {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0),
            "gpudiag": gpudiag.__version__,
            "budget_s": BUDGET_S,
            "parts": {},
        }
    )
    ok = True
    for part in PARTS:
        if left_s() < PART_MINIMUM_S[part]:
            print(f"CHECK {part}: SKIPPED, {left_s():.0f} s of the budget left")
            RESULTS["parts"][part] = "skipped"
            ok = False
            continue
        t0 = time.monotonic()
        passed = PART_FUNCTIONS[part]()
        RESULTS["parts"][part] = "passed" if passed else "failed"
        print(f"CHECK {part}: {'passed' if passed else 'FAILED'} ({time.monotonic() - t0:.0f} s)")
        ok = ok and passed
        save()
    save()
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit(main())
