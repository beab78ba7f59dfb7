// Reading and writing files safely (io/file.h, io/file_set.h), .npy parsing of hostile
// headers and string arrays (io/npy.h), checked sizes (common/sizes.h), strict number parsing
// (common/parse.h) and text made safe for terminals, JSON, HTML and shells (common/text.h).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "common/parse.h"
#include "common/sizes.h"
#include "common/text.h"
#include "io/file.h"
#include "io/file_set.h"
#include "io/npy.h"
#include "support/test_util.h"

namespace bulkhead {
namespace {

namespace fs = std::filesystem;

// A .npy file with the given header dict and `data_bytes` zero bytes of data.
std::string npy_with(const std::string& dict, size_t data_bytes) {
  std::string h = dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(data_bytes, '\0');
}

TEST(Sizes, CheckedCountsRefuseOverflowAndNegativeDimensions) {
  int64_t n = -7;
  size_t b = 7;
  EXPECT_TRUE(checked_numel({2, 3, 4}, &n));
  EXPECT_EQ(n, 24);
  EXPECT_TRUE(checked_nbytes(DataType::kFloat32, {2, 3, 4}, &b));
  EXPECT_EQ(b, 96u);
  EXPECT_TRUE(checked_numel({}, &n));
  EXPECT_EQ(n, 1);
  // (2^32, 2^30) float32: 2^62 elements fit, 2^64 bytes do not (the wrap to 0 of the report).
  EXPECT_TRUE(checked_numel({int64_t{1} << 32, int64_t{1} << 30}, &n));
  b = 7;
  EXPECT_FALSE(checked_nbytes(DataType::kFloat32, {int64_t{1} << 32, int64_t{1} << 30}, &b));
  EXPECT_EQ(b, 7u) << "the out-parameter is untouched on failure";
  n = -7;
  EXPECT_FALSE(checked_numel({int64_t{1} << 32, int64_t{1} << 32}, &n));
  EXPECT_FALSE(checked_numel({3, -1}, &n));
  EXPECT_EQ(n, -7);
  // A zero dimension makes the count 0, whatever the others are.
  EXPECT_TRUE(checked_numel({int64_t{1} << 62, int64_t{1} << 62, 0}, &n));
  EXPECT_EQ(n, 0);

  auto r = tensor_nbytes(DataType::kFloat32, {int64_t{1} << 32, int64_t{1} << 30});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("float32[4294967296,1073741824] is too large"), std::string::npos) << r.status().message();
  auto neg = tensor_nbytes(DataType::kInt8, {2, -3});
  ASSERT_FALSE(neg.is_ok());
  EXPECT_NE(neg.status().message().find("negative dimension"), std::string::npos);
}

TEST(Sizes, TensorAllocationRefusesAShapeWhoseByteCountWraps) {
  auto alloc = HostAllocator::create("test");
  auto t = Tensor::allocate(*alloc, DataType::kFloat32, {int64_t{1} << 32, int64_t{1} << 30});
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  auto huge = Tensor::allocate(*alloc, DataType::kFloat32, {int64_t{1} << 61});
  ASSERT_FALSE(huge.is_ok()) << "2^63 bytes must be refused, not wrapped or thrown";
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  auto copy = Tensor::host_copy(DataType::kFloat32, {int64_t{1} << 32, int64_t{1} << 30}, "", 0);
  EXPECT_FALSE(copy.is_ok()) << "a shape whose byte count wraps to 0 must not match 0 bytes";
}

TEST(Npy, HostileHeadersAreOneClearError) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  const Case cases[] = {
      {"byte count wraps to 0", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 1073741824), }", 0), "too large"},
      {"dimension past int64", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0), "bad shape"},
      {"negative dimension", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0), "bad shape"},
      {"data shorter than the shape", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 12), "data has 12 bytes, expected 16"},
      {"unknown dtype", npy_with("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8), "unsupported dtype"},
      {"no magic", std::string("NUMPY\x01\x00", 7) + std::string(40, ' '), "magic"},
      {"header length past the end", std::string("\x93NUMPY\x01\x00\xff\xff", 10), "truncated header"},
  };
  for (const auto& c : cases) {
    auto t = io::parse_npy(c.bytes, "x.npy");
    ASSERT_FALSE(t.is_ok()) << c.what;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << c.what << ": " << t.status().message();
    EXPECT_NE(t.status().message().find("'x.npy'"), std::string::npos) << c.what;
  }
  auto ok = io::parse_npy(npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16), "x.npy");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->shape(), (Shape{2, 2}));
}

// A .npy file with the given header dict and data.
std::string npy_bytes(const std::string& dict, const std::string& data) { return npy_with(dict, 0) + data; }

// Code points as UTF-32, little- or big-endian.
std::string utf32(std::initializer_list<uint32_t> cps, bool big_endian = false) {
  std::string s;
  for (uint32_t c : cps)
    for (int k = 0; k < 4; ++k) s += static_cast<char>((c >> (8 * (big_endian ? 3 - k : k))) & 0xff);
  return s;
}

std::vector<std::string> strings_of(const Tensor& t) { return std::vector<std::string>(t.strings(), t.strings() + t.numel()); }

TEST(Npy, StringArraysAreReadAsUtf8) {
  // np.array(['ab', '€😀', '']) : '<U2', NUL-padded, trailing NULs dropped.
  auto u = io::parse_npy(npy_bytes("{'descr': '<U2', 'fortran_order': False, 'shape': (3,), }",
                                   utf32({'a', 'b', 0x20AC, 0x1F600, 0, 0})),
                         "u.npy");
  ASSERT_TRUE(u.is_ok()) << u.status().message();
  EXPECT_EQ(u->dtype(), DataType::kString);
  EXPECT_EQ(u->shape(), (Shape{3}));
  EXPECT_EQ(strings_of(*u), (std::vector<std::string>{"ab", "\xE2\x82\xAC\xF0\x9F\x98\x80", ""}));
  // Big-endian, 2-D; a NUL inside a string is kept, only the trailing ones go.
  auto be = io::parse_npy(npy_bytes("{'descr': '>U3', 'fortran_order': False, 'shape': (2, 1), }",
                                    utf32({'x', 0, 'y', 0xE9, 0, 0}, true)),
                          "be.npy");
  ASSERT_TRUE(be.is_ok()) << be.status().message();
  EXPECT_EQ(be->shape(), (Shape{2, 1}));
  EXPECT_EQ(strings_of(*be), (std::vector<std::string>{std::string("x\0y", 3), "\xC3\xA9"}));
  // Bytes ('|S3'), kept as they are, and a 0-d array.
  auto s = io::parse_npy(npy_bytes("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", std::string("ab\0\xff\0\0", 6)), "s.npy");
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(strings_of(*s), (std::vector<std::string>{"ab", "\xff"}));
  auto scalar = io::parse_npy(npy_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (), }", utf32({'q'})), "0d.npy");
  ASSERT_TRUE(scalar.is_ok()) << scalar.status().message();
  EXPECT_EQ(scalar->shape(), Shape{});
  EXPECT_EQ(strings_of(*scalar), (std::vector<std::string>{"q"}));
  auto empty = io::parse_npy(npy_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (0, 3), }", ""), "e.npy");
  ASSERT_TRUE(empty.is_ok()) << empty.status().message();
  EXPECT_EQ(empty->numel(), 0);
}

TEST(Npy, HostileStringHeadersAreOneClearError) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  const Case cases[] = {
      {"a huge width, checked against the data before allocating",
       npy_bytes("{'descr': '<U999999999999', 'fortran_order': False, 'shape': (1,), }", utf32({'a'})),
       "data has 4 bytes, expected 3999999999996 for 1 elements of '<U999999999999'"},
      {"a huge width times a huge count", npy_bytes("{'descr': '<U999999999999', 'fortran_order': False, 'shape': (999999999999,), }", ""),
       "too large"},
      {"a width past 64 bits", npy_bytes("{'descr': '<U99999999999999999999999', 'fortran_order': False, 'shape': (1,), }", ""),
       "string width in dtype '<U99999999999999999999999' is too large"},
      {"a width that overflows as bytes", npy_bytes("{'descr': '<U4611686018427387904', 'fortran_order': False, 'shape': (1,), }", ""),
       "too large"},
      {"a huge byte width", npy_bytes("{'descr': '|S999999999999', 'fortran_order': False, 'shape': (2,), }", "ab"),
       "data has 2 bytes, expected 1999999999998"},
      {"zero width", npy_bytes("{'descr': '<U0', 'fortran_order': False, 'shape': (1000000000000,), }", ""), "zero-width string dtype"},
      {"a truncated body", npy_bytes("{'descr': '<U2', 'fortran_order': False, 'shape': (3,), }", utf32({'a', 'b', 'c', 'd', 'e'})),
       "data has 20 bytes, expected 24 for 3 elements of '<U2' (8 bytes each)"},
      {"a body that is too long", npy_bytes("{'descr': '|S2', 'fortran_order': False, 'shape': (1,), }", "abc"),
       "data has 3 bytes, expected 2"},
      {"a surrogate", npy_bytes("{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", utf32({'a', 0, 'b', 0xD800})),
       "element 1 of '<U2' holds 0xD800 at character 1, a UTF-16 surrogate"},
      {"past U+10FFFF", npy_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", utf32({0x110000})),
       "holds 0x110000 at character 0, past U+10FFFF"},
      {"past U+10FFFF, big-endian", npy_bytes("{'descr': '>U1', 'fortran_order': False, 'shape': (1,), }", utf32({0xFFFFFFFF}, true)),
       "holds 0xFFFFFFFF"},
      {"not a string dtype", npy_bytes("{'descr': '<Ux', 'fortran_order': False, 'shape': (1,), }", ""), "unsupported dtype '<Ux'"},
  };
  for (const auto& c : cases) {
    auto t = io::parse_npy(c.bytes, "x.npy");
    ASSERT_FALSE(t.is_ok()) << c.what;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << c.what << ": " << t.status().message();
    EXPECT_NE(t.status().message().find("'x.npy' is not a valid .npy file: "), std::string::npos) << c.what;
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << c.what;
  }
}

TEST(Npy, ObjectArraysAreRefusedWithoutUnpickling) {
  // What np.save writes for np.array(['a'], dtype=object): a pickle after the header.
  const std::string pickle = "\x80\x03" "cnumpy.core.multiarray\n_reconstruct\nq\x00.";
  for (const char* descr : {"|O", "O", "<O"}) {
    auto t = io::parse_npy(npy_bytes(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,), }", pickle), "obj.npy");
    ASSERT_FALSE(t.is_ok()) << descr;
    const std::string m = t.status().message();
    EXPECT_EQ(t.status().code(), StatusCode::kUnsupported) << m;
    EXPECT_NE(m.find("'obj.npy' holds a NumPy object array (dtype '" + std::string(descr) + "')"), std::string::npos) << m;
    EXPECT_NE(m.find("unpickling"), std::string::npos) << m;
    EXPECT_NE(m.find("np.array(x, dtype=str)"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(Npy, StringTensorsAreWrittenAsUtf32) {
  Tensor t = Tensor::host(DataType::kString, {2, 2});
  const std::vector<std::string> v = {"ab", "\xE2\x82\xAC\xF0\x9F\x98\x80x", "", std::string("a\0b", 3)};
  std::copy(v.begin(), v.end(), t.strings());
  auto bytes = io::to_npy(t);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  // The header numpy writes for np.array([['ab', '€😀x'], ['', 'a\0b']]), then the code points.
  const std::string header = npy_with("{'descr': '<U3', 'fortran_order': False, 'shape': (2, 2), }", 0);
  ASSERT_EQ(bytes->substr(0, header.size()), header);
  EXPECT_EQ(bytes->substr(header.size()), utf32({'a', 'b', 0, 0x20AC, 0x1F600, 'x', 0, 0, 0, 'a', 0, 'b'}));
  auto back = io::parse_npy(*bytes, "back.npy");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->shape(), (Shape{2, 2}));
  EXPECT_EQ(strings_of(*back), v);

  // All empty, and no elements at all: width 1, as numpy.
  Tensor blank = Tensor::host(DataType::kString, {0});
  auto b = io::to_npy(blank);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(*b, npy_with("{'descr': '<U1', 'fortran_order': False, 'shape': (0,), }", 0));
  Tensor one = Tensor::host(DataType::kString, {});
  auto o = io::to_npy(one);
  ASSERT_TRUE(o.is_ok()) << o.status().message();
  EXPECT_EQ(*o, npy_with("{'descr': '<U1', 'fortran_order': False, 'shape': (), }", 4));
}

TEST(Npy, StringsThatAreNotUnicodeTextAreAnErrorWhenWritten) {
  struct Case {
    std::string s;
    const char* expect;
  };
  const Case cases[] = {
      {"ok\xff", "string 1 is not valid UTF-8 (byte 0xFF at offset 2)"},
      {"\xC0\xAF", "string 1 is not valid UTF-8 (byte 0xC0 at offset 0)"},          // overlong '/'
      {"\xED\xA0\x80", "string 1 is not valid UTF-8 (byte 0xED at offset 0)"},      // a surrogate
      {"\xF4\x90\x80\x80", "string 1 is not valid UTF-8 (byte 0xF4 at offset 0)"},  // past U+10FFFF
      {"ab\xE2\x82", "string 1 is not valid UTF-8 (byte 0xE2 at offset 2)"},        // truncated
      {std::string("ab\0", 3), "string 1 ends with a NUL character"},
  };
  for (const auto& c : cases) {
    Tensor t = Tensor::host(DataType::kString, {2});
    t.strings()[0] = "fine";
    t.strings()[1] = c.s;
    auto r = io::to_npy(t);
    ASSERT_FALSE(r.is_ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(Files, OnlyRegularFilesWithinTheLimitAreRead) {
  test::TempDir d;
  d.write("small.bin", std::string(100, 'x'));
  auto ok = io::read_regular_file(d.file("small.bin"), 100, "input");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), 100u);

  auto big = io::read_regular_file(d.file("small.bin"), 99, "input");
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("more than the limit of 99 B"), std::string::npos) << big.status().message();

  auto dir = io::read_regular_file(d.path(), 1 << 20, "model");
  ASSERT_FALSE(dir.is_ok());
  EXPECT_NE(dir.status().message().find("is a directory, not a regular file"), std::string::npos) << dir.status().message();

  auto dev = io::read_regular_file("/dev/zero", 1 << 20, "model");
  ASSERT_FALSE(dev.is_ok()) << "/dev/zero must not be read at all";
  EXPECT_NE(dev.status().message().find("character device"), std::string::npos) << dev.status().message();

  ASSERT_EQ(::mkfifo(d.file("fifo").c_str(), 0600), 0);
  auto fifo = io::read_regular_file(d.file("fifo"), 1 << 20, "input");  // must not block
  ASSERT_FALSE(fifo.is_ok());
  EXPECT_NE(fifo.status().message().find("FIFO"), std::string::npos) << fifo.status().message();

  auto missing = io::read_regular_file(d.file("nope"), 1 << 20, "input");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
}

TEST(Files, AModelsFilesMustStayInsideItsFolderWithSymlinksResolved) {
  test::TempDir d;
  fs::create_directories(d.file("model/sub"));
  fs::create_directories(d.file("other"));
  std::ofstream(d.file("model/weights.bin")) << "inside";
  std::ofstream(d.file("model/sub/w.bin")) << "deeper";
  std::ofstream(d.file("other/secret.bin")) << "outside";
  fs::create_symlink("/etc/passwd", d.file("model/link.bin"));
  fs::create_symlink("../other/secret.bin", d.file("model/rel_link.bin"));
  fs::create_symlink("weights.bin", d.file("model/ok_link.bin"));
  fs::create_directory_symlink("../other", d.file("model/dirlink"));
  const std::string dir = d.file("model");

  for (const char* good : {"weights.bin", "sub/w.bin", "ok_link.bin", "./weights.bin", "sub/../weights.bin"}) {
    auto f = io::RegularFile::open_inside(dir, good, 1 << 20, "external data");
    EXPECT_TRUE(f.is_ok()) << good << ": " << f.status().message();
  }
  struct Bad {
    const char* path;
    const char* expect;
  };
  for (const Bad& b : {Bad{"link.bin", "outside the model's folder"}, Bad{"rel_link.bin", "outside the model's folder"},
                       Bad{"dirlink/secret.bin", "outside the model's folder"}, Bad{"../other/secret.bin", "outside the model's folder"},
                       Bad{"/etc/passwd", "absolute path"}, Bad{"missing.bin", "does not exist"}, Bad{"sub", "directory"}}) {
    auto f = io::RegularFile::open_inside(dir, b.path, 1 << 20, "external data");
    ASSERT_FALSE(f.is_ok()) << b.path;
    EXPECT_NE(f.status().message().find(b.expect), std::string::npos) << b.path << ": " << f.status().message();
  }
}

TEST(FileSet, AllOrNothingLeavesNoFileAndNoTemporaryOnFailure) {
  test::TempDir d;
  // The second file cannot be written (its folder does not exist): the first must not stay.
  Status s = io::write_files_all_or_nothing({{d.file("a.npy"), "aaaa"}, {d.file("nofolder/b.npy"), "bbbb"}});
  EXPECT_FALSE(s.is_ok());
  EXPECT_TRUE(fs::is_empty(d.path())) << "a failed set leaves nothing behind";

  Status dup = io::write_files_all_or_nothing({{d.file("a.npy"), "1"}, {d.file("a.npy"), "2"}});
  EXPECT_FALSE(dup.is_ok());
  EXPECT_TRUE(fs::is_empty(d.path()));

  ASSERT_TRUE(io::write_files_all_or_nothing({{d.file("a.npy"), "aaaa"}, {d.file("b.npy"), "bb"}}).is_ok());
  EXPECT_EQ(fs::file_size(d.file("a.npy")), 4u);
  EXPECT_EQ(fs::file_size(d.file("b.npy")), 2u);
  int entries = 0;
  for (auto& e : fs::directory_iterator(d.path())) entries += !e.path().empty();
  EXPECT_EQ(entries, 2) << "no temporaries stay after success";
}

TEST(FileSet, AWritePastTheFileSizeLimitIsAnErrorAndLeavesNoTemporary) {
  test::TempDir d;
  // In a child: RLIMIT_FSIZE would otherwise kill the test with SIGXFSZ.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    io::remove_temporaries_on_signals();
    struct rlimit rl {1000, 1000};
    setrlimit(RLIMIT_FSIZE, &rl);
    Status s = io::write_files_all_or_nothing({{d.file("small.npy"), std::string(10, 'x')}, {d.file("big.npy"), std::string(5000, 'x')}});
    _exit(s.is_ok() ? 10 : s.message().find("File too large") != std::string::npos ? 0 : 11);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(fs::is_empty(d.path()));
}

TEST(FileSet, SafeFileNamesCannotLeaveTheirFolderOrHide) {
  EXPECT_EQ(io::safe_file_name("logits"), "logits");
  EXPECT_EQ(io::safe_file_name("a/b"), "a_b");
  EXPECT_EQ(io::safe_file_name("../../etc/x"), "_.._.._etc_x");
  EXPECT_EQ(io::safe_file_name(".hidden"), "_.hidden");
  EXPECT_EQ(io::safe_file_name(""), "_");
  EXPECT_EQ(io::safe_file_name(std::string("a\0b\n", 4)), "a_b_");
}

TEST(Parse, NumbersFromUsersAreStrict) {
  uint64_t b = 0;
  EXPECT_TRUE(parse_byte_size("512", &b));
  EXPECT_EQ(b, 512u);
  EXPECT_TRUE(parse_byte_size("64K", &b));
  EXPECT_EQ(b, 65536u);
  EXPECT_TRUE(parse_byte_size("2GiB", &b));
  EXPECT_EQ(b, uint64_t{2} << 30);
  EXPECT_TRUE(parse_byte_size("8m", &b));
  EXPECT_EQ(b, uint64_t{8} << 20);
  for (const char* bad : {"", "-5K", "+5", "5X", "K", "1.5G", " 5", "5 ", "99999999999999999999", "17179869184G"})
    EXPECT_FALSE(parse_byte_size(bad, &b)) << bad;

  int64_t v = 0;
  EXPECT_TRUE(parse_int_in("-3", -10, 10, &v));
  EXPECT_EQ(v, -3);
  EXPECT_TRUE(parse_int_in("9223372036854775807", 0, INT64_MAX, &v));
  EXPECT_TRUE(parse_int_in("-9223372036854775808", INT64_MIN, 0, &v));
  EXPECT_EQ(v, INT64_MIN);
  for (const char* bad : {"", "3abc", "1e3", "11", "-11", "9223372036854775808", "--1", " 1"})
    EXPECT_FALSE(parse_int_in(bad, -10, 10, &v)) << bad;
}

TEST(Text, BytesFromModelsAreMadeSafeForEachSink) {
  EXPECT_EQ(printable("conv_1"), "conv_1");
  EXPECT_EQ(printable("caf\xC3\xA9"), "caf\xC3\xA9") << "valid UTF-8 is kept";
  EXPECT_EQ(printable("a\x1b[2Jb\n"), "a\\x1B[2Jb\\x0A");
  EXPECT_EQ(printable("\xff\xfe"), "\\xFF\\xFE");
  EXPECT_EQ(printable("\xC2\x9B"), "\\xC2\\x9B") << "C1 controls (CSI) are escaped";
  EXPECT_EQ(printable("\xED\xA0\x80"), "\\xED\\xA0\\x80") << "surrogates are not valid UTF-8";
  EXPECT_EQ(valid_utf8("ok\xff"), "ok\\xFF");
  EXPECT_EQ(valid_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(html_escape("<b a='1'>&\"</b>"), "&lt;b a=&#39;1&#39;&gt;&amp;&quot;&lt;/b&gt;");
  EXPECT_EQ(shell_quote("X'$(touch /tmp/owned)'"), "'X'\\''$(touch /tmp/owned)'\\'''");
  // The quoted word, read back by a real shell, is exactly the string.
  for (std::string s : {std::string("X'$(touch /tmp/owned)'"), std::string("a b\"c`d\\e"), std::string("''"), std::string("")}) {
    std::string cmd = "printf %s " + shell_quote(s);
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string got;
    char buf[256];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) got.append(buf, n);
    pclose(p);
    EXPECT_EQ(got, s);
  }
}

}  // namespace
}  // namespace bulkhead
