/* The C ABI's segmentation calls from C (compiled as C99 and as C++ by
 * hosts_test.sh): a segmentation model's label map of a file has the size and
 * the per-class areas `stoke predict --masks --json` printed for it, its
 * labels count those areas, bytes and a camera buffer segment too, buffers
 * too small and the wrong kind of model are refused by name.
 *   c_segment_test SEG_MODEL IMAGE WIDTH HEIGHT AREAS CLASSIFIER_MODEL
 * AREAS: the pixels of each class, comma-separated, as `stoke predict` gave.
 * Exit 0: every check passed; 1: the failing checks are printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"
#include "stoke/stoke.h"

/* The file's bytes (NULL when it cannot be read); *size gets their count. */
static unsigned char* read_file(const char* path, long* size) {
  unsigned char* bytes = NULL;
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  bytes = (unsigned char*)malloc((size_t)*size);
  if (bytes && fread(bytes, 1, (size_t)*size, f) != (size_t)*size) {
    free(bytes);
    bytes = NULL;
  }
  fclose(f);
  return bytes;
}

static void check_segmentation(stoke_predictor* p, const char* image, int32_t want_w,
                               int32_t want_h, const char* want_areas) {
  uint32_t classes = 0, c;
  int32_t w = -1, h = -1, bw = -1, bh = -1;
  int64_t areas[256], counted[256], bytes_areas[256];
  uint8_t* labels;
  uint8_t* from_bytes;
  uint8_t small[4];
  unsigned char* bytes;
  unsigned char frame[96 * 80 * 3];
  long size = 0, i, total = 0;
  const char* at = want_areas;
  stoke_prediction pred;

  CHECK(stoke_predictor_class_count(p, &classes) == STOKE_OK && classes >= 2 && classes <= 255,
        "the segmentation model's classes");
  if (classes < 2 || classes > 255) return;
  CHECK(stoke_segment_file(p, image, NULL, 0, &w, &h, NULL, 0) == STOKE_OK,
        "a size query (labels NULL, capacity 0)");
  CHECK(w == want_w && h == want_h, "the map has the image's size, as stoke predict gave");
  w = h = -1;
  CHECK(stoke_segment_file(p, image, small, sizeof small, &w, &h, NULL, 0) ==
            STOKE_ERROR_BUFFER_TOO_SMALL,
        "4 bytes for the map");
  CHECK(w == want_w && h == want_h, "the size is written with BUFFER_TOO_SMALL");
  CHECK(contains(stoke_last_error(), "labels holds 4 bytes"), "the message says what was short");
  CHECK(stoke_segment_file(p, image, NULL, 0, &w, &h, areas, 1) == STOKE_ERROR_BUFFER_TOO_SMALL,
        "one area for several classes");
  CHECK(stoke_segment_file(p, image, NULL, 0, NULL, &h, NULL, 0) == STOKE_ERROR_INVALID_ARGUMENT,
        "width NULL");
  CHECK(contains(stoke_last_error(), "width"), "the message names the argument");
  CHECK(stoke_segment_file(p, image, NULL, 4, &w, &h, NULL, 0) == STOKE_ERROR_INVALID_ARGUMENT,
        "labels NULL with a capacity");
  CHECK(stoke_predict_file(p, image, &pred, NULL, 0) != STOKE_OK,
        "a segmentation model does not classify");

  labels = (uint8_t*)malloc((size_t)want_w * (size_t)want_h);
  from_bytes = (uint8_t*)malloc((size_t)want_w * (size_t)want_h);
  if (!labels || !from_bytes) {
    CHECK(0, "allocate the maps");
    free(labels);
    free(from_bytes);
    return;
  }
  CHECK(stoke_segment_file(p, image, labels, (size_t)want_w * (size_t)want_h, &w, &h, areas,
                           classes) == STOKE_OK,
        "segment a file");
  memset(counted, 0, sizeof counted);
  for (i = 0; i < (long)want_w * want_h; ++i) {
    CHECK(labels[i] < classes, "every label is a class");
    if (labels[i] < classes) ++counted[labels[i]];
  }
  for (c = 0; c < classes; ++c) {
    const long want = strtol(at, NULL, 10);
    CHECK(areas[c] == want, "the class's area is the one stoke predict printed");
    CHECK(counted[c] == areas[c], "the labels count the areas");
    total += areas[c];
    at = strchr(at, ',');
    if (!at) break;
    ++at;
  }
  CHECK(c + 1 == classes || (c == classes && at == NULL), "one area per class given");
  CHECK(total == (long)want_w * want_h, "the areas cover the image");

  bytes = read_file(image, &size);
  CHECK(bytes != NULL, "read the image's bytes");
  if (bytes) {
    CHECK(stoke_segment_bytes(p, bytes, (size_t)size, from_bytes, (size_t)want_w * (size_t)want_h,
                              &bw, &bh, bytes_areas, classes) == STOKE_OK,
          "segment the bytes");
    CHECK(bw == w && bh == h && memcmp(from_bytes, labels, (size_t)w * (size_t)h) == 0,
          "the bytes give the file's map");
    CHECK(memcmp(bytes_areas, areas, classes * sizeof areas[0]) == 0, "and its areas");
    free(bytes);
  }
  for (i = 0; i < 96 * 80 * 3; ++i) frame[i] = (unsigned char)((i / 3) % 96 + (i / 3) / 96);
  w = h = -1;
  CHECK(stoke_segment_pixels(p, frame, 96, 80, STOKE_PIXEL_RGB8, 0, NULL, 0, &w, &h, areas,
                             classes) == STOKE_OK,
        "segment a camera buffer");
  CHECK(w == 96 && h == 80, "the buffer's map has its size");
  total = 0;
  for (c = 0; c < classes; ++c) total += areas[c];
  CHECK(total == 96 * 80, "the buffer's areas cover it");
  CHECK(stoke_segment_pixels(p, frame, 96, 80, 99, 0, NULL, 0, &w, &h, NULL, 0) ==
            STOKE_ERROR_INVALID_ARGUMENT,
        "an unknown pixel format");
  free(labels);
  free(from_bytes);
}

int main(int argc, char** argv) {
  stoke_predictor* p = NULL;
  int32_t w = 0, h = 0;
  if (argc != 7) {
    printf("usage: c_segment_test SEG_MODEL IMAGE WIDTH HEIGHT AREAS CLASSIFIER_MODEL\n");
    return 2;
  }
  CHECK(stoke_predictor_open(argv[1], 0, &p) == STOKE_OK && p != NULL,
        "open the segmentation model");
  if (p) check_segmentation(p, argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
  stoke_predictor_close(p);
  p = NULL;
  CHECK(stoke_predictor_open(argv[6], 0, &p) == STOKE_OK && p != NULL, "open the classifier");
  if (p) {
    CHECK(stoke_segment_file(p, argv[2], NULL, 0, &w, &h, NULL, 0) == STOKE_ERROR_INVALID_ARGUMENT,
          "a classifier has no label map");
    CHECK(contains(stoke_last_error(), "segmentation models"), "the message says why");
  }
  stoke_predictor_close(p);
  CHECK(stoke_segment_file(NULL, argv[2], NULL, 0, &w, &h, NULL, 0) == STOKE_ERROR_INVALID_ARGUMENT,
        "a NULL predictor");
  printf("%s: %d failures\n", argv[0], failures);
  return failures ? 1 : 0;
}
