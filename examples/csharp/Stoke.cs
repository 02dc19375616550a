// stoke from C# through its C ABI (include/stoke/stoke.h) by P/Invoke; Mono
// (mcs) and .NET alike. libstoke.so is found by the loader (LD_LIBRARY_PATH,
// or beside the program). Errors are StokeException with the library's
// status and message.
//
//   using (var p = new Stoke.Predictor("model.stoke")) {
//     Stoke.Prediction r = p.PredictFile("part.png");            // r.ClassName, r.Confidence
//     r = p.PredictPixels(frame, 0, width, height, Stoke.PixelFormat.Mono8, stride);
//   }
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Stoke {

public enum PixelFormat { Mono8 = 0, Mono16 = 1, Rgb8 = 2, Bgr8 = 3 }

public class StokeException : Exception {
  public readonly int Status;
  public readonly string StatusName;
  public StokeException(int status, string name, string message)
      : base(message + " (" + name + ")") {
    Status = status;
    StatusName = name;
  }
}

public class Prediction {
  public int Label;
  public string ClassName;
  public float Confidence;
  public float[] Probabilities;  // one per class, in the model's class order
}

// stoke_progress: what the training callback is told.
[StructLayout(LayoutKind.Sequential)]
public struct Progress {
  public const int Step = 0, Epoch = 1;
  public int Kind, EpochIndex, Epochs;
  uint reserved0;
  public ulong StepCount, TotalSteps;
  public float TrainLoss, TrainAccuracy, ValAccuracy, ImagesPerSecond;
  uint r0, r1, r2, r3, r4, r5, r6, r7;
}

[StructLayout(LayoutKind.Sequential)]
public struct TrainResult {
  public int Epochs, BatchSize;
  public float BestValAccuracy;
  public uint TrainSamples, ValSamples;
  public int WroteModel;
  uint r0, r1, r2, r3, r4, r5, r6, r7;
}

// Returns true to stop after the current step.
public delegate bool ProgressHandler(Progress progress);

static class Native {
  const string Lib = "stoke";
  public const int AbiVersion = 1;  // STOKE_C_ABI_VERSION this file was written for
  public const int BufferTooSmall = 11;

  [StructLayout(LayoutKind.Sequential)]
  public struct RawPrediction {
    public int Label;
    public float Confidence;
    public uint ClassCount;
    public float AnomalyScore;
    uint r0, r1, r2, r3, r4, r5, r6, r7;
  }

  [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
  public delegate int ProgressFn(IntPtr user, ref Progress progress);

  [DllImport(Lib)] public static extern IntPtr stoke_version();
  [DllImport(Lib)] public static extern int stoke_abi_version();
  [DllImport(Lib)] public static extern IntPtr stoke_last_error();
  [DllImport(Lib)] public static extern IntPtr stoke_status_name(int status);
  [DllImport(Lib)] public static extern int stoke_predictor_open(byte[] path, uint flags, out IntPtr handle);
  [DllImport(Lib)] public static extern void stoke_predictor_close(IntPtr handle);
  [DllImport(Lib)] public static extern int stoke_predictor_class_count(IntPtr handle, out uint count);
  [DllImport(Lib)] public static extern int stoke_predictor_class_name(IntPtr handle, uint index, byte[] buffer,
                                                                       UIntPtr capacity, out UIntPtr needed);
  [DllImport(Lib)] public static extern int stoke_predict_file(IntPtr handle, byte[] path, out RawPrediction result,
                                                               [Out] float[] probabilities, UIntPtr capacity);
  [DllImport(Lib)] public static extern int stoke_predict_bytes(IntPtr handle, byte[] bytes, UIntPtr size,
                                                                out RawPrediction result,
                                                                [Out] float[] probabilities, UIntPtr capacity);
  [DllImport(Lib)] public static extern int stoke_predict_pixels(IntPtr handle, IntPtr pixels, int width, int height,
                                                                 int format, UIntPtr stride, out RawPrediction result,
                                                                 [Out] float[] probabilities, UIntPtr capacity);
  [DllImport(Lib)] public static extern int stoke_segment_file(IntPtr handle, byte[] path, [Out] byte[] labels,
                                                               UIntPtr capacity, out int width, out int height,
                                                               [Out] long[] areas, UIntPtr areasCapacity);
  [DllImport(Lib)] public static extern int stoke_train(byte[] data, byte[] modelOut, byte[] options, ProgressFn progress,
                                                        IntPtr user, out TrainResult result);

  public static byte[] Utf8(string s) { return Encoding.UTF8.GetBytes(s + "\0"); }

  public static string Text(IntPtr p) {
    if (p == IntPtr.Zero) return "";
    int n = 0;
    while (Marshal.ReadByte(p, n) != 0) ++n;
    byte[] bytes = new byte[n];
    Marshal.Copy(p, bytes, 0, n);
    return Encoding.UTF8.GetString(bytes);
  }

  public static void Check(int status) {
    if (status != 0)
      throw new StokeException(status, Text(stoke_status_name(status)), Text(stoke_last_error()));
  }
}

public static class Library {
  public static string Version {
    get { return Native.Text(Native.stoke_version()); }
  }

  // Trains on dataDir (one subfolder per class) and writes modelOut, as `stoke train`
  // does; options are stoke train's without "--": "epochs=10; size=64; augment=hflip".
  public static TrainResult Train(string dataDir, string modelOut, string options, ProgressHandler progress) {
    Native.ProgressFn fn = null;
    Exception raised = null;
    if (progress != null) {
      fn = delegate(IntPtr user, ref Progress p) {
        try {
          return progress(p) ? 1 : 0;
        } catch (Exception e) {  // never unwind through native frames: stop and rethrow after
          raised = e;
          return 1;
        }
      };
    }
    TrainResult result;
    int status = Native.stoke_train(Native.Utf8(dataDir), Native.Utf8(modelOut), Native.Utf8(options ?? ""), fn,
                                    IntPtr.Zero, out result);
    GC.KeepAlive(fn);
    if (raised != null) throw raised;
    Native.Check(status);
    return result;
  }
}

// A segmentation model's result (Predictor.SegmentFile).
public sealed class Segmentation {
  public int Width, Height;
  public byte[] Labels;  // Height x Width class indices, row-major
  public long[] Areas;   // pixels per class, in Classes' order
}

// A model file loaded for prediction. Predict* may be called from several threads
// at once (they run in parallel); Dispose must not race them.
public sealed class Predictor : IDisposable {
  IntPtr handle_;
  public readonly string[] Classes;

  public Predictor(string modelPath, bool requireSelfCheck = true) {
    if (Native.stoke_abi_version() != Native.AbiVersion)
      throw new StokeException(-1, "ABI", "libstoke has C ABI version " + Native.stoke_abi_version() +
                                              "; this binding speaks " + Native.AbiVersion);
    Native.Check(Native.stoke_predictor_open(Native.Utf8(modelPath), requireSelfCheck ? 0u : 1u, out handle_));
    uint count;
    Native.Check(Native.stoke_predictor_class_count(handle_, out count));
    Classes = new string[count];
    for (uint i = 0; i < count; ++i) Classes[i] = ClassName(i);
  }

  string ClassName(uint index) {
    UIntPtr needed;
    int status = Native.stoke_predictor_class_name(handle_, index, null, UIntPtr.Zero, out needed);
    if (status != Native.BufferTooSmall) Native.Check(status);
    byte[] buffer = new byte[(int)needed.ToUInt32()];
    Native.Check(Native.stoke_predictor_class_name(handle_, index, buffer, needed, out needed));
    return Encoding.UTF8.GetString(buffer, 0, buffer.Length - 1);
  }

  Prediction Result(int status, Native.RawPrediction raw, float[] probabilities) {
    Native.Check(status);
    Prediction p = new Prediction();
    p.Label = raw.Label;
    p.ClassName = Classes[raw.Label];
    p.Confidence = raw.Confidence;
    p.Probabilities = probabilities;
    return p;
  }

  public Prediction PredictFile(string path) {
    Native.RawPrediction raw;
    float[] probabilities = new float[Classes.Length];
    int status = Native.stoke_predict_file(Handle, Native.Utf8(path), out raw, probabilities,
                                           new UIntPtr((uint)probabilities.Length));
    return Result(status, raw, probabilities);
  }

  // An encoded image (JPEG, PNG, BMP, TIFF) in memory.
  public Prediction PredictBytes(byte[] encoded) {
    Native.RawPrediction raw;
    float[] probabilities = new float[Classes.Length];
    int status = Native.stoke_predict_bytes(Handle, encoded, new UIntPtr((uint)encoded.Length), out raw,
                                            probabilities, new UIntPtr((uint)probabilities.Length));
    return Result(status, raw, probabilities);
  }

  // A camera frame in a managed array, from `offset` on, rows `stride` bytes apart
  // (0: packed). The array is pinned for the call, not copied.
  public Prediction PredictPixels(byte[] pixels, int offset, int width, int height, PixelFormat format, int stride) {
    if (offset < 0 || offset > pixels.Length) throw new ArgumentOutOfRangeException("offset");
    int bytesPerPixel = format == PixelFormat.Mono8 ? 1 : format == PixelFormat.Mono16 ? 2 : 3;
    long rowBytes = (long)width * bytesPerPixel, step = stride == 0 ? rowBytes : stride;
    if (height > 0 && width > 0 && offset + step * (height - 1) + rowBytes > pixels.Length)
      throw new ArgumentException("the frame (" + width + " x " + height + ", stride " + step +
                                  ") does not fit in the array of " + pixels.Length + " bytes from offset " + offset);
    GCHandle pin = GCHandle.Alloc(pixels, GCHandleType.Pinned);
    try {
      Native.RawPrediction raw;
      float[] probabilities = new float[Classes.Length];
      IntPtr at = new IntPtr(pin.AddrOfPinnedObject().ToInt64() + offset);
      int status = Native.stoke_predict_pixels(Handle, at, width, height, (int)format, new UIntPtr((uint)stride),
                                               out raw, probabilities, new UIntPtr((uint)probabilities.Length));
      return Result(status, raw, probabilities);
    } finally {
      pin.Free();
    }
  }

  // A segmentation model's label map of an image file: Width x Height class
  // indices (row-major, the image's size) and the pixels of each class.
  public Segmentation SegmentFile(string path) {
    int width, height;
    byte[] name = Native.Utf8(path);
    Native.Check(Native.stoke_segment_file(Handle, name, null, UIntPtr.Zero, out width, out height, null,
                                           UIntPtr.Zero));
    var r = new Segmentation();
    r.Labels = new byte[(long)width * height];
    r.Areas = new long[Classes.Length];
    Native.Check(Native.stoke_segment_file(Handle, name, r.Labels, new UIntPtr((uint)r.Labels.Length),
                                           out r.Width, out r.Height, r.Areas,
                                           new UIntPtr((uint)r.Areas.Length)));
    return r;
  }

  IntPtr Handle {
    get {
      if (handle_ == IntPtr.Zero) throw new ObjectDisposedException("Stoke.Predictor");
      return handle_;
    }
  }

  public void Dispose() {
    if (handle_ != IntPtr.Zero) Native.stoke_predictor_close(handle_);
    handle_ = IntPtr.Zero;
    GC.SuppressFinalize(this);
  }

  ~Predictor() {
    if (handle_ != IntPtr.Zero) Native.stoke_predictor_close(handle_);
  }
}

}  // namespace Stoke
