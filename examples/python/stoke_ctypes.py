"""stoke from Python through its C ABI (include/stoke/stoke.h), with ctypes only.

    import stoke_ctypes as stoke
    with stoke.Predictor("model.stoke") as p:
        r = p.predict_file("part.png")             # r.class_name, r.confidence, r.probabilities
        r = p.predict_pixels(frame, "mono8")       # a numpy uint8 array: no copy
        r = p.predict_pixels(buf, "bgr8", width=w, height=h, stride=s)   # bytes / bytearray
    stoke.train("data", "model.stoke", {"epochs": 10, "size": 64}, progress=print)

numpy is optional: a uint8 (uint16 for "mono16") array of shape (H, W) or
(H, W, 3) whose rows are contiguous is passed by pointer, row stride
included, so a slice of a larger frame costs no copy either. The library is
$LIBSTOKE, else libstoke.so on the loader's path. Errors are
StokeError with the library's status and message.
"""
import ctypes
import ctypes.util
import os

ABI_VERSION = 1  # STOKE_C_ABI_VERSION this module was written for
PIXEL_FORMATS = {"mono8": 0, "mono16": 1, "rgb8": 2, "bgr8": 3}
_CHANNELS = {"mono8": 1, "mono16": 1, "rgb8": 3, "bgr8": 3}
_BYTES_PER_SAMPLE = {"mono8": 1, "mono16": 2, "rgb8": 1, "bgr8": 1}
BUFFER_TOO_SMALL = 11
CANCELLED = 9


class StokeError(Exception):
    """A failing call: .status (stoke_status), .name and the library's message."""

    def __init__(self, status, name, message):
        super().__init__("%s (%s)" % (message, name))
        self.status, self.name, self.message = status, name, message


class _Prediction(ctypes.Structure):
    _fields_ = [("label", ctypes.c_int32), ("confidence", ctypes.c_float),
                ("class_count", ctypes.c_uint32), ("anomaly_score", ctypes.c_float),
                ("reserved", ctypes.c_uint32 * 8)]


class Progress(ctypes.Structure):
    """What the training callback is told (stoke_progress)."""
    _fields_ = [("kind", ctypes.c_int32), ("epoch", ctypes.c_int32), ("epochs", ctypes.c_int32),
                ("reserved0", ctypes.c_uint32), ("step", ctypes.c_uint64),
                ("total_steps", ctypes.c_uint64), ("train_loss", ctypes.c_float),
                ("train_accuracy", ctypes.c_float), ("val_accuracy", ctypes.c_float),
                ("images_per_second", ctypes.c_float), ("reserved", ctypes.c_uint32 * 8)]
    STEP, EPOCH = 0, 1


class _TrainResult(ctypes.Structure):
    _fields_ = [("epochs", ctypes.c_int32), ("batch_size", ctypes.c_int32),
                ("best_val_accuracy", ctypes.c_float), ("train_samples", ctypes.c_uint32),
                ("val_samples", ctypes.c_uint32), ("wrote_model", ctypes.c_int32),
                ("reserved", ctypes.c_uint32 * 8)]


_PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(Progress))
_lib = None


def library(path=None):
    """The loaded libstoke (loaded on the first call), its ABI version checked."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    path = path or os.environ.get("LIBSTOKE") or ctypes.util.find_library("stoke") or "libstoke.so"
    lib = ctypes.CDLL(path)
    c = ctypes
    sigs = {
        "stoke_version": (c.c_char_p, []),
        "stoke_abi_version": (c.c_int32, []),
        "stoke_last_error": (c.c_char_p, []),
        "stoke_status_name": (c.c_char_p, [c.c_int]),
        "stoke_predictor_open": (c.c_int, [c.c_char_p, c.c_uint32, c.POINTER(c.c_void_p)]),
        "stoke_predictor_close": (None, [c.c_void_p]),
        "stoke_predictor_class_count": (c.c_int, [c.c_void_p, c.POINTER(c.c_uint32)]),
        "stoke_predictor_class_name": (c.c_int, [c.c_void_p, c.c_uint32, c.c_char_p, c.c_size_t,
                                                 c.POINTER(c.c_size_t)]),
        "stoke_predict_file": (c.c_int, [c.c_void_p, c.c_char_p, c.POINTER(_Prediction),
                                         c.POINTER(c.c_float), c.c_size_t]),
        "stoke_predict_bytes": (c.c_int, [c.c_void_p, c.c_void_p, c.c_size_t, c.POINTER(_Prediction),
                                          c.POINTER(c.c_float), c.c_size_t]),
        "stoke_predict_pixels": (c.c_int, [c.c_void_p, c.c_void_p, c.c_int32, c.c_int32, c.c_int,
                                           c.c_size_t, c.POINTER(_Prediction), c.POINTER(c.c_float),
                                           c.c_size_t]),
        "stoke_segment_file": (c.c_int, [c.c_void_p, c.c_char_p, c.POINTER(c.c_uint8), c.c_size_t,
                                         c.POINTER(c.c_int32), c.POINTER(c.c_int32),
                                         c.POINTER(c.c_int64), c.c_size_t]),
        "stoke_segment_pixels": (c.c_int, [c.c_void_p, c.c_void_p, c.c_int32, c.c_int32, c.c_int,
                                           c.c_size_t, c.POINTER(c.c_uint8), c.c_size_t,
                                           c.POINTER(c.c_int32), c.POINTER(c.c_int32),
                                           c.POINTER(c.c_int64), c.c_size_t]),
        "stoke_train": (c.c_int, [c.c_char_p, c.c_char_p, c.c_char_p, _PROGRESS_FN, c.c_void_p,
                                  c.POINTER(_TrainResult)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    if lib.stoke_abi_version() != ABI_VERSION:
        raise StokeError(-1, "ABI", "%s has C ABI version %d; this module speaks %d" %
                         (path, lib.stoke_abi_version(), ABI_VERSION))
    _lib = lib
    return lib


def version():
    return library().stoke_version().decode()


def _check(lib, status):
    if status != 0:
        raise StokeError(status, lib.stoke_status_name(status).decode(),
                         lib.stoke_last_error().decode("utf-8", "replace"))


class Prediction:
    """label, class_name, confidence and probabilities (floats equal to the library's float32)."""

    def __init__(self, label, class_name, confidence, probabilities):
        self.label, self.class_name = label, class_name
        self.confidence, self.probabilities = confidence, probabilities

    def __repr__(self):
        return "Prediction(%s, %.4f)" % (self.class_name, self.confidence)


def _pixels_pointer(pixels, fmt, width, height, stride):
    """(pointer argument, width, height, stride, keep-alive) without copying where possible."""
    if hasattr(pixels, "__array_interface__") and hasattr(pixels, "strides"):  # numpy
        want = "u2" if fmt == "mono16" else "u1"
        if pixels.dtype.str[1:] != want:
            raise StokeError(1, "STOKE_ERROR_INVALID_ARGUMENT",
                             "%s pixels must be a %s array, not %s" % (fmt, want, pixels.dtype))
        channels = _CHANNELS[fmt]
        shape_ok = pixels.ndim == 2 if channels == 1 else (pixels.ndim == 3 and pixels.shape[2] == 3)
        if not shape_ok or pixels.strides[1] != pixels.itemsize * channels or (
                channels == 3 and pixels.strides[2] != 1):
            raise StokeError(1, "STOKE_ERROR_INVALID_ARGUMENT",
                             "%s pixels must have shape (H, W%s) with contiguous rows, got shape %s strides %s"
                             % (fmt, "" if channels == 1 else ", 3", pixels.shape, pixels.strides))
        return ctypes.c_void_p(pixels.ctypes.data), pixels.shape[1], pixels.shape[0], pixels.strides[0], pixels
    if width is None or height is None:
        raise StokeError(1, "STOKE_ERROR_INVALID_ARGUMENT", "width and height are needed for a byte buffer")
    ptr, keep = _bytes_pointer(pixels)
    return ptr, width, height, stride, keep


def _bytes_pointer(pixels):
    """(pointer argument, keep-alive) for a bytes-like object, without a copy where it can."""
    if hasattr(pixels, "__array_interface__") and hasattr(pixels, "ctypes"):  # numpy
        if not pixels.flags["C_CONTIGUOUS"]:
            pixels = pixels.copy()
        return ctypes.c_void_p(pixels.ctypes.data), pixels
    if isinstance(pixels, bytes):
        return pixels, pixels  # ctypes passes the bytes' own storage
    view = memoryview(pixels)
    if not view.readonly and view.contiguous:
        buf = (ctypes.c_char * view.nbytes).from_buffer(view)
        return buf, (buf, view)
    data = bytes(view)  # read-only or strided: one copy
    return data, data


class Segmentation:
    """A segmentation model's result: width x height class indices (bytes,
    row-major, at the image's size) and the pixels of each class by name."""

    def __init__(self, width, height, labels, areas):
        self.width, self.height, self.labels, self.areas = width, height, labels, areas

    def __repr__(self):
        return "Segmentation(%dx%d, areas=%r)" % (self.width, self.height, self.areas)


class Predictor:
    """A model file loaded for prediction (stoke_predictor). Calls from several
    threads at once are safe and run in parallel; close() must not race them."""

    def __init__(self, model_path, self_check=True):
        self._lib = library()
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.stoke_predictor_open(os.fsencode(model_path), 0 if self_check else 1,
                                                         ctypes.byref(handle)))
        self._handle = handle
        count = ctypes.c_uint32()
        _check(self._lib, self._lib.stoke_predictor_class_count(handle, ctypes.byref(count)))
        self.classes = [self._class_name(i) for i in range(count.value)]

    def _class_name(self, index):
        needed = ctypes.c_size_t()
        status = self._lib.stoke_predictor_class_name(self._handle, index, None, 0, ctypes.byref(needed))
        if status != BUFFER_TOO_SMALL:
            _check(self._lib, status)
        buf = ctypes.create_string_buffer(needed.value)
        _check(self._lib, self._lib.stoke_predictor_class_name(self._handle, index, buf, needed.value, None))
        return buf.value.decode("utf-8")

    def _result(self, call):
        out = _Prediction()
        probs = (ctypes.c_float * len(self.classes))()
        _check(self._lib, call(ctypes.byref(out), probs, len(self.classes)))
        return Prediction(out.label, self.classes[out.label], out.confidence, list(probs))

    def predict_file(self, path):
        return self._result(lambda out, p, n: self._lib.stoke_predict_file(self._handle, os.fsencode(path),
                                                                           out, p, n))

    def predict_bytes(self, data):
        """An encoded image (JPEG, PNG, ...) as bytes, bytearray or memoryview."""
        ptr, keep = _bytes_pointer(data)
        size = memoryview(data).nbytes
        result = self._result(lambda out, p, n: self._lib.stoke_predict_bytes(self._handle, ptr, size, out, p, n))
        del keep
        return result

    def predict_pixels(self, pixels, fmt="mono8", width=None, height=None, stride=0):
        """A camera frame: a numpy array (no copy), or bytes-like with width,
        height and a row stride in bytes (0: packed). fmt: mono8, mono16, rgb8, bgr8."""
        if fmt not in PIXEL_FORMATS:
            raise StokeError(1, "STOKE_ERROR_INVALID_ARGUMENT", "format %r is not one of %s" %
                             (fmt, ", ".join(PIXEL_FORMATS)))
        ptr, w, h, s, keep = _pixels_pointer(pixels, fmt, width, height, stride)
        result = self._result(lambda out, p, n: self._lib.stoke_predict_pixels(
            self._handle, ptr, w, h, PIXEL_FORMATS[fmt], s, out, p, n))
        del keep
        return result

    def _segment(self, call):
        # The size first (labels NULL), then the map and the areas.
        w, h = ctypes.c_int32(), ctypes.c_int32()
        _check(self._lib, call(None, 0, ctypes.byref(w), ctypes.byref(h), None, 0))
        labels = (ctypes.c_uint8 * (w.value * h.value))()
        areas = (ctypes.c_int64 * len(self.classes))()
        _check(self._lib, call(labels, len(labels), ctypes.byref(w), ctypes.byref(h), areas, len(areas)))
        return Segmentation(w.value, h.value, bytes(labels), dict(zip(self.classes, areas)))

    def segment_file(self, path):
        """A segmentation model's label map of an image file (stoke_segment_file)."""
        return self._segment(lambda *a: self._lib.stoke_segment_file(self._handle, os.fsencode(path), *a))

    def segment_pixels(self, pixels, fmt="mono8", width=None, height=None, stride=0):
        """The same for a camera frame (as predict_pixels)."""
        if fmt not in PIXEL_FORMATS:
            raise StokeError(1, "STOKE_ERROR_INVALID_ARGUMENT", "format %r is not one of %s" %
                             (fmt, ", ".join(PIXEL_FORMATS)))
        ptr, w, h, s, keep = _pixels_pointer(pixels, fmt, width, height, stride)
        result = self._segment(lambda *a: self._lib.stoke_segment_pixels(
            self._handle, ptr, w, h, PIXEL_FORMATS[fmt], s, *a))
        del keep
        return result

    def close(self):
        if self._handle:
            self._lib.stoke_predictor_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            self.close()


def train(data_dir, model_out, options=None, progress=None):
    """Trains on data_dir and writes model_out, as `stoke train` does.
    options: a dict (or "key=value; ..." text) of stoke train's options without
    "--"; progress(Progress) returning True stops after the current step
    (StokeError CANCELLED, with MODEL.stop written). Returns a dict of the result."""
    lib = library()
    if isinstance(options, dict):
        options = "\n".join("%s=%s" % (k, v) for k, v in options.items())
    raised = []

    def on_progress(_user, p):
        try:
            return 1 if progress(p.contents) else 0
        except BaseException as e:  # an exception must not unwind through C: stop and re-raise
            raised.append(e)
            return 1

    callback = _PROGRESS_FN(on_progress) if progress else _PROGRESS_FN()
    result = _TrainResult()
    status = lib.stoke_train(os.fsencode(data_dir), os.fsencode(model_out),
                             (options or "").encode(), callback, None, ctypes.byref(result))
    if raised:
        raise raised[0]
    _check(lib, status)
    return {name: getattr(result, name) for name, _ in _TrainResult._fields_ if name != "reserved"}
