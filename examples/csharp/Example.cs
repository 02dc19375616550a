// The C# host of stoke's C ABI (Stoke.cs, P/Invoke).
//
//   mono stoke_example.exe MODEL FRAMES_DIR DATA_DIR IMAGE...
//
// Prints one JSON line per prediction, as `stoke predict --json` does, plus
// "via": each IMAGE from its file and from its bytes; two synthetic camera
// frames (Mono8 and BGR8, rows padded past the image, inside a larger managed
// byte[]) from the array, the BGR8 one also as RGB8 with the channels swapped.
// The frames are also written to FRAMES_DIR as BMP (lossless) so that `stoke
// predict` classifies the same pixels: tests/capi/hosts_test.sh checks every
// line against it bit for bit (probabilities as 9 significant digits, which
// give a float back exactly). Then it trains on DATA_DIR for one epoch through
// Stoke.Library.Train, counting the progress callbacks, and loads the result.
using System;
using System.Globalization;
using System.IO;
using System.Text;

static class Example {
  const int Width = 50, Height = 38, Pad = 5, Offset = 11;  // Offset: the frame starts inside the array

  static int Sample(int x, int y, int c) { return (x * 13 + y * 29 + c * 71 + (x * y) % 17) & 0xFF; }

  // The frame at Offset in a larger array, rows Width * channels + Pad apart (padding 0xCD).
  static byte[] Frame(int channels, out int stride) {
    stride = Width * channels + Pad;
    byte[] buffer = new byte[Offset + stride * Height + 3];
    for (int i = 0; i < buffer.Length; ++i) buffer[i] = 0xCD;
    for (int y = 0; y < Height; ++y)
      for (int x = 0; x < Width; ++x)
        for (int c = 0; c < channels; ++c) buffer[Offset + y * stride + x * channels + c] = (byte)Sample(x, y, c);
    return buffer;
  }

  // An 8-bit gray-palette (channels 1) or 24-bit BGR (channels 3) BMP, bottom-up.
  static void WriteBmp(string path, byte[] frame, int stride, int channels) {
    int row = (Width * channels + 3) / 4 * 4, palette = channels == 1 ? 1024 : 0, offset = 14 + 40 + palette;
    using (var w = new BinaryWriter(File.Create(path))) {
      w.Write((byte)'B');
      w.Write((byte)'M');
      w.Write(offset + row * Height);
      w.Write(0);
      w.Write(offset);
      w.Write(40);
      w.Write(Width);
      w.Write(Height);
      w.Write((short)1);
      w.Write((short)(8 * channels));
      w.Write(0);
      w.Write(row * Height);
      w.Write(2835);
      w.Write(2835);
      w.Write(channels == 1 ? 256 : 0);
      w.Write(0);
      for (int i = 0; i < palette / 4; ++i) w.Write(new byte[] {(byte)i, (byte)i, (byte)i, 0});
      for (int y = Height - 1; y >= 0; --y) {
        w.Write(frame, Offset + y * stride, Width * channels);
        w.Write(new byte[row - Width * channels]);
      }
    }
  }

  static string Json(string s) { return "\"" + s.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\""; }
  static string Number(float f) { return f.ToString("G9", CultureInfo.InvariantCulture); }

  static void Line(string file, string via, Stoke.Prediction p, string[] classes) {
    var s = new StringBuilder();
    s.Append("{\"file\": ").Append(Json(file)).Append(", \"via\": ").Append(Json(via));
    s.Append(", \"class\": ").Append(Json(p.ClassName)).Append(", \"confidence\": ").Append(Number(p.Confidence));
    s.Append(", \"probabilities\": {");
    for (int c = 0; c < classes.Length; ++c)
      s.Append(c > 0 ? ", " : "").Append(Json(classes[c])).Append(": ").Append(Number(p.Probabilities[c]));
    Console.WriteLine(s.Append("}}").ToString());
  }

  // --segment MODEL IMAGE: a segmentation model's size and areas for the image,
  // one JSON object (what `stoke predict --json` prints of them).
  static int Segment(string model, string image) {
    using (var predictor = new Stoke.Predictor(model)) {
      Stoke.Segmentation r = predictor.SegmentFile(image);
      var s = new StringBuilder();
      s.Append("{\"width\": ").Append(r.Width).Append(", \"height\": ").Append(r.Height).Append(", \"areas\": {");
      for (int c = 0; c < predictor.Classes.Length; ++c)
        s.Append(c > 0 ? ", " : "").Append(Json(predictor.Classes[c])).Append(": ").Append(r.Areas[c]);
      Console.WriteLine(s.Append("}}").ToString());
    }
    return 0;
  }

  static int Main(string[] args) {
    if (args.Length == 3 && args[0] == "--segment") return Segment(args[1], args[2]);
    if (args.Length < 4) {
      Console.Error.WriteLine("usage: stoke_example.exe MODEL FRAMES_DIR DATA_DIR IMAGE...\n" +
                              "       stoke_example.exe --segment SEGMENTATION_MODEL IMAGE");
      return 2;
    }
    Directory.CreateDirectory(args[1]);
    Console.Error.WriteLine("stoke " + Stoke.Library.Version);
    try {
      using (var predictor = new Stoke.Predictor(args[0])) {
        for (int i = 3; i < args.Length; ++i) {
          Line(args[i], "file", predictor.PredictFile(args[i]), predictor.Classes);
          Line(args[i], "bytes", predictor.PredictBytes(File.ReadAllBytes(args[i])), predictor.Classes);
        }
        int monoStride, bgrStride;
        byte[] mono = Frame(1, out monoStride);
        string monoFile = Path.Combine(args[1], "frame_mono8.bmp");
        WriteBmp(monoFile, mono, monoStride, 1);
        Line(monoFile, "buffer-mono8",
             predictor.PredictPixels(mono, Offset, Width, Height, Stoke.PixelFormat.Mono8, monoStride), predictor.Classes);

        byte[] bgr = Frame(3, out bgrStride);
        string bgrFile = Path.Combine(args[1], "frame_bgr8.bmp");
        WriteBmp(bgrFile, bgr, bgrStride, 3);
        Line(bgrFile, "buffer-bgr8",
             predictor.PredictPixels(bgr, Offset, Width, Height, Stoke.PixelFormat.Bgr8, bgrStride), predictor.Classes);
        byte[] rgb = (byte[])bgr.Clone();
        for (int y = 0; y < Height; ++y)
          for (int x = 0; x < Width; ++x) {
            int at = Offset + y * bgrStride + x * 3;
            rgb[at] = bgr[at + 2];
            rgb[at + 2] = bgr[at];
          }
        Line(bgrFile, "buffer-rgb8",
             predictor.PredictPixels(rgb, Offset, Width, Height, Stoke.PixelFormat.Rgb8, bgrStride), predictor.Classes);

        try {  // an error crosses as a StokeException with the library's message
          predictor.PredictFile(Path.Combine(args[1], "missing.png"));
          Console.Error.WriteLine("FAIL: a missing file was classified");
          return 1;
        } catch (Stoke.StokeException e) {
          if (e.StatusName != "STOKE_ERROR_IO" || !e.Message.Contains("missing.png")) {
            Console.Error.WriteLine("FAIL: a missing file gave " + e.Message);
            return 1;
          }
        }
      }
      return Train(args[2], Path.Combine(args[1], "trained.stoke"));
    } catch (Stoke.StokeException e) {
      Console.Error.WriteLine("stoke: " + e.Message);
      return 1;
    }
  }

  static int Train(string data, string model) {
    int steps = 0, epochs = 0;
    Stoke.TrainResult r = Stoke.Library.Train(data, model, "epochs=1; size=16; batch=4; arch=plain", p => {
      if (p.Kind == Stoke.Progress.Step) ++steps; else ++epochs;
      return false;
    });
    Console.Error.WriteLine("trained: " + steps + " steps, " + epochs + " epoch, validation accuracy " +
                            r.BestValAccuracy);
    if (steps == 0 || epochs != 1 || r.Epochs != 1 || r.WroteModel != 1) {
      Console.Error.WriteLine("FAIL: training reported " + steps + " steps, " + epochs + " epochs");
      return 1;
    }
    using (var trained = new Stoke.Predictor(model)) return trained.Classes.Length >= 2 ? 0 : 1;
  }
}
