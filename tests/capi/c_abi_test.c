/* The C ABI from C (compiled as C99 and, by the same script, as C++ with
 * -Wall -Wextra -Werror -pedantic): version, statuses and messages, buffer
 * size queries, prediction from a file, bytes and pixels, training options
 * refused by name, and a training run cancelled by its progress callback;
 * with an anomaly model, its score from a file (as `stoke predict` printed
 * it: SCORE), the same file's bytes and a camera buffer.
 *   c_abi_test MODEL IMAGE DATA_DIR WORK_DIR [ANOMALY_MODEL ANOMALY_IMAGE SCORE]
 * Exit 0: every check passed; 1: the failing check is printed. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"
#include "stoke/stoke.h"

static void check_library(void) {
  CHECK(stoke_abi_version() == STOKE_C_ABI_VERSION, "ABI version");
  CHECK(strlen(stoke_version()) >= 5, "version string");
  CHECK(strcmp(stoke_status_name(1000), "unknown stoke_status") == 0, "an unknown status");
  CHECK(
      strcmp(stoke_status_name(STOKE_ERROR_BUFFER_TOO_SMALL), "STOKE_ERROR_BUFFER_TOO_SMALL") == 0,
      "status name");
  CHECK(strcmp(stoke_last_error(), "") == 0, "no error before a failing call");
}

static void check_open_errors(const char* work) {
  char missing[4096];
  stoke_predictor* p = (stoke_predictor*)1;
  snprintf(missing, sizeof missing, "%s/no-such-model.stoke", work);
  CHECK(stoke_predictor_open(missing, 0, &p) == STOKE_ERROR_IO, "a missing model is an I/O error");
  CHECK(p == NULL, "*out is NULL after a failure");
  CHECK(contains(stoke_last_error(), "stoke_predictor_open"), "the message names the function");
  CHECK(contains(stoke_last_error(), "no-such-model.stoke"), "the message names the file");
  CHECK(stoke_predictor_open(NULL, 0, &p) == STOKE_ERROR_INVALID_ARGUMENT, "NULL path");
  CHECK(contains(stoke_last_error(), "model_path"), "the message names the argument");
  CHECK(stoke_predictor_open(missing, 0, NULL) == STOKE_ERROR_INVALID_ARGUMENT, "NULL out");
  CHECK(stoke_predictor_open(missing, 8u, &p) == STOKE_ERROR_INVALID_ARGUMENT, "unknown flags");
  stoke_predictor_close(NULL);
}

static void check_predictor(stoke_predictor* p, const char* image) {
  uint32_t classes = 0;
  size_t needed = 0;
  char name[64];
  char tiny[1];
  float probabilities[16];
  stoke_prediction a, b, c;
  FILE* f;
  long size;
  unsigned char* bytes;
  unsigned char gray[24 * 20 + 7 * 20];
  int i;
  int32_t passed = 0;

  CHECK(stoke_predictor_class_count(p, &classes) == STOKE_OK && classes >= 2, "class count");
  CHECK(
      stoke_predictor_class_name(p, 0, tiny, sizeof tiny, &needed) == STOKE_ERROR_BUFFER_TOO_SMALL,
      "a class name into one byte");
  CHECK(needed > 1, "the size needed is returned");
  CHECK(stoke_predictor_class_name(p, 0, name, sizeof name, &needed) == STOKE_OK, "class name");
  CHECK(strlen(name) + 1 == needed, "needed counts the NUL");
  CHECK(stoke_predictor_class_name(p, classes, name, sizeof name, NULL) ==
            STOKE_ERROR_INVALID_ARGUMENT,
        "class index out of range");
  CHECK(stoke_predictor_self_check(p, &passed, NULL, 0, &needed) == STOKE_ERROR_BUFFER_TOO_SMALL,
        "self-check message size query");
  CHECK(passed == 1, "the self-check passed");

  CHECK(stoke_predict_file(p, image, &a, probabilities, 1) == STOKE_ERROR_BUFFER_TOO_SMALL,
        "probabilities for one class");
  CHECK(stoke_predict_file(p, image, &a, NULL, 3) == STOKE_ERROR_INVALID_ARGUMENT,
        "NULL probabilities with a capacity");
  CHECK(stoke_predict_file(p, image, &a, probabilities, 16) == STOKE_OK, "predict a file");
  CHECK(a.label >= 0 && (uint32_t)a.label < classes && a.class_count == classes, "label");
  CHECK(a.confidence == probabilities[a.label], "confidence is the label's probability");
  CHECK(isnan(a.anomaly_score), "a classifier has no anomaly score");
  CHECK(stoke_predict_file(p, "/nonexistent/part.png", &a, NULL, 0) == STOKE_ERROR_IO,
        "a missing image");
  CHECK(contains(stoke_last_error(), "/nonexistent/part.png"), "the message names the image");

  f = fopen(image, "rb");
  CHECK(f != NULL, "open the image");
  if (!f) return;
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  bytes = (unsigned char*)malloc((size_t)size);
  CHECK(fread(bytes, 1, (size_t)size, f) == (size_t)size, "read the image");
  fclose(f);
  CHECK(stoke_predict_bytes(p, bytes, (size_t)size, &b, NULL, 0) == STOKE_OK, "predict bytes");
  CHECK(b.label == a.label && b.confidence == a.confidence, "bytes give the file's result");
  CHECK(stoke_predict_bytes(p, bytes, (size_t)size / 2, &b, NULL, 0) == STOKE_ERROR_DECODE,
        "half a file is a decode error");
  free(bytes);

  /* A 24 x 20 Mono8 frame with 7 bytes of padding per row. */
  for (i = 0; i < (int)sizeof gray; ++i) gray[i] = (unsigned char)(i * 7 % 251);
  CHECK(stoke_predict_pixels(p, gray, 24, 20, STOKE_PIXEL_MONO8, 31, &c, NULL, 0) == STOKE_OK,
        "predict pixels");
  /* The same bytes as 12 x 20 Mono16 pixels (native byte order). */
  CHECK(stoke_predict_pixels(p, gray, 12, 20, STOKE_PIXEL_MONO16, 31, &c, probabilities, 16) ==
            STOKE_OK,
        "predict Mono16 pixels");
  CHECK(c.confidence == probabilities[c.label], "Mono16: the label's probability");
  CHECK(stoke_predict_pixels(p, gray, 24, 20, STOKE_PIXEL_MONO8, 20, &c, NULL, 0) ==
            STOKE_ERROR_INVALID_ARGUMENT,
        "a stride shorter than a row");
  CHECK(contains(stoke_last_error(), "stride"), "the message names the stride");
  CHECK(stoke_predict_pixels(p, gray, 24, 20, 9, 0, &c, NULL, 0) == STOKE_ERROR_INVALID_ARGUMENT,
        "an unknown pixel format");
}

/* Counts the steps and epochs it is told of; asks to stop at step 2. */
/* Threads on one predictor: each classifies the image (the results must be
 * the single-threaded one's) and fails on a file of its own (each thread's
 * last error must name its own file). */
typedef struct {
  stoke_predictor* predictor;
  const char* image;
  int index;
  stoke_prediction result;
  float probabilities[16];
  int ok;
} worker_args;

static void* worker(void* arg) {
  worker_args* w = (worker_args*)arg;
  char missing[64];
  int i;
  snprintf(missing, sizeof missing, "/nonexistent/thread-%d.png", w->index);
  w->ok = 1;
  for (i = 0; i < 4; ++i) {
    if (stoke_predict_file(w->predictor, w->image, &w->result, w->probabilities, 16) != STOKE_OK)
      w->ok = 0;
    if (stoke_predict_file(w->predictor, missing, &w->result, NULL, 0) != STOKE_ERROR_IO ||
        !contains(stoke_last_error(), missing))
      w->ok = 0;
  }
  if (stoke_predict_file(w->predictor, w->image, &w->result, w->probabilities, 16) != STOKE_OK)
    w->ok = 0;
  return NULL;
}

static void check_threads(stoke_predictor* p, const char* image) {
  enum { kThreads = 4 };
  pthread_t threads[kThreads];
  worker_args args[kThreads];
  stoke_prediction alone;
  float probabilities[16];
  int t;
  CHECK(stoke_predict_file(p, image, &alone, probabilities, 16) == STOKE_OK, "one thread");
  for (t = 0; t < kThreads; ++t) {
    memset(&args[t], 0, sizeof args[t]);
    args[t].predictor = p;
    args[t].image = image;
    args[t].index = t;
    CHECK(pthread_create(&threads[t], NULL, worker, &args[t]) == 0, "start a thread");
  }
  for (t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    CHECK(args[t].ok, "a thread's calls and its own last error");
    CHECK(args[t].result.label == alone.label &&
              memcmp(args[t].probabilities, probabilities, alone.class_count * sizeof(float)) == 0,
          "a thread's probabilities equal one thread's bit for bit");
  }
}

static int32_t cancel_at_second_step(void* user, const stoke_progress* progress) {
  int* calls = (int*)user;
  if (progress->kind == STOKE_PROGRESS_EPOCH) {
    ++calls[1];
    return 0;
  }
  ++calls[0];
  return progress->step >= 2;
}

static void check_training(const char* data, const char* work) {
  char out[4096], stop[4096];
  stoke_train_result result;
  int calls[2] = {0, 0};
  FILE* f;
  snprintf(out, sizeof out, "%s/c.stoke", work);
  snprintf(stop, sizeof stop, "%s/c.stoke.stop", work);
  CHECK(
      stoke_train(data, out, "epochs=1; bogus=3", NULL, NULL, NULL) == STOKE_ERROR_INVALID_ARGUMENT,
      "an unknown option");
  CHECK(contains(stoke_last_error(), "bogus"), "the message names the option");
  CHECK(stoke_train(data, out, "lr=nan", NULL, NULL, NULL) == STOKE_ERROR_INVALID_ARGUMENT,
        "lr=nan");
  CHECK(contains(stoke_last_error(), "lr"), "the message names lr");
  CHECK(stoke_train(data, out, "out=/tmp/x", NULL, NULL, NULL) == STOKE_ERROR_INVALID_ARGUMENT,
        "out= in the options");
  CHECK(stoke_train(data, out, "epochs", NULL, NULL, NULL) == STOKE_ERROR_INVALID_ARGUMENT,
        "an entry without '='");
  CHECK(stoke_train(data, out, "epochs=3\nsize=16; batch=4 ;arch=plain\n", cancel_at_second_step,
                    calls, &result) == STOKE_ERROR_CANCELLED,
        "cancelled by the callback");
  CHECK(contains(stoke_last_error(), "c.stoke.stop"), "the message names the stop checkpoint");
  CHECK(calls[0] == 2, "no step after the callback asked to stop");
  /* The cut epoch ends as any epoch does: validated, reported, its best model written. */
  CHECK(calls[1] == 1 && result.epochs == 1, "one (cut) epoch");
  CHECK(result.train_samples + result.val_samples == 24, "the split's sizes");
  f = fopen(stop, "rb");
  CHECK(f != NULL, "the stop checkpoint was written");
  if (f) fclose(f);
}

/* The map: its size asked first (map NULL), then written; the score as the file's. */
static void check_anomaly_map(stoke_predictor* p, const char* image, float score,
                              const unsigned char* frame) {
  stoke_prediction m;
  int32_t w = 0, h = 0, w2 = 0, h2 = 0;
  float* map;
  float top = 0;
  int32_t i;
  CHECK(stoke_predict_file_map(p, image, &m, NULL, 0, &w, &h) == STOKE_ERROR_BUFFER_TOO_SMALL,
        "the map's size asked");
  CHECK(w > 0 && h > 0, "the map's size");
  if (w <= 0 || h <= 0) return;
  map = (float*)malloc(sizeof(float) * (size_t)w * (size_t)h);
  if (!map) return;
  CHECK(stoke_predict_file_map(p, image, &m, map, (size_t)w * (size_t)h, &w2, &h2) == STOKE_OK,
        "the map written");
  CHECK(w2 == w && h2 == h && m.anomaly_score == score, "the map's prediction is the file's");
  for (i = 0; i < w * h; ++i) {
    CHECK(isfinite(map[i]) && map[i] >= 0, "map values are finite distances");
    if (map[i] > top) top = map[i];
  }
  CHECK(top > 0, "the map is not all zero");
  CHECK(stoke_predict_pixels_map(p, frame, 96, 80, STOKE_PIXEL_MONO8, 0, &m, map,
                                 (size_t)w * (size_t)h, &w2, &h2) == STOKE_OK,
        "a camera buffer's map");
  free(map);
}

static void check_anomaly(const char* model, const char* image, const char* score) {
  stoke_predictor* p = NULL;
  stoke_prediction a, b, c;
  uint32_t classes = 0;
  char name[32];
  float probabilities[2];
  unsigned char* bytes = NULL;
  unsigned char frame[96 * 80];
  long size = 0;
  int i;
  FILE* f;
  CHECK(stoke_predictor_open(model, 0, &p) == STOKE_OK && p != NULL, "open the anomaly model");
  if (!p) return;
  CHECK(stoke_predictor_class_count(p, &classes) == STOKE_OK && classes == 2, "two classes");
  CHECK(stoke_predictor_class_name(p, 1, name, sizeof name, NULL) == STOKE_OK &&
            strcmp(name, "anomalous") == 0,
        "class 1 is 'anomalous'");
  CHECK(stoke_predict_file(p, image, &a, probabilities, 1) == STOKE_ERROR_BUFFER_TOO_SMALL,
        "one float for two classes");
  CHECK(stoke_predict_file(p, image, &a, probabilities, 2) == STOKE_OK, "score a file");
  CHECK(a.anomaly_score == strtof(score, NULL), "the score stoke predict printed");
  CHECK(a.label == 0 || a.label == 1, "label good (0) or anomalous (1)");
  CHECK(isnan(a.confidence) && isnan(probabilities[0]) && a.class_count == 2,
        "no probability for a score");
  f = fopen(image, "rb");
  CHECK(f != NULL, "read the image");
  if (f) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = (unsigned char*)malloc((size_t)size);
    CHECK(bytes && fread(bytes, 1, (size_t)size, f) == (size_t)size, "read the image's bytes");
    fclose(f);
  }
  if (bytes) {
    CHECK(stoke_predict_bytes(p, bytes, (size_t)size, &b, NULL, 0) == STOKE_OK, "score bytes");
    CHECK(b.anomaly_score == a.anomaly_score && b.label == a.label, "bytes score as the file");
    free(bytes);
  }
  for (i = 0; i < 96 * 80; ++i) frame[i] = (unsigned char)(i % 96 + i / 96);
  CHECK(stoke_predict_pixels(p, frame, 96, 80, STOKE_PIXEL_MONO8, 0, &c, NULL, 0) == STOKE_OK,
        "score a camera buffer");
  CHECK(isfinite(c.anomaly_score) && (c.label == 0 || c.label == 1), "a finite buffer score");
  check_anomaly_map(p, image, a.anomaly_score, frame);
  stoke_predictor_close(p);
}

int main(int argc, char** argv) {
  stoke_predictor* p = NULL;
  if (argc != 5 && argc != 8) {
    printf("usage: c_abi_test MODEL IMAGE DATA_DIR WORK_DIR [ANOMALY_MODEL ANOMALY_IMAGE SCORE]\n");
    return 2;
  }
  check_library();
  check_open_errors(argv[4]);
  CHECK(stoke_predictor_open(argv[1], 0, &p) == STOKE_OK && p != NULL, "open the model");
  if (p) check_predictor(p, argv[2]);
  if (p) check_threads(p, argv[2]);
  if (p) {
    stoke_prediction m;
    int32_t w = 0, h = 0;
    CHECK(stoke_predict_file_map(p, argv[2], &m, NULL, 0, &w, &h) == STOKE_ERROR_INVALID_ARGUMENT,
          "a classifier has no anomaly map");
  }
  stoke_predictor_close(p);
  check_training(argv[3], argv[4]);
  if (argc == 8) check_anomaly(argv[5], argv[6], argv[7]);
  printf("%s: %d failures\n", argv[0], failures);
  return failures ? 1 : 0;
}
