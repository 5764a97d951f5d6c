# SPDX-License-Identifier: Apache-2.0
# Stub for the C++ extension gpudiag._core (checked by tests/python/integration/test_core_bindings.py).
from typing import Callable

__version__: str
NO_DEVICE: int

def version() -> str: ...
def status_code_name(code: StatusCode) -> str: ...
def severity_name(severity: Severity) -> str: ...
def event_kind_name(kind: EventKind) -> str: ...
def input_format_name(format: InputFormat) -> str: ...
def capture_level_name(level: CaptureLevel) -> str: ...
def render_text(report: Report) -> str: ...
def render_json(report: Report) -> str: ...
def detect_format(path: str) -> InputFormat: ...
def analyze_files(paths: list[str], options: AnalysisOptions = ...,
                  progress: Callable[[int, int], None] | None = ...) -> Report: ...
def analyze_job(ranks: list[Report], options: AnalysisOptions = ...) -> Report: ...
def export_chrome_trace(paths: list[str], out_path: str,
                        options: AnalysisOptions = ...) -> None: ...
def probe_capture() -> CaptureStatus: ...
def oom_cause_name(cause: OomCause) -> str: ...
def explain_oom_state(state: AllocatorOomState) -> OomExplanation: ...
def explain_oom_in_snapshot(path: str, request_bytes: int, device: int = ...) -> OomExplanation: ...

class _Enum:
    name: str
    value: int
    def __int__(self) -> int: ...

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

class Severity(_Enum):
    info: Severity
    warning: Severity
    critical: Severity

class AnalysisWindow(_Enum):
    steps: AnalysisWindow
    hta: AnalysisWindow
    all: AnalysisWindow

class InputFormat(_Enum):
    unknown: InputFormat
    recording: InputFormat
    kineto_json: InputFormat
    torch_snapshot: InputFormat

class CaptureLevel(_Enum):
    no_gpu: CaptureLevel
    nvml: CaptureLevel
    framework: CaptureLevel
    cupti_activity: CaptureLevel
    cupti_deep: CaptureLevel

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
    kernel: EventKind
    memcpy: EventKind
    memset: EventKind
    sync: EventKind
    api_call: EventKind
    range_begin: EventKind
    range_end: EventKind
    range: EventKind
    step_begin: EventKind
    step_end: EventKind
    out_of_memory: EventKind
    annotation: EventKind
    counter: EventKind

class RangeCategory(_Enum):
    generic: RangeCategory
    phase: RangeCategory
    input_wait: RangeCategory
    cpu_op: RangeCategory
    step: RangeCategory
    communication: RangeCategory
    user_annotation: RangeCategory

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
    framework_allocated_bytes: CounterKind
    framework_reserved_bytes: CounterKind
    framework_alloc_retries: CounterKind
    framework_ooms: CounterKind
    framework_inactive_split_bytes: CounterKind
    dropped_records: CounterKind

class DeviceInfo:
    ordinal: int
    name: str
    total_memory_bytes: int
    uuid: str

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

class Figure:
    key: str
    value: float
    unit: str
    label: str

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

class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list[float | str]]

class Series:
    id: str
    title: str
    unit: str
    points: list[tuple[float, float]]

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
    findings: list[Finding]
    sections: list[Section]
    notes: list[str]
    ranks: list[Report]

class AnalysisOptions:
    window: AnalysisWindow
    rank: int

class CaptureStatus:
    level: CaptureLevel
    reasons: list[str]
    capturing: bool
    paused: bool
    paused_reason: str
    events: int
    dropped: int
    cupti_library: str
    cupti_version: int
    driver_version: str
    device_count: int

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

class SessionOptions:
    record_path: str
    capture_gpu: bool
    deep: bool
    nvml_hz: float
    queue_capacity: int
    flush_period_ms: int
    report_period_ms: int
    analysis: AnalysisOptions
    properties: list[tuple[str, str]]
    on_report: object

class OomCause(_Enum):
    unknown: OomCause
    fragmentation: OomCause
    bloated_cache: OomCause
    outside_framework: OomCause
    too_little_memory: OomCause
    free_block_available: OomCause
    other_process: OomCause

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
    def record(self, event: Event) -> bool: ...
    def intern(self, text: str) -> int: ...
    def watch_memory(self, threshold_bytes: int, callback: Callable[[int], None]) -> int: ...
    def unwatch_memory(self, id: int) -> None: ...
    def record_watch_action(self, id: int, action: str, ok: bool, bytes_freed: int,
                            detail: str) -> None: ...
    def report(self) -> Report: ...
    def status(self) -> CaptureStatus: ...
    def pause_capture(self, reason: str) -> None: ...
    def resume_capture(self) -> None: ...
