/* SPDX-License-Identifier: Apache-2.0 */
/* The C API of gpudiag: opaque handles, status codes, never throws, never aborts.
 *
 *     gpudiag_session_t* s = NULL;
 *     gpudiag_session_options_t opts;
 *     gpudiag_session_options_init(&opts);
 *     opts.record_path = "service.gpudiag";
 *     if (gpudiag_session_create(&opts, &s) == GPUDIAG_OK) {
 *         gpudiag_session_start(s);
 *         ... gpudiag_session_step_begin(s, i); ... gpudiag_session_step_end(s, i); ...
 *         char* text = NULL;
 *         if (gpudiag_session_report(s, GPUDIAG_FORMAT_TEXT, &text) == GPUDIAG_OK) {
 *             puts(text);
 *             gpudiag_free(text);
 *         }
 *         gpudiag_session_stop(s);
 *         gpudiag_session_destroy(s);
 *     }
 *
 * Every function returns a gpudiag_status_t; on failure gpudiag_last_error() gives the message
 * (per thread). Strings returned through out-parameters are freed with gpudiag_free().
 */
#ifndef GPUDIAG_GPUDIAG_H
#define GPUDIAG_GPUDIAG_H

#include <stddef.h>
#include <stdint.h>

#include <gpudiag/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpudiag_status {
    GPUDIAG_OK = 0,
    GPUDIAG_INVALID_ARGUMENT = 1,
    GPUDIAG_NOT_FOUND = 2,
    GPUDIAG_UNAVAILABLE = 3,
    GPUDIAG_CORRUPT_DATA = 4,
    GPUDIAG_UNSUPPORTED = 5,
    GPUDIAG_IO_ERROR = 6,
    GPUDIAG_RESOURCE_EXHAUSTED = 7,
    GPUDIAG_FAILED_PRECONDITION = 8,
    GPUDIAG_INTERNAL = 9,
    GPUDIAG_STATUS_FORCE_INT32 = 0x7FFFFFFF
} gpudiag_status_t;

/* The *_FORCE_INT32 members make every int a valid value of the enum, so a caller passing a bad
 * value gets GPUDIAG_INVALID_ARGUMENT instead of undefined behaviour. */
typedef enum gpudiag_format {
    GPUDIAG_FORMAT_TEXT = 0,
    GPUDIAG_FORMAT_JSON = 1,         /* indented */
    GPUDIAG_FORMAT_JSON_COMPACT = 2, /* one line of at most 16 KiB, for logs (render_json_line) */
    GPUDIAG_FORMAT_PROMETHEUS = 3,   /* text exposition 0.0.4, for a /metrics endpoint */
    GPUDIAG_FORMAT_FORCE_INT32 = 0x7FFFFFFF
} gpudiag_format_t;

typedef struct gpudiag_session gpudiag_session_t;

/* Called with a rendered report (JSON) every report_period_ms; `json` is valid during the call. */
typedef void (*gpudiag_report_fn)(const char* json, void* user_data);
/* Called when the memory in use on a device rises to a watch's level (see
   gpudiag::Session::watch_memory for what counts as in use). */
typedef void (*gpudiag_watch_fn)(uint64_t bytes_in_use, void* user_data);

/* Fill with gpudiag_session_options_init(), then set what differs. `size` (set by init) is the
 * struct's size in the caller's build: a newer library reads only the fields an older caller's
 * struct has, and fields are only ever appended. */
typedef struct gpudiag_session_options {
    size_t size;               /* sizeof(gpudiag_session_options_t), set by init */
    const char* record_path;   /* NULL or "" = no recording */
    int capture_gpu;           /* default 1 */
    int deep;                  /* default 0 */
    double nvml_hz;            /* default 2.0; 0 = off */
    uint32_t queue_capacity;   /* default 65536 */
    uint32_t flush_period_ms;  /* default 250 */
    uint32_t report_period_ms; /* default 0 = no periodic report */
    gpudiag_report_fn on_report;
    void* on_report_user_data;
    uint64_t record_max_bytes;    /* default 0 = no cap on the recording file (else >= 4 MiB) */
    double record_window_s;       /* default 0; > 0: keep only the last N s, written on demand */
    uint64_t record_window_bytes; /* default 256 MiB: the window's memory */
    /* What gpudiag may cost (gpudiag::CostBudget); past it, it takes in fewer event kinds. */
    double cost_budget_cpu_share;   /* default 0.01: 1 % of the program's CPU time; 0 = no limit */
    double cost_budget_step_share;  /* default 0.005: 0.5 % of a step's time; 0 = no limit */
    uint32_t cost_budget_period_ms; /* default 10000: measured over this; 0 = budget off */
} gpudiag_session_options_t;

/* The library version, e.g. "0.1.0". */
GPUDIAG_API const char* gpudiag_version(void);
/* The message of the last failed call on this thread ("" when none). */
GPUDIAG_API const char* gpudiag_last_error(void);
/* Frees a string returned by gpudiag. NULL is fine. */
GPUDIAG_API void gpudiag_free(char* text);

GPUDIAG_API void gpudiag_session_options_init(gpudiag_session_options_t* options);
GPUDIAG_API gpudiag_status_t gpudiag_session_create(const gpudiag_session_options_t* options,
                                                    gpudiag_session_t** out);
/* Stops the session if needed and frees it. NULL is fine. */
GPUDIAG_API void gpudiag_session_destroy(gpudiag_session_t* session);
GPUDIAG_API gpudiag_status_t gpudiag_session_start(gpudiag_session_t* session);
GPUDIAG_API gpudiag_status_t gpudiag_session_stop(gpudiag_session_t* session);
GPUDIAG_API gpudiag_status_t gpudiag_session_step_begin(gpudiag_session_t* session, uint64_t step);
GPUDIAG_API gpudiag_status_t gpudiag_session_step_end(gpudiag_session_t* session, uint64_t step);
GPUDIAG_API gpudiag_status_t gpudiag_session_phase_begin(gpudiag_session_t* session,
                                                         const char* name);
GPUDIAG_API gpudiag_status_t gpudiag_session_phase_end(gpudiag_session_t* session);
/* The loop is about to wait for its next batch of input / has received it: the time between is
 * the loop's input wait (input_bound), as a DataLoader fetch is for PyTorch. */
GPUDIAG_API gpudiag_status_t gpudiag_session_input_wait_begin(gpudiag_session_t* session);
GPUDIAG_API gpudiag_status_t gpudiag_session_input_wait_end(gpudiag_session_t* session);
GPUDIAG_API gpudiag_status_t gpudiag_session_watch_memory(gpudiag_session_t* session,
                                                          uint64_t level_bytes,
                                                          gpudiag_watch_fn callback,
                                                          void* user_data, uint64_t* watch_id);
GPUDIAG_API gpudiag_status_t gpudiag_session_unwatch_memory(gpudiag_session_t* session,
                                                            uint64_t watch_id);
/* The diagnosis so far, rendered; free *out with gpudiag_free. */
GPUDIAG_API gpudiag_status_t gpudiag_session_report(gpudiag_session_t* session,
                                                    gpudiag_format_t format, char** out);
/* Device memory the program allocated or freed itself (cudaMalloc by the service, TensorRT or a
 * library, as CUPTI would report it): `site` names the call site ("engine.cpp:88 bind_output"),
 * NULL when unknown. GPUDIAG_RESOURCE_EXHAUSTED when the hand-off was full (the event is
 * dropped and counted). */
GPUDIAG_API gpudiag_status_t gpudiag_session_record_allocation(gpudiag_session_t* session,
                                                               int device, uint64_t address,
                                                               uint64_t bytes, const char* site);
GPUDIAG_API gpudiag_status_t gpudiag_session_record_free(gpudiag_session_t* session, int device,
                                                         uint64_t address, uint64_t bytes);
/* Yields CUPTI to another tool (a profiler) and takes it back; NVML and markers go on. */
GPUDIAG_API gpudiag_status_t gpudiag_session_pause_capture(gpudiag_session_t* session,
                                                           const char* reason);
GPUDIAG_API gpudiag_status_t gpudiag_session_resume_capture(gpudiag_session_t* session);
/* Writes the window of recent events (record_window_s) to `path`, or to the next numbered dump
 * beside record_path when `path` is NULL or "". */
GPUDIAG_API gpudiag_status_t gpudiag_session_dump(gpudiag_session_t* session, const char* path);
/* Asks for a dump at the session's next tick. Async-signal-safe: for a signal handler. */
GPUDIAG_API void gpudiag_session_request_dump(gpudiag_session_t* session);
/* Capture level name ("no_gpu", "nvml", "framework", "cupti_activity", "cupti_deep"), events
 * delivered and dropped. Any out-pointer may be NULL. */
GPUDIAG_API gpudiag_status_t gpudiag_session_status(gpudiag_session_t* session, const char** level,
                                                    uint64_t* events, uint64_t* dropped);

/* Flight Recorder data of this process (torch's _dump_nccl_trace() pickle or its JSON form, `size`
 * bytes): its collectives are watched (what is still in flight, past collective_timeout_s a dump).
 * `rank`: the caller's rank, -1 when the dump says it. */
GPUDIAG_API gpudiag_status_t gpudiag_session_record_flight_recorder(gpudiag_session_t* session,
                                                                    const void* dump, size_t size,
                                                                    int rank);
/* What PyTorch's CUDA caching allocator would have done with other settings, replayed over the
 * session's recording (record_path; its window with record_window_s): see docs/whatif.md.
 * `settings`: tried together over the recorded ones, in PYTORCH_CUDA_ALLOC_CONF form
 * ("expandable_segments:True,max_split_size_mb:128"); NULL or "": the usual settings one at a
 * time only. `format`: GPUDIAG_FORMAT_TEXT or _JSON. GPUDIAG_FAILED_PRECONDITION when the session
 * recorded none of the allocator's own operations (the message says how to record them). */
GPUDIAG_API gpudiag_status_t gpudiag_session_whatif(gpudiag_session_t* session,
                                                    const char* settings, gpudiag_format_t format,
                                                    char** out);

/* Offline: analyse files (recordings, Kineto traces, torch snapshots) of one job. */
GPUDIAG_API gpudiag_status_t gpudiag_analyze_files(const char* const* paths, size_t count,
                                                   gpudiag_format_t format, char** out);
/* Offline: the what-if of gpudiag_session_whatif over a file (a torch memory snapshot with its
 * trace, or a gpudiag recording holding the allocator's operations). */
GPUDIAG_API gpudiag_status_t gpudiag_whatif_file(const char* path, const char* settings,
                                                 gpudiag_format_t format, char** out);

#ifdef __cplusplus
}
#endif

#endif /* GPUDIAG_GPUDIAG_H */
