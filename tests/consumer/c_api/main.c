/* SPDX-License-Identifier: Apache-2.0 */
/* A C consumer of gpudiag.h: a session without a GPU, its report in both formats, errors. */
#include <gpudiag/gpudiag.h>

#include <stdio.h>
#include <string.h>

static int fail(const char* what) {
    fprintf(stderr, "c_consumer: %s (%s)\n", what, gpudiag_last_error());
    return 1;
}

static void on_watch(uint64_t bytes_in_use, void* user_data) {
    (void)bytes_in_use;
    (void)user_data;
}

int main(void) {
    gpudiag_session_options_t options;
    gpudiag_session_t* session = NULL;
    const char* level = NULL;
    uint64_t events = 0;
    uint64_t watch = 0;
    char* text = NULL;
    const char* missing[] = {"/nonexistent/trace.json"};

    gpudiag_session_options_init(&options);
    options.capture_gpu = 0;
    options.nvml_hz = 0;
    if (gpudiag_session_create(&options, &session) != GPUDIAG_OK) return fail("create");
    if (gpudiag_session_start(session) != GPUDIAG_OK) return fail("start");
    if (gpudiag_session_watch_memory(session, (uint64_t)1 << 30, on_watch, NULL, &watch) !=
        GPUDIAG_OK) {
        return fail("watch_memory");
    }
    gpudiag_session_step_begin(session, 1);
    if (gpudiag_session_input_wait_begin(session) != GPUDIAG_OK ||
        gpudiag_session_input_wait_end(session) != GPUDIAG_OK) {
        return fail("input_wait");
    }
    gpudiag_session_phase_begin(session, "forward");
    gpudiag_session_phase_end(session);
    gpudiag_session_step_end(session, 1);
    if (gpudiag_session_record_allocation(session, 0, 0x70000000u, 1u << 20, "main.c:40") !=
        GPUDIAG_OK) {
        return fail("record_allocation");
    }
    if (gpudiag_session_record_free(session, 0, 0x70000000u, 1u << 20) != GPUDIAG_OK) {
        return fail("record_free");
    }
    if (gpudiag_session_status(session, &level, &events, NULL) != GPUDIAG_OK) return fail("status");
    if (level == NULL || strlen(level) == 0) return fail("no capture level name");
    if (gpudiag_session_report(session, GPUDIAG_FORMAT_JSON, &text) != GPUDIAG_OK) {
        return fail("report");
    }
    if (strstr(text, "\"schema_version\"") == NULL) return fail("the JSON report has no schema");
    gpudiag_free(text);
    text = NULL;
    if (gpudiag_session_report(session, (gpudiag_format_t)42, &text) != GPUDIAG_INVALID_ARGUMENT) {
        return fail("a bad format was accepted");
    }
    if (gpudiag_session_stop(session) != GPUDIAG_OK) return fail("stop");
    gpudiag_session_destroy(session);

    if (gpudiag_analyze_files(missing, 1, GPUDIAG_FORMAT_TEXT, &text) != GPUDIAG_NOT_FOUND) {
        return fail("a missing file was not GPUDIAG_NOT_FOUND");
    }
    if (strstr(gpudiag_last_error(), "/nonexistent/trace.json") == NULL) {
        return fail("the error does not name the file");
    }
    if (gpudiag_whatif_file(missing[0], "expandable_segments:True", GPUDIAG_FORMAT_JSON, &text) !=
        GPUDIAG_NOT_FOUND) {
        return fail("a missing snapshot was not GPUDIAG_NOT_FOUND");
    }
    printf("c consumer ok: gpudiag %s, capture level %s\n", gpudiag_version(), level);
    return 0;
}
