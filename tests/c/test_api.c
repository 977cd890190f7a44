/* The public C API (include/nnfuse.h) end to end, as a user calls it: load from
 * a buffer, query inputs/outputs with symbolic dims, run on a batch the file
 * left symbolic, compare with ONNX Runtime's numbers, and get clear errors for
 * the mistakes callers make. tests/c/data/api_model.h holds the model and the
 * expected output (written by onnx.helper + onnxruntime; see its header). */
#include "nnfuse.h"

#include "check.h"
#include "data/api_model.h"

#include <pthread.h>
#include <string.h>

static float input[2 * 3 * 5 * 5];
static const int64_t shape[4] = {2, 3, 5, 5};

static int run_once(nnf_session *s, float *max_err) {
    nnf_tensor in = {.name = "x", .dtype = NNF_DTYPE_FLOAT32, .rank = 4, .shape = shape, .data = input};
    const nnf_tensor *outs = NULL;
    size_t n = 0;
    if (nnf_session_run(s, &in, 1, &outs, &n) != NNF_OK || n != 1 || outs[0].rank != 4)
        return 0;
    const float *y = outs[0].data;
    *max_err = 0;
    for (int i = 0; i < 8; i++) {
        float e = fabsf(y[i] - api_expected[i]);
        if (e > *max_err)
            *max_err = e;
    }
    return outs[0].shape[0] == 2 && outs[0].shape[1] == 4 && outs[0].shape[2] == 1 && outs[0].shape[3] == 1;
}

typedef struct thread_arg {
    const nnf_model *model;
    int ok;
} thread_arg;

/* A model is shared by sessions on different threads. */
static void *thread_main(void *p) {
    thread_arg *a = p;
    nnf_session *s = NULL;
    float err = 1;
    a->ok = nnf_session_create(a->model, NULL, &s) == NNF_OK;
    for (int i = 0; a->ok && i < 20; i++)
        a->ok = run_once(s, &err) && err < 1e-5f;
    nnf_session_destroy(s);
    return NULL;
}

int main(void) {
    for (int i = 0; i < 150; i++)
        input[i] = (float)i / 75.0f - 0.5f;

    nnf_model *model = NULL;
    CHECK(nnf_model_load_buffer(api_model, sizeof api_model, NULL, NULL, &model) == NNF_OK);
    if (!model) {
        fprintf(stderr, "load failed: %s\n", nnf_last_error());
        TEST_MAIN_END();
    }
    CHECK(nnf_model_input_count(model) == 1 && nnf_model_output_count(model) == 1);
    nnf_value_info info;
    CHECK(nnf_model_input_info(model, 0, &info) == NNF_OK);
    CHECK(!strcmp(info.name, "x") && info.dtype == NNF_DTYPE_FLOAT32 && info.rank == 4);
    CHECK(info.dims[0] < 0 && info.dim_names[0] && !strcmp(info.dim_names[0], "batch"));
    CHECK(info.dims[1] == 3 && info.dims[2] == 5 && info.dims[3] == 5);
    CHECK(nnf_model_output_info(model, 0, &info) == NNF_OK && !strcmp(info.name, "y"));
    CHECK(nnf_model_input_info(model, 1, &info) == NNF_ERR_INVALID_ARGUMENT);

    /* every kernel choice gives ONNX Runtime's numbers */
    for (int threads = 1; threads <= 2; threads++) {
        nnf_session_options so = nnf_session_options_default();
        so.threads = threads;
        nnf_session *s = NULL;
        float err = 1;
        CHECK(nnf_session_create(model, &so, &s) == NNF_OK);
        CHECK(run_once(s, &err));
        CHECK_MSG(err < 1e-5f, "max error %g with %d threads", err, threads);
        CHECK(run_once(s, &err) && err < 1e-5f); /* a second run on reused buffers */
        nnf_session_destroy(s);
    }

    /* caller mistakes: status plus a message naming the input */
    nnf_session *s = NULL;
    CHECK(nnf_session_create(model, NULL, &s) == NNF_OK);
    const nnf_tensor *outs;
    size_t n;
    int64_t bad_shape[4] = {2, 4, 5, 5};
    nnf_tensor wrong_name = {.name = "nope", .dtype = NNF_DTYPE_FLOAT32, .rank = 4, .shape = shape, .data = input};
    CHECK(nnf_session_run(s, &wrong_name, 1, &outs, &n) == NNF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(nnf_session_last_error(s), "'x'") != NULL);
    nnf_tensor wrong_shape = {.name = "x", .dtype = NNF_DTYPE_FLOAT32, .rank = 4, .shape = bad_shape, .data = input};
    CHECK(nnf_session_run(s, &wrong_shape, 1, &outs, &n) == NNF_ERR_SHAPE);
    CHECK(strstr(nnf_session_last_error(s), "'x'") != NULL);
    nnf_tensor wrong_dtype = {.name = "x", .dtype = NNF_DTYPE_INT64, .rank = 4, .shape = shape, .data = input};
    CHECK(nnf_session_run(s, &wrong_dtype, 1, &outs, &n) == NNF_ERR_SHAPE);
    nnf_tensor wrong_rank = {.name = "x", .dtype = NNF_DTYPE_FLOAT32, .rank = 3, .shape = shape, .data = input};
    CHECK(nnf_session_run(s, &wrong_rank, 1, &outs, &n) == NNF_ERR_SHAPE);
    CHECK(nnf_session_run(s, NULL, 0, &outs, &n) == NNF_ERR_INVALID_ARGUMENT);
    float err = 1;
    CHECK(run_once(s, &err) && err < 1e-5f); /* the session still works after errors */
    CHECK(nnf_session_last_error(s)[0] == 0);
    nnf_session_destroy(s);

    /* one model, sessions on two threads at once */
    pthread_t t[2];
    thread_arg args[2] = {{model, 0}, {model, 0}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, thread_main, &args[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(args[0].ok && args[1].ok);
    /* a session that has run may be destroyed after its model (garbage
     * collectors, e.g. Python's at exit, finalise in any order) */
    CHECK(nnf_session_create(model, NULL, &s) == NNF_OK && run_once(s, &err));
    nnf_model_destroy(model);
    nnf_session_destroy(s);

    /* files that are not models, missing files, NULL arguments */
    nnf_model *m2 = NULL;
    CHECK(nnf_model_load("/nonexistent/model.onnx", NULL, &m2) == NNF_ERR_IO && !m2);
    CHECK(strstr(nnf_last_error(), "/nonexistent/model.onnx") != NULL);
    CHECK(nnf_model_load_buffer("garbage!", 8, NULL, NULL, &m2) == NNF_ERR_INVALID_MODEL && !m2);
    CHECK(nnf_model_load(NULL, NULL, &m2) == NNF_ERR_INVALID_ARGUMENT);
    CHECK(nnf_session_create(NULL, NULL, &s) == NNF_ERR_INVALID_ARGUMENT);
    nnf_model_destroy(NULL);
    nnf_session_destroy(NULL);
    TEST_MAIN_END();
}
