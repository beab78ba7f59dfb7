#include "io/npy.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

TEST(Tensor, RecordsDomainAndAllocator) {
  auto alloc = HostAllocator::create("t");
  auto t = Tensor::allocate(*alloc, DataType::kFloat32, {2, 3});
  ASSERT_TRUE(t.is_ok());
  EXPECT_TRUE(t->domain().is_host());
  EXPECT_EQ(t->buffer()->allocator(), alloc.get());
  EXPECT_EQ(t->nbytes(), 24u);
  EXPECT_GE(alloc->bytes_in_use(), 24u);
  t = Status(StatusCode::kInternal, "drop");
  EXPECT_EQ(alloc->bytes_in_use(), 0u);
}

TEST(Tensor, NegativeShapeRejected) {
  auto alloc = HostAllocator::create();
  EXPECT_FALSE(Tensor::allocate(*alloc, DataType::kFloat32, {2, -1}).is_ok());
}

TEST(Npy, RoundTripAllTypes) {
  TempDir dir;
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kInt64, DataType::kInt32, DataType::kUInt8,
                      DataType::kBool, DataType::kFloat16, DataType::kInt8}) {
    Tensor t = Tensor::host(dt, {2, 3});
    for (size_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(i % 2);
    std::string path = dir.file("x.npy");
    ASSERT_TRUE(io::write_npy(path, t).is_ok());
    auto r = io::read_npy(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(bitwise_equal(t, *r)) << dtype_name(dt);
  }
  Tensor scalar = Tensor::host(DataType::kInt64, {});
  *scalar.data<int64_t>() = 16000;
  auto bytes = io::to_npy(scalar);
  ASSERT_TRUE(bytes.is_ok());
  auto back = io::parse_npy(*bytes, "s");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->rank(), 0);
  EXPECT_EQ(*back->data<int64_t>(), 16000);
}

TEST(Npy, BadFilesGiveOneClearError) {
  EXPECT_EQ(io::read_npy("/nonexistent/x.npy").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(io::parse_npy("hello", "h").is_ok());
  auto good = io::to_npy(Tensor::host(DataType::kFloat32, {4}));
  std::string truncated = good->substr(0, good->size() - 3);
  Status s = io::parse_npy(truncated, "t.npy").status();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("t.npy"), std::string::npos);
  std::string bad_type = *good;
  bad_type.replace(bad_type.find("<f4"), 3, "<c8");
  EXPECT_FALSE(io::parse_npy(bad_type, "c").is_ok());
  std::string fortran = *good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_FALSE(io::parse_npy(fortran, "f").is_ok());
}

}  // namespace
}  // namespace bulkhead::test

#include <cstdint>
#include <cstring>

#include "memory/caching_allocator.h"

namespace bulkhead::test {
namespace {

TEST(CachingHostAllocator, ReusesFreedBlocksAndCountsBytes) {
  auto a = std::make_shared<CachingHostAllocator>("s1");
  void* first;
  {
    auto t = Tensor::allocate(*a, DataType::kFloat32, {1000, 100});
    ASSERT_TRUE(t.is_ok());
    first = t->raw();
    EXPECT_GE(a->bytes_in_use(), 400000u);
  }
  EXPECT_EQ(a->bytes_in_use(), 0u);
  EXPECT_GE(a->bytes_cached(), 400000u);
  auto again = Tensor::allocate(*a, DataType::kFloat32, {1000, 100});
  EXPECT_EQ(again->raw(), first);  // same block, no new pages
  EXPECT_EQ(again->buffer()->allocator(), a.get());
  EXPECT_EQ(a->bytes_cached(), 0u);
}

TEST(CachingHostAllocator, SessionsNeverShareBlocks) {
  auto a = std::make_shared<CachingHostAllocator>("s1");
  auto b = std::make_shared<CachingHostAllocator>("s2");
  void* pa;
  { pa = Tensor::allocate(*a, DataType::kFloat32, {4096})->raw(); }
  auto tb = Tensor::allocate(*b, DataType::kFloat32, {4096});
  EXPECT_NE(tb->raw(), pa);
}

TEST(CachingHostAllocator, SizeClassesBoundWaste) {
  for (size_t n : {1ul, 63ul, 4097ul, 100000ul, 123456789ul}) {
    size_t c = CachingHostAllocator::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, n + n / 8 + 64);
  }
}

// Blocks of 2 MiB and more come from host_pages_alloc (mapped, advised as huge pages):
// aligned, writable end to end, counted, reused by the caching allocator, returned on free.
TEST(HostPages, LargeBlocksFromBothAllocators) {
  const size_t sizes[] = {(size_t{2} << 20) - 8, size_t{2} << 20, (size_t{2} << 20) + 1, 5000003, size_t{9} << 20};
  auto host = HostAllocator::create("big");
  for (size_t n : sizes) {
    auto b = host->allocate(n);
    ASSERT_TRUE(b.is_ok()) << n;
    auto* p = static_cast<unsigned char*>((*b)->data());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, 0xab, n);
    EXPECT_EQ(p[0], 0xab);
    EXPECT_EQ(p[n - 1], 0xab);
    EXPECT_GE(host->bytes_in_use(), n);
    b->reset();
    EXPECT_EQ(host->bytes_in_use(), 0u);
  }
  auto caching = std::make_shared<CachingHostAllocator>("big");
  for (size_t n : sizes) {
    void* first;
    {
      auto b = caching->allocate(n);
      ASSERT_TRUE(b.is_ok()) << n;
      first = (*b)->data();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
      std::memset(first, 0xcd, n);
    }
    auto again = caching->allocate(n);
    EXPECT_EQ((*again)->data(), first) << n;
    EXPECT_EQ(static_cast<unsigned char*>((*again)->data())[n - 1], 0xcd);
  }
  EXPECT_EQ(caching->bytes_in_use(), 0u);
  // A cache that may hold nothing frees large blocks at once.
  auto tiny = std::make_shared<CachingHostAllocator>("tiny", 0);
  for (int i = 0; i < 3; ++i) {
    auto b = tiny->allocate(size_t{4} << 20);
    ASSERT_TRUE(b.is_ok());
    std::memset((*b)->data(), i, size_t{4} << 20);
  }
  EXPECT_EQ(tiny->bytes_cached(), 0u);
}

TEST(CachingHostAllocator, BuffersOutliveTheirAllocatorHandle) {
  Tensor t;
  {
    auto a = std::make_shared<CachingHostAllocator>("s1");
    t = *Tensor::allocate(*a, DataType::kInt64, {16});
  }
  t.data<int64_t>()[15] = 7;  // the buffer keeps its allocator alive
  EXPECT_EQ(t.data<int64_t>()[15], 7);
}

}  // namespace
}  // namespace bulkhead::test
