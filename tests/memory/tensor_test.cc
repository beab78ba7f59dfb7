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
