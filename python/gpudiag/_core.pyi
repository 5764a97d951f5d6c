# SPDX-License-Identifier: Apache-2.0
# Stub for the C++ extension gpudiag._core (checked by tests/python/integration/test_core_bindings.py).
from typing import Any, Callable, ClassVar, overload

__version__: str
NO_DEVICE: int

def version() -> str: ...
def status_code_name(code: StatusCode) -> str: ...
def severity_name(severity: Severity) -> str: ...
def event_kind_name(kind: EventKind) -> str: ...
def input_format_name(format: InputFormat) -> str: ...
def capture_level_name(level: CaptureLevel) -> str: ...
def render_text(report: Report) -> str: ...
def headline(report: Report) -> str: ...
def evidence_label(evidence: Evidence) -> str: ...
def render_json(report: Report, compact: bool = ...) -> str: ...
def render_json_line(report: Report, max_bytes: int) -> str: ...
def parse_report_json(json: str) -> Report: ...
@overload
def render_prometheus(
    report: Report, *, hostname_label: bool = ..., legacy_hostname_label: bool = ...
) -> str: ...
@overload
def render_prometheus(
    reports: list[Report], *, hostname_label: bool = ..., legacy_hostname_label: bool = ...
) -> str: ...
def format_figure(value: float, unit: str) -> str: ...
def describe_saving(predicted_saving: list[Figure]) -> str: ...
def describe_shared_saving(shared_with: list[str]) -> str: ...
def describe_fix_all(fix_all_saving: list[Figure]) -> str: ...
def column_heading(key: str, unit: str) -> str: ...
def figure_row(figure: Figure) -> tuple[str, str]: ...
def describe_device(device: DeviceInfo) -> str: ...
def allocation_site(frames: list[StackFrame]) -> str: ...
def detect_format(path: str) -> InputFormat: ...
def analyze_files(
    paths: list[str],
    options: AnalysisOptions = ...,
    progress: Callable[[int, int], None] | None = ...,
) -> Report: ...
def analyze_job(ranks: list[Report], options: AnalysisOptions = ...) -> Report: ...
def expand_job_inputs(paths: list[str]) -> list[JobInput]: ...
def analyze_input(path: str, member: str = ..., options: AnalysisOptions = ...) -> Report: ...
def combine_input_reports(
    reports: list[Report], inputs: list[JobInput], options: AnalysisOptions = ...
) -> Report: ...
def export_chrome_trace(
    paths: list[str], out_path: str, options: AnalysisOptions = ...
) -> None: ...
def probe_capture() -> CaptureStatus: ...
def add_library_search_dir(directory: str) -> None: ...
def set_framework_info(info: FrameworkInfo) -> None: ...
def whatif_file(path: str, options: WhatIfOptions = ...) -> WhatIfResult: ...
def oom_cause_name(cause: OomCause) -> str: ...
def explain_oom_state(state: AllocatorOomState) -> OomExplanation: ...
def explain_oom_in_snapshot(path: str, request_bytes: int, device: int = ...) -> OomExplanation: ...
def compare_reports(before: Report, after: Report, options: CompareOptions = ...) -> Comparison: ...
def render_comparison_text(comparison: Comparison) -> str: ...
def render_comparison_json(comparison: Comparison, compact: bool = ...) -> str: ...
def compare_verdict_name(verdict: CompareVerdict) -> str: ...

class _Enum:
    name: str
    value: int
    __members__: ClassVar[dict[str, Any]]  # name -> member, in value order
    def __int__(self) -> int: ...

class JobInput:
    path: str
    member: str
    def name(self) -> str: ...

class DeviceInfo:
    ordinal: int
    name: str
    total_memory_bytes: int
    uuid: str
    pci_bus_id: str
    parent_uuid: str
    gpu_instance: int
    compute_instance: int

class SourceInfo:
    producer: str
    description: str
    simulated: bool
    rank: int
    world_size: int
    pid: int
    hostname: str
    wall_clock_offset_ns: int
    devices: list[DeviceInfo]
    properties: list[tuple[str, str]]
    def property(self, key: str, fallback: str = ...) -> str: ...

class SourceSummary:
    events: int
    dropped: int
    truncated: bool
    notes: list[str]
    damaged: int
    missing: list[str]

class InputCoverage:
    complete: bool
    events: int
    first_ns: int
    last_ns: int
    missing: list[str]

class Figure:
    key: str
    value: float
    unit: str
    label: str
    kind: FigureKind

class CallSite:
    location: str
    value: float
    share: float
    detail: str

class Finding:
    id: str
    severity: Severity
    title: str
    summary: str
    confidence: float
    figures: list[Figure]
    site_unit: str
    sites: list[CallSite]
    evidence: list[str]
    advice: list[str]
    rank: int
    device: int
    predicted_saving: list[Figure]
    saving_shared_with: list[str]

class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list[float | str]]
    units: list[str]
    kind: TableKind

class Series:
    id: str
    title: str
    unit: str
    points: list[tuple[float, float]]
    x_unit: str

class Section:
    id: str
    title: str
    figures: list[Figure]
    tables: list[Table]
    series: list[Series]

class Report:
    schema_version: int
    source: SourceInfo
    capture: SourceSummary
    input: InputCoverage
    findings: list[Finding]
    sections: list[Section]
    notes: list[str]
    fix_all_saving: list[Figure]
    observed: list[Evidence]
    observed_known: bool
    ranks: list[Report]

class AnalysisOptions:
    window: AnalysisWindow
    rank: int
    for_job: bool

class FrameworkInfo:
    name: str
    version: str
    cuda_version: str
    cudnn_version: str
    cuda_wheels_dir: str
    cupti_in_wheels: bool
    def __init__(self) -> None: ...

class SoftwareStack:
    driver_version: str
    driver_cuda: str
    framework: FrameworkInfo
    cupti: str
    cupti_cuda: str
    cupti_library: str
    cupti_mapped: list[str]

class StackIssue:
    id: str
    title: str
    problem: str
    fix: str

class CaptureStatus:
    level: CaptureLevel
    available: list[str]
    reasons: list[str]
    capturing: bool
    paused: bool
    paused_reason: str
    events: int
    dropped: int
    kernels_without_timing: int
    cupti_library: str
    cupti_version: int
    driver_version: str
    device_count: int
    stack: SoftwareStack
    stack_issues: list[StackIssue]

class StackFrame:
    filename: str
    name: str
    line: int
    def __init__(self, filename: str = ..., name: str = ..., line: int = ...) -> None: ...

class MemoryPayload:
    address: int
    bytes: int
    aux: int
    site: int
    extra: int

class RangePayload:
    name: int
    category: RangeCategory
    id: int
    parent: int

class OomPayload:
    requested_bytes: int
    free_bytes: int
    total_bytes: int
    site: int

class AnnotationPayload:
    text: int
    value: int

class CounterPayload:
    counter: CounterKind
    value: float

class Event:
    kind: EventKind
    flags: int
    device: int
    stream: int
    process: int
    thread: int
    start_ns: int
    end_ns: int
    memory: MemoryPayload
    range: RangePayload
    oom: OomPayload
    annotation: AnnotationPayload
    counter: CounterPayload

class CostBudget:
    cpu_share: float
    step_share: float
    period_ms: int

class SessionOptions:
    record_path: str
    record_max_bytes: int
    record_window_s: float
    record_window_bytes: int
    capture_gpu: bool
    deep: bool
    nvml_hz: float
    queue_capacity: int
    flush_period_ms: int
    report_period_ms: int
    cost_budget: CostBudget
    analysis: AnalysisOptions
    properties: list[tuple[str, str]]
    on_report: object
    http: str
    http_token: str
    collective_timeout_s: float

class HttpStatus:
    serving: bool
    address: str
    port: int
    reason: str

class AllocatorOomState:
    device: int
    requested_bytes: int
    segment_bytes: int
    device_free_known: bool
    device_free_bytes: int
    capacity_bytes: int
    reserved_bytes: int
    allocated_bytes: int
    inactive_split_bytes: int
    releasable_known: bool
    releasable_bytes: int
    largest_free_block_known: bool
    largest_free_block_bytes: int
    pending_free_bytes: int
    outside_framework_bytes: int
    other_processes_bytes: int
    expandable_segments: bool

class OomExplanation:
    cause: OomCause
    device: int
    requested_bytes: int
    rounded_bytes: int
    segment_bytes: int
    capacity_bytes: int
    device_free_known: bool
    device_free_bytes: int
    reserved_bytes: int
    allocated_bytes: int
    free_in_segments_bytes: int
    largest_free_block_bytes: int
    releasable_bytes: int
    inactive_split_bytes: int
    outside_framework_bytes: int
    other_processes_bytes: int
    expandable_segments: bool
    summary: str
    evidence: list[str]
    advice: list[str]
    pinning_sites: list[tuple[str, int]]

class Session:
    @staticmethod
    def create(options: SessionOptions) -> Session: ...
    @staticmethod
    def now_ns() -> int: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def running(self) -> bool: ...
    def step_begin(self, step: int) -> None: ...
    def step_end(self, step: int) -> None: ...
    def phase_begin(self, name: str) -> None: ...
    def phase_end(self) -> None: ...
    def input_wait_begin(self) -> None: ...
    def input_wait_end(self) -> None: ...
    def input_waited(self, since_ns: int) -> None: ...
    def record(self, event: Event) -> bool: ...
    def intern(self, text: str) -> int: ...
    def watch_memory(self, level_bytes: int, callback: Callable[[int], None]) -> int: ...
    def unwatch_memory(self, id: int) -> None: ...
    def record_watch_action(
        self, id: int, action: str, ok: bool, bytes_freed: int, detail: str
    ) -> None: ...
    def report(self) -> Report: ...
    def dump(self, path: str = ...) -> None: ...
    def request_dump(self) -> None: ...
    def replay(self, path: str) -> None: ...
    def whatif(self, options: WhatIfOptions) -> WhatIfResult: ...
    def record_flight_recorder(self, dump: bytes, rank: int = ...) -> None: ...
    def status(self) -> CaptureStatus: ...
    def http_status(self) -> HttpStatus: ...
    def pause_capture(self, reason: str) -> None: ...
    def resume_capture(self) -> None: ...

class WhatIfOptions:
    settings: list[str]
    capacity_bytes: int
    device_total_bytes: int
    sweep: bool
    device: int
    torch_version: str

class WhatIfCaution:
    @property
    def change(self) -> str: ...
    @property
    def unsupported(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def source(self) -> str: ...

class WhatIfOutcome:
    @property
    def label(self) -> str: ...
    @property
    def change(self) -> str: ...
    @property
    def settings(self) -> str: ...
    @property
    def start(self) -> WhatIfStart: ...
    @property
    def replayed_to_end(self) -> bool: ...
    @property
    def peak_reserved_bytes(self) -> int: ...
    @property
    def peak_allocated_bytes(self) -> int: ...
    @property
    def peak_stranded_bytes(self) -> int: ...
    @property
    def final_reserved_bytes(self) -> int: ...
    @property
    def device_mallocs(self) -> int: ...
    @property
    def device_frees(self) -> int: ...
    @property
    def page_maps(self) -> int: ...
    @property
    def page_unmaps(self) -> int: ...
    @property
    def alloc_retries(self) -> int: ...
    @property
    def oom(self) -> bool: ...
    @property
    def oom_entry(self) -> int: ...
    @property
    def oom_request_bytes(self) -> int: ...
    @property
    def recorded_ooms(self) -> int: ...
    @property
    def recorded_ooms_avoided(self) -> int: ...
    @property
    def cautions(self) -> list[WhatIfCaution]: ...

class WhatIfReproduction:
    @property
    def checked(self) -> bool: ...
    @property
    def exact(self) -> bool: ...
    @property
    def recorded_peak_reserved_bytes(self) -> int: ...
    @property
    def modelled_peak_reserved_bytes(self) -> int: ...
    @property
    def recorded_segment_actions(self) -> int: ...
    @property
    def modelled_segment_actions(self) -> int: ...
    @property
    def matching_segment_actions(self) -> int: ...
    @property
    def allocations(self) -> int: ...
    @property
    def allocations_at_recorded_address(self) -> int: ...
    @property
    def recorded_final_segments(self) -> int: ...
    @property
    def modelled_final_segments(self) -> int: ...
    @property
    def final_segments_match(self) -> bool: ...
    @property
    def first_difference(self) -> str: ...

class WhatIfResult:
    @property
    def source(self) -> str: ...
    @property
    def device(self) -> int: ...
    @property
    def history_entries(self) -> int: ...
    @property
    def allocations(self) -> int: ...
    @property
    def history_from_start(self) -> bool: ...
    @property
    def segments_before_history(self) -> int: ...
    @property
    def live_blocks_before_history(self) -> int: ...
    @property
    def settings_recorded(self) -> bool: ...
    @property
    def recorded_settings(self) -> str: ...
    @property
    def capacity_bytes(self) -> int: ...
    @property
    def capacity_origin(self) -> str: ...
    @property
    def reproduction(self) -> WhatIfReproduction: ...
    @property
    def outcomes(self) -> list[WhatIfOutcome]: ...
    @property
    def advice(self) -> str: ...
    @property
    def notes(self) -> list[str]: ...
    @property
    def history_complete(self) -> bool: ...
    @property
    def torch_version(self) -> str: ...
    @property
    def torch_version_origin(self) -> str: ...
    @property
    def torch_version_note(self) -> str: ...
    def text(self) -> str: ...
    def to_json(self) -> str: ...

class CompareOptions:
    noise_multiplier: float
    min_steps: int
    min_relative_change: float
    def __init__(self) -> None: ...

class CompareDelta:
    @property
    def key(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def area(self) -> CompareArea: ...
    @property
    def rank(self) -> int: ...
    @property
    def before(self) -> float: ...
    @property
    def after(self) -> float: ...
    @property
    def change(self) -> float: ...
    @property
    def relative_change(self) -> float: ...
    @property
    def noise(self) -> float: ...
    @property
    def noise_basis(self) -> str: ...
    @property
    def lower_is_better(self) -> bool: ...
    @property
    def judgement(self) -> DeltaJudgement: ...
    @property
    def outcome(self) -> bool: ...
    @property
    def deciding(self) -> bool: ...

class FindingChange:
    @property
    def id(self) -> str: ...
    @property
    def change(self) -> FindingChangeKind: ...
    @property
    def rank(self) -> int: ...
    @property
    def severity_before(self) -> Severity: ...
    @property
    def severity_after(self) -> Severity: ...
    @property
    def title_before(self) -> str: ...
    @property
    def title_after(self) -> str: ...
    @property
    def saving_before_ns(self) -> float: ...
    @property
    def saving_after_ns(self) -> float: ...

class CompareReason:
    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def explains(self) -> list[CompareArea]: ...

class CompareSide:
    @property
    def description(self) -> str: ...
    @property
    def producer(self) -> str: ...
    @property
    def headline(self) -> str: ...
    @property
    def observed(self) -> list[Evidence]: ...
    @property
    def observed_known(self) -> bool: ...
    @property
    def devices(self) -> list[str]: ...
    @property
    def steps(self) -> int: ...
    @property
    def ranks(self) -> int: ...
    @property
    def software(self) -> list[tuple[str, str]]: ...

class Comparison:
    @property
    def verdict(self) -> CompareVerdict: ...
    @property
    def comparable(self) -> bool: ...
    @property
    def reasons(self) -> list[CompareReason]: ...
    @property
    def headline(self) -> str: ...
    @property
    def before(self) -> CompareSide: ...
    @property
    def after(self) -> CompareSide: ...
    @property
    def compared(self) -> list[Evidence]: ...
    @property
    def not_compared(self) -> list[str]: ...
    @property
    def deltas(self) -> list[CompareDelta]: ...
    @property
    def findings(self) -> list[FindingChange]: ...
    @property
    def notes(self) -> list[str]: ...

# <names> generated by tools/gen_names.py from libgpudiag/src/core/names.cpp

class AnalysisWindow(_Enum):
    steps: AnalysisWindow
    hta: AnalysisWindow
    all: AnalysisWindow

class InputFormat(_Enum):
    unknown: InputFormat
    recording: InputFormat
    kineto_json: InputFormat
    torch_snapshot: InputFormat
    report_json: InputFormat
    nsight_sqlite: InputFormat
    flight_recorder: InputFormat

class CaptureLevel(_Enum):
    no_gpu: CaptureLevel
    nvml: CaptureLevel
    framework: CaptureLevel
    cupti_activity: CaptureLevel
    cupti_deep: CaptureLevel

class CompareVerdict(_Enum):
    improvement: CompareVerdict
    regression: CompareVerdict
    mixed: CompareVerdict
    unchanged: CompareVerdict
    inconclusive: CompareVerdict

class CompareArea(_Enum):
    time: CompareArea
    gpu: CompareArea
    memory: CompareArea
    health: CompareArea

class DeltaJudgement(_Enum):
    improved: DeltaJudgement
    regressed: DeltaJudgement
    within_noise: DeltaJudgement
    not_comparable: DeltaJudgement

class FindingChangeKind(_Enum):
    appeared: FindingChangeKind
    resolved: FindingChangeKind
    persisted: FindingChangeKind

class EventKind(_Enum):
    invalid: EventKind
    device_alloc: EventKind
    device_free: EventKind
    pool_alloc: EventKind
    pool_free: EventKind
    pool_resize: EventKind
    vm_map: EventKind
    vm_unmap: EventKind
    segment_alloc: EventKind
    segment_free: EventKind
    block_alloc: EventKind
    block_free: EventKind
    host_alloc: EventKind
    host_free: EventKind
    managed_alloc: EventKind
    managed_free: EventKind
    kernel: EventKind
    memcpy: EventKind
    memset: EventKind
    sync: EventKind
    api_call: EventKind
    collective: EventKind
    range_begin: EventKind
    range_end: EventKind
    range: EventKind
    step_begin: EventKind
    step_end: EventKind
    out_of_memory: EventKind
    annotation: EventKind
    counter: EventKind
    capture_paused: EventKind
    capture_resumed: EventKind

class MemoryKind(_Enum):
    unknown: MemoryKind
    device: MemoryKind
    pageable: MemoryKind
    pinned: MemoryKind
    managed: MemoryKind
    array: MemoryKind

class CopyDirection(_Enum):
    unknown: CopyDirection
    host_to_device: CopyDirection
    device_to_host: CopyDirection
    device_to_device: CopyDirection
    host_to_host: CopyDirection
    peer_to_peer: CopyDirection

class SyncKind(_Enum):
    unknown: SyncKind
    event: SyncKind
    stream_wait_event: SyncKind
    stream: SyncKind
    device: SyncKind
    implicit: SyncKind

class RangeCategory(_Enum):
    generic: RangeCategory
    phase: RangeCategory
    input_wait: RangeCategory
    cpu_op: RangeCategory
    step: RangeCategory
    communication: RangeCategory
    user_annotation: RangeCategory
    os_runtime: RangeCategory

class ApiDomain(_Enum):
    unknown: ApiDomain
    runtime: ApiDomain
    driver: ApiDomain

class CounterKind(_Enum):
    unknown: CounterKind
    gpu_utilization_percent: CounterKind
    memory_utilization_percent: CounterKind
    device_memory_used_bytes: CounterKind
    device_memory_total_bytes: CounterKind
    process_memory_used_bytes: CounterKind
    foreign_process_memory_bytes: CounterKind
    sm_clock_mhz: CounterKind
    sm_clock_max_mhz: CounterKind
    temperature_c: CounterKind
    power_watts: CounterKind
    power_limit_watts: CounterKind
    throttle_reasons: CounterKind
    ecc_corrected_errors: CounterKind
    ecc_uncorrected_errors: CounterKind
    pcie_link_generation: CounterKind
    pcie_link_generation_max: CounterKind
    pcie_link_width: CounterKind
    pcie_link_width_max: CounterKind
    pcie_replays: CounterKind
    framework_allocated_bytes: CounterKind
    framework_reserved_bytes: CounterKind
    framework_alloc_retries: CounterKind
    framework_ooms: CounterKind
    framework_inactive_split_bytes: CounterKind
    dropped_records: CounterKind
    capture_overhead_ns: CounterKind
    untimed_kernels: CounterKind
    retired_pages_single_bit: CounterKind
    retired_pages_double_bit: CounterKind
    retired_pages_pending: CounterKind
    remapped_rows_correctable: CounterKind
    remapped_rows_uncorrectable: CounterKind
    row_remap_pending: CounterKind
    row_remap_failed: CounterKind
    xid_error: CounterKind
    nvlink_links_active: CounterKind
    nvlink_replay_errors: CounterKind
    nvlink_recovery_errors: CounterKind
    nvlink_crc_errors: CounterKind
    power_limit_default_watts: CounterKind
    persistence_mode: CounterKind
    mig_mode: CounterKind
    sm_active_percent: CounterKind
    sm_occupancy_percent: CounterKind
    tensor_active_percent: CounterKind
    dram_active_percent: CounterKind
    fan_speed_percent: CounterKind
    other_process_memory_bytes: CounterKind
    foreign_process_sm_percent: CounterKind

class MemoryCategory(_Enum):
    other: MemoryCategory
    parameters: MemoryCategory
    gradients: MemoryCategory
    optimizer_state: MemoryCategory
    activations: MemoryCategory

class MemoryMetric(_Enum):
    allocated: MemoryMetric
    reserved: MemoryMetric
    device_used: MemoryMetric

class OomCause(_Enum):
    unknown: OomCause
    fragmentation: OomCause
    bloated_cache: OomCause
    memory_outside_framework: OomCause
    too_little_memory: OomCause
    free_block_available: OomCause
    other_process: OomCause

class Severity(_Enum):
    info: Severity
    warning: Severity
    critical: Severity

class FigureKind(_Enum):
    gauge: FigureKind
    total: FigureKind
    peak: FigureKind

class Evidence(_Enum):
    steps: Evidence
    input_waits: Evidence
    gpu_activity: Evidence
    device_memory: Evidence
    device_health: Evidence

class TableKind(_Enum):
    rows: TableKind
    partition: TableKind
    data: TableKind

class StatusCode(_Enum):
    ok: StatusCode
    invalid_argument: StatusCode
    not_found: StatusCode
    unavailable: StatusCode
    corrupt_data: StatusCode
    unsupported: StatusCode
    io_error: StatusCode
    resource_exhausted: StatusCode
    failed_precondition: StatusCode
    internal: StatusCode

class WhatIfStart(_Enum):
    recorded_state: WhatIfStart
    live_blocks: WhatIfStart

# </names>
