// The command-line tool's .npy files: --input reads them, --save writes them, every dtype and
// shape round-trips, and a bad file is a clear error. The files are written by hand from the
// format's specification, not by einjit's writer.
#include "CliRun.h"
#include "cli/Npy.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

using Result = einjit::test::CliResult;
using einjit::test::has;
using einjit::test::runCli;

namespace {

std::string fileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A .npy file written by hand from the format's specification (not by einjit's writer).
std::string npy(int version, const std::string& header, const std::string& data) {
  std::string h = header;
  std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  for (int b = 0; b < (version == 1 ? 2 : 4); ++b)
    out += static_cast<char>((h.size() >> (8 * b)) & 0xff);
  return out + h + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

struct TempDir {
  std::string path = "/tmp/einjit-npy-" + std::to_string(::getpid());
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

} // namespace

TEST_CASE("run --input reads .npy files and --save writes the outputs as .npy") {
  TempDir dir;
  // x = [[1, 2, 3], [4, 5, 6]] (f32), w = [10, 20, 30] (f64 stored big-endian, version 2).
  writeBytes(dir / "x.npy", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                raw(std::vector<float>{1, 2, 3, 4, 5, 6})));
  Result r = runCli("run 'y[i] := x[i,j] * 2' --input x=" + (dir / "x.npy") + " --save " +
                    (dir / "out") + " --check");
  CHECK(r.status == 0);
  CHECK(has(r.out, "y: shape 2 f32 sum=42"));
  CHECK(has(r.out, "check: PASS"));
  std::string saved = fileBytes(dir / "out/y.npy");
  REQUIRE(saved.size() > 10);
  CHECK(saved.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  std::size_t hlen = static_cast<unsigned char>(saved[8]) | static_cast<unsigned char>(saved[9])
                                                                << 8;
  CHECK((10 + hlen) % 64 == 0);
  CHECK(has(saved, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"));
  CHECK(saved.substr(10 + hlen) == raw(std::vector<float>{12, 30}));

  // f64 from a big-endian version-2 file: the random tensors follow its dtype.
  std::string be;
  for (double v : {10.0, 20.0, 30.0}) {
    std::string b = raw(std::vector<double>{v});
    be += std::string(b.rbegin(), b.rend());
  }
  writeBytes(dir / "w.npy",
             npy(2, "{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }", be));
  Result w = runCli("run 's := w[i] * v[i]' --input w=" + (dir / "w.npy") +
                    " --input v=" + (dir / "w.npy") + " --save " + (dir / "out"));
  CHECK(w.status == 0);
  CHECK(has(w.out, "s: shape scalar f64 sum=1400 "));
  einjit::Tensor s = einjit::cli::readNpy(dir / "out/s.npy");
  CHECK(s.dtype() == einjit::DType::f64);
  CHECK(s.rank() == 0);
  CHECK(s.toVector() == std::vector<double>{1400});

  // Gather indices from an i64 file.
  writeBytes(dir / "tok.npy", npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }",
                                  raw(std::vector<std::int64_t>{2, 0, 2, 1})));
  Result g = runCli("run 'y[b] := E[tok[b]]' --input E=" + (dir / "w.npy") +
                    " --input tok=" + (dir / "tok.npy") + " --save " + (dir / "out"));
  CHECK(g.status == 0);
  CHECK(einjit::cli::readNpy(dir / "out/y.npy").toVector() == std::vector<double>{30, 10, 30, 20});
  // Nothing is saved when the call fails.
  writeBytes(dir / "bad_tok.npy",
             npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                 raw(std::vector<std::int64_t>{3})));
  Result b = runCli("run 'y[b] := E[tok[b]]' --input E=" + (dir / "w.npy") +
                    " --input tok=" + (dir / "bad_tok.npy") + " --save " + (dir / "failed"));
  CHECK(b.status == 1);
  CHECK(has(b.out, "gather index 3 is out of bounds for 'E' (extent 3)"));
  CHECK(!std::filesystem::exists(dir / "failed"));
}

// An optimizer-style program writes its arguments in place; m is read by a later statement,
// so it is no program output, but run prints, saves and checks it too, and --check runs the
// interpreter on the inputs as they were before the JIT's call (not on the JIT's results).
TEST_CASE("run prints, saves and checks the arguments an in-place program writes") {
  TempDir dir;
  writeBytes(dir / "m.npy", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                raw(std::vector<float>{2, 4, 6})));
  writeBytes(dir / "g.npy", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                raw(std::vector<float>{1, 1, 1})));
  writeBytes(dir / "p.npy", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                raw(std::vector<float>{10, 10, 10})));
  const std::string program = "'m[i] = m[i] * 0.5 + g[i]; p[i] = p[i] - m[i]'";
  const std::string inputs = " --input m=" + (dir / "m.npy") + " --input g=" + (dir / "g.npy") +
                             " --input p=" + (dir / "p.npy");
  // m = [2, 3, 4], p = [8, 7, 6], worked out by hand.
  Result r = runCli("run " + program + inputs + " --save " + (dir / "out") + " --check");
  CHECK(r.status == 0);
  CHECK(has(r.out, "p: shape 3 f32 sum=21 "));
  CHECK(has(r.out, "m: shape 3 f32 sum=9 "));
  CHECK(has(r.out, "over 6 element(s)")); // p and m
  CHECK(has(r.out, "check: PASS"));
  CHECK(einjit::cli::readNpy(dir / "out/m.npy").toVector() == std::vector<double>{2, 3, 4});
  CHECK(einjit::cli::readNpy(dir / "out/p.npy").toVector() == std::vector<double>{8, 7, 6});
  // The input files are not written.
  CHECK(einjit::cli::readNpy(dir / "m.npy").toVector() == std::vector<double>{2, 4, 6});
}

TEST_CASE(".npy files round-trip every dtype and shape") {
  TempDir dir;
  const std::vector<einjit::DType> dtypes = {einjit::DType::f32, einjit::DType::f64,
                                             einjit::DType::bf16, einjit::DType::i32,
                                             einjit::DType::i64};
  const std::vector<einjit::Shape> shapes = {{}, {0}, {5}, {2, 3, 4}, {3, 0, 2}};
  for (einjit::DType d : dtypes)
    for (const einjit::Shape& shape : shapes) {
      CAPTURE(einjit::dtypeName(d));
      einjit::Tensor t = einjit::isFloat(d) ? einjit::Tensor::random(shape, d, 5)
                                            : einjit::Tensor::randomInt(shape, -50, 50, d, 5);
      CAPTURE(t.shapeString());
      einjit::cli::writeNpy(dir / "t.npy", t);
      einjit::Tensor back = einjit::cli::readNpy(dir / "t.npy");
      CHECK(back.dtype() == d);
      CHECK(back.shape() == shape);
      CHECK(back.toVector() == t.toVector());
    }
  // A strided view is written in C order.
  einjit::Tensor m = einjit::Tensor::fromValues({2, 3}, {1, 2, 3, 4, 5, 6}, einjit::DType::f32);
  einjit::cli::writeNpy(dir / "mt.npy", m.transpose(0, 1));
  einjit::Tensor mt = einjit::cli::readNpy(dir / "mt.npy");
  CHECK(mt.shape() == einjit::Shape{3, 2});
  CHECK(mt.toVector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  // bf16 is written as two raw bytes per element ('|V2'): 1.5 is 0x3fc0.
  einjit::cli::writeNpy(dir / "b.npy", einjit::Tensor::fromValues({1}, {1.5}, einjit::DType::bf16));
  std::string b = fileBytes(dir / "b.npy");
  CHECK(has(b, "'descr': '|V2'"));
  CHECK(b.substr(b.size() - 2) == std::string("\xc0\x3f", 2));
}

TEST_CASE("bad .npy files are clear errors") {
  TempDir dir;
  const std::string f4 = raw(std::vector<float>{1, 2, 3});
  struct Row {
    std::string bytes;
    const char* message;
  };
  const std::vector<Row> rows = {
      {"not numpy at all", "not a NumPy .npy file"},
      {std::string("\x93NUMPY\x01\x00", 8), "not a NumPy .npy file"},
      {std::string("\x93NUMPY\x01\x00\xff\x00{", 11), "the file ends inside its header"},
      {std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' '),
       ".npy format version 9 is not supported"},
      {npy(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", f4),
       "dtype '<f2' is not supported"},
      {npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", f4),
       "the array is in Fortran order"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f4),
       "the data holds 12 bytes but shape (4,) of f32 needs 16"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4 + "x"),
       "the data holds 13 bytes"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", f4), "is not a tuple"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }", f4),
       "is not a tuple of integers"},
      {npy(1, "{'descr': '<f4', 'shape': (3,), }", f4), "the header lacks"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.message);
    writeBytes(dir / "bad.npy", row.bytes);
    Result r = runCli("run 'y[i] := x[i] * 2' --input x=" + (dir / "bad.npy"));
    CHECK(r.status == 1);
    CHECK(has(r.out, dir / "bad.npy: "));
    CHECK(has(r.out, row.message));
  }
  Result missing = runCli("run 'y[i] := x[i]' --input x=" + (dir / "nope.npy"));
  CHECK(missing.status == 1);
  CHECK(has(missing.out, "nope.npy: cannot open it (No such file or directory)"));
  Result both = runCli("run 'y[i] := x[i]' --input x=" + (dir / "nope.npy") + " --shape x=3");
  CHECK(has(both.out, "--input x and --shape x: give one of them"));
  Result unknown = runCli("run 'y[i] := x[i]' --input q=" + (dir / "nope.npy") + " --shape x=3");
  CHECK(has(unknown.out, "--input q: the program has no tensor argument named 'q'"));
}
