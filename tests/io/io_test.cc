// Reading and writing files safely (io/file.h, io/file_set.h), .npy parsing of hostile
// headers (io/npy.h), checked sizes (common/sizes.h), strict number parsing
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
