/* stoke's C ABI: load a model file and classify images, or train a model from
 * a folder, from any language that calls C (C#/.NET by P/Invoke, Python by
 * ctypes, LabVIEW, Delphi). C99; compiles as C++ too. See docs/c-api.md.
 *
 * Rules of the boundary:
 * - Every function that can fail returns a stoke_status; STOKE_OK is 0. On a
 *   failure stoke_last_error() gives the message (what failed and where: the
 *   file, the option, the sizes), kept per thread until that thread's next
 *   failing call. No C++ exception crosses this boundary (std::bad_alloc
 *   included: it is STOKE_ERROR_OUT_OF_MEMORY).
 * - Handles are opaque. Strings are UTF-8, NUL-terminated; sizes are in
 *   elements unless named bytes. Output buffers belong to the caller; a
 *   buffer that is too small is STOKE_ERROR_BUFFER_TOO_SMALL with the size
 *   needed in an out-parameter, and nothing else written.
 * - Thread safety is stated per function. "Any thread" means any thread at
 *   any time, also at once with other calls.
 */
#ifndef STOKE_STOKE_H
#define STOKE_STOKE_H

#include <stddef.h>
#include <stdint.h>

/* libstoke is built with hidden visibility: these functions are its C exports. */
#if defined(__GNUC__)
#define STOKE_C_API __attribute__((visibility("default")))
#else
#define STOKE_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Incremented when a function's signature or a struct's layout changes. */
#define STOKE_C_ABI_VERSION 1

typedef enum stoke_status {
  STOKE_OK = 0,
  STOKE_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, a bad size, an unknown option */
  STOKE_ERROR_CONFIG = 2,           /* a STOKE_* knob with a bad value */
  STOKE_ERROR_IO = 3,               /* a file that cannot be read or written */
  STOKE_ERROR_DECODE = 4,           /* an image that cannot be decoded */
  STOKE_ERROR_CORRUPT_FILE = 5,     /* a model file that is damaged or not one */
  STOKE_ERROR_OUT_OF_MEMORY = 6,
  STOKE_ERROR_UNSUPPORTED = 7, /* e.g. a model whose self-check fails on this build */
  STOKE_ERROR_GPU = 8,         /* CUDA, cuDNN, cuBLAS, NVRTC */
  STOKE_ERROR_CANCELLED = 9,   /* the progress callback asked to stop */
  STOKE_ERROR_NON_FINITE = 10, /* training diverged (NaN or infinity) */
  STOKE_ERROR_BUFFER_TOO_SMALL = 11,
  STOKE_ERROR_COMMUNICATION = 12, /* data-parallel ranks */
  STOKE_ERROR_INTERNAL = 13       /* a bug in stoke: please report the message */
} stoke_status;

/* Pixel layouts of camera buffers: 8-bit grey, 16-bit grey (native byte
 * order, kept at 16 bits as a 16-bit PNG is), 8-bit RGB and BGR, interleaved. */
typedef enum stoke_pixel_format {
  STOKE_PIXEL_MONO8 = 0,
  STOKE_PIXEL_MONO16 = 1,
  STOKE_PIXEL_RGB8 = 2,
  STOKE_PIXEL_BGR8 = 3
} stoke_pixel_format;

/* ---- Library ---------------------------------------------------------------------- */

/* "MAJOR.MINOR.PATCH" of the library loaded. Any thread. */
STOKE_C_API const char* stoke_version(void);
/* STOKE_C_ABI_VERSION as the library was built: a host checks it equals the
 * version it was written for. Any thread. */
STOKE_C_API int32_t stoke_abi_version(void);
/* The message of this thread's last failing call ("" when none failed). Valid
 * until this thread's next failing call. Any thread. */
STOKE_C_API const char* stoke_last_error(void);
/* The name of a status, e.g. "STOKE_ERROR_IO" (any integer: an unknown one is
 * named so). Any thread. */
STOKE_C_API const char* stoke_status_name(int32_t status);

/* ---- Prediction --------------------------------------------------------------------- */

typedef struct stoke_predictor stoke_predictor;

/* Flags of stoke_predictor_open. */
#define STOKE_PREDICTOR_NO_SELF_CHECK 1u /* load even when the self-check fails (reported) */

/* What one image is. Every field is written by a successful predict call. */
typedef struct stoke_prediction {
  int32_t label;        /* class index, 0 .. class_count-1 */
  float confidence;     /* probability of label (NaN for an anomaly model) */
  uint32_t class_count; /* classes of the model (= probabilities written) */
  /* An anomaly model's score (label 1 "anomalous" when above the model's
   * threshold, 0 "good" otherwise; its two probabilities are NaN): what
   * `stoke predict` prints for the same image. NaN for a classifier. */
  float anomaly_score;
  uint32_t reserved[8]; /* zero */
} stoke_prediction;

/* Loads a model file (stoke train's output: a classifier, an anomaly model
 * of `stoke train --task anomaly`, whose classes are "good" and "anomalous", or a
 * segmentation model of `stoke train --task segment`: stoke_segment_*)
 * and runs its self-check (an anomaly model's is always required). The
 * environment's STOKE_* knobs are read on the first call of any function
 * that opens or trains (stoke::init()). flags: 0 or STOKE_PREDICTOR_NO_SELF_CHECK.
 * On success *out is a handle for stoke_predictor_close; on failure *out is
 * NULL. Any thread. */
STOKE_C_API stoke_status stoke_predictor_open(const char* model_path, uint32_t flags,
                                              stoke_predictor** out);
/* Frees the handle (NULL is accepted). No other call may be using it. */
STOKE_C_API void stoke_predictor_close(stoke_predictor* predictor);

/* The model's classes. Any thread. */
STOKE_C_API stoke_status stoke_predictor_class_count(const stoke_predictor* predictor,
                                                     uint32_t* count);
/* Class `index`'s name into buffer (capacity bytes, NUL included). *needed (may
 * be NULL) gets the bytes the name needs with its NUL; capacity too small:
 * STOKE_ERROR_BUFFER_TOO_SMALL and nothing written. Any thread. */
STOKE_C_API stoke_status stoke_predictor_class_name(const stoke_predictor* predictor,
                                                    uint32_t index, char* buffer, size_t capacity,
                                                    size_t* needed);
/* The self-check's message (what ran, where, the result) and whether it
 * passed (*passed may be NULL); buffer as in stoke_predictor_class_name. Any thread. */
STOKE_C_API stoke_status stoke_predictor_self_check(const stoke_predictor* predictor,
                                                    int32_t* passed, char* buffer, size_t capacity,
                                                    size_t* needed);

/* Classify one image with the model's own preprocessing (bit-identical to
 * `stoke predict`). `probabilities`: NULL with capacity 0 (not wanted), or a
 * buffer of at least class_count floats (else STOKE_ERROR_BUFFER_TOO_SMALL,
 * checked before anything runs). Any thread: calls on one predictor from
 * several threads run at the same time (each gets a worker; see
 * docs/deploy.md, Thread safety); on an anomaly model they take turns. */
STOKE_C_API stoke_status stoke_predict_file(stoke_predictor* predictor, const char* path,
                                            stoke_prediction* out, float* probabilities,
                                            size_t capacity);
/* An encoded image in memory (JPEG, PNG: what the decoder reads). */
STOKE_C_API stoke_status stoke_predict_bytes(stoke_predictor* predictor, const void* bytes,
                                             size_t size, stoke_prediction* out,
                                             float* probabilities, size_t capacity);
/* A camera buffer: width x height pixels of `format` (a stoke_pixel_format
 * value; an int32_t so that any value a host passes is defined behaviour and
 * an unknown one is STOKE_ERROR_INVALID_ARGUMENT), rows `stride` bytes apart
 * (0: packed). It gives what a lossless file of the same pixels gives. */
STOKE_C_API stoke_status stoke_predict_pixels(stoke_predictor* predictor, const void* pixels,
                                              int32_t width, int32_t height, int32_t format,
                                              size_t stride, stoke_prediction* out,
                                              float* probabilities, size_t capacity);

/* An anomaly model's prediction of an image file (as stoke_predict_file) and its
 * anomaly map: *map_width x *map_height floats, row-major, at the model's input
 * size (a tiled model's: the image's size), written to `map` when `map_capacity`
 * floats hold them. *map_width and *map_height are always written on success and
 * on STOKE_ERROR_BUFFER_TOO_SMALL (map NULL with map_capacity 0 asks for the size:
 * the image is scored, nothing else written). A classifier:
 * STOKE_ERROR_INVALID_ARGUMENT. Threads: as stoke_predict_file. */
STOKE_C_API stoke_status stoke_predict_file_map(stoke_predictor* predictor, const char* path,
                                                stoke_prediction* out, float* map,
                                                size_t map_capacity, int32_t* map_width,
                                                int32_t* map_height);
/* The same for a camera buffer (as stoke_predict_pixels). */
STOKE_C_API stoke_status stoke_predict_pixels_map(stoke_predictor* predictor, const void* pixels,
                                                  int32_t width, int32_t height, int32_t format,
                                                  size_t stride, stoke_prediction* out, float* map,
                                                  size_t map_capacity, int32_t* map_width,
                                                  int32_t* map_height);

/* A segmentation model's label map (stoke train --task segment; docs/segmentation-cli.md)
 * of an image file: *width x *height class indices (one byte each, row-major) at the
 * image's own size, what `stoke predict --masks` writes. `labels`: NULL with capacity 0
 * (not wanted), or a buffer of at least *width x *height bytes (else
 * STOKE_ERROR_BUFFER_TOO_SMALL, with *width and *height written: a call with labels NULL
 * asks for the size). `areas`: NULL with areas_capacity 0 (not wanted), or at least
 * class_count values, the pixels of each class (too few: STOKE_ERROR_BUFFER_TOO_SMALL,
 * checked before anything runs). *width and *height are always written on success.
 * Another kind of model: STOKE_ERROR_INVALID_ARGUMENT. Calls on one predictor take turns. */
STOKE_C_API stoke_status stoke_segment_file(stoke_predictor* predictor, const char* path,
                                            uint8_t* labels, size_t capacity, int32_t* width,
                                            int32_t* height, int64_t* areas, size_t areas_capacity);
/* The same for an encoded image in memory (as stoke_predict_bytes). */
STOKE_C_API stoke_status stoke_segment_bytes(stoke_predictor* predictor, const void* bytes,
                                             size_t size, uint8_t* labels, size_t capacity,
                                             int32_t* width, int32_t* height, int64_t* areas,
                                             size_t areas_capacity);
/* The same for a camera buffer (as stoke_predict_pixels); the map has the buffer's size. */
STOKE_C_API stoke_status stoke_segment_pixels(stoke_predictor* predictor, const void* pixels,
                                              int32_t width, int32_t height, int32_t format,
                                              size_t stride, uint8_t* labels, size_t capacity,
                                              int32_t* map_width, int32_t* map_height,
                                              int64_t* areas, size_t areas_capacity);

/* ---- Training ----------------------------------------------------------------------- */

/* What the progress callback is told. */
typedef enum stoke_progress_kind {
  STOKE_PROGRESS_STEP = 0, /* after an optimizer step */
  STOKE_PROGRESS_EPOCH = 1 /* after an epoch (and its validation) */
} stoke_progress_kind;

typedef struct stoke_progress {
  int32_t kind;            /* stoke_progress_kind */
  int32_t epoch;           /* 0-based */
  int32_t epochs;          /* of the run */
  uint32_t reserved0;      /* zero */
  uint64_t step;           /* optimizer steps so far */
  uint64_t total_steps;    /* an estimate (batch auto: from a batch of 32) */
  float train_loss;        /* EPOCH: the epoch's mean loss; STEP: NaN */
  float train_accuracy;    /* EPOCH; STEP: NaN */
  float val_accuracy;      /* EPOCH with validation; else NaN */
  float images_per_second; /* EPOCH; STEP: NaN */
  uint32_t reserved[8];    /* zero */
} stoke_progress;

/* Called on the thread that called stoke_train. Return 0 to go on, non-zero
 * to stop after the current step: the run then writes MODEL.stop (resumable:
 * option resume=MODEL.stop) and stoke_train returns STOKE_ERROR_CANCELLED. */
typedef int32_t (*stoke_progress_fn)(void* user_data, const stoke_progress* progress);

typedef struct stoke_train_result {
  int32_t epochs;          /* epochs run */
  int32_t batch_size;      /* the device batch used */
  float best_val_accuracy; /* -1 without validation */
  uint32_t train_samples;
  uint32_t val_samples;
  int32_t wrote_model;  /* 1: model_out was written */
  uint32_t reserved[8]; /* zero */
} stoke_train_result;

/* Trains a model on `data_dir` (one subfolder per class) and writes the
 * model file `model_out` (the best by validation accuracy when validating,
 * else the final one). `options`: the options `stoke train` takes, without
 * "--", as key=value entries separated by newlines or ';', e.g.
 * "epochs=10; size=64; batch=16; augment=hflip,vflip; val=/data/val".
 * NULL or "" = the defaults. data= and out= are not allowed there (they are
 * the arguments). Unknown keys and bad values are STOKE_ERROR_INVALID_ARGUMENT
 * naming the key. progress may be NULL; result may be NULL.
 * Any thread; runs on the library's CPU arena (or the selected GPU), so two
 * runs at once share (and compete for) it. */
STOKE_C_API stoke_status stoke_train(const char* data_dir, const char* model_out,
                                     const char* options, stoke_progress_fn progress,
                                     void* user_data, stoke_train_result* result);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STOKE_STOKE_H */
