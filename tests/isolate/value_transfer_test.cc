// The shared-memory hand-off of process isolation, within one process: values packed
// into a region and unpacked from its mapping come back equal and as views (no copy);
// a reusable region is kept, grown and shrunk; tensors in device memory go through the
// device copy; descriptors that point outside the region are rejected, never followed.
#include "isolate/channel.h"
#include "isolate/shared_memory.h"
#include "isolate/value_transfer.h"
#include "isolate/wire.h"
#include "support/test_util.h"

#include <sys/socket.h>

namespace bulkhead::test {
namespace {

using isolate::PackedValues;
using isolate::ReusableRegion;
using isolate::SharedMemory;

// Maps what the sender packed, as the receiving side does.
Result<NamedValues> receive(SharedMemory& shm, PackedValues& p, ReusableRegion* reuse = nullptr) {
  std::shared_ptr<Buffer> region;
  if (p.region_bytes && reuse) {
    BH_ASSIGN_OR_RETURN(region, shm.map_readonly(isolate::UniqueFd(dup(reuse->fd.get())), p.region_bytes, "test"));
  } else if (p.region_bytes) {
    BH_ASSIGN_OR_RETURN(region, shm.map(std::move(p.region), p.region_bytes, "test"));
  }
  return isolate::unpack_values(p.descriptors, region, p.region_bytes, "test");
}

TEST(ValueTransfer, RoundTripIsAViewOfTheRegion) {
  auto shm = SharedMemory::create("test");
  Tensor a = random_tensor({3, 5}, 1);
  Tensor s = Tensor::host(DataType::kString, {2});
  s.strings()[0] = "alpha";
  s.strings()[1] = std::string(70000, 'z');
  NamedValues in = {{"a", Value(a)},
                    {"s", Value(s)},
                    {"empty", Value(Tensor::host(DataType::kInt64, {0, 4}))},
                    {"seq", Value::make_sequence({random_tensor({2}, 2), random_tensor({7}, 3)}, DataType::kFloat32)},
                    {"none", Value::none()}};
  auto p = isolate::pack_values(in, *shm, "input");
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_TRUE(p->region.valid());
  auto out = receive(*shm, *p);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), in.size());
  const Tensor& ra = (*out)[0].second.tensor;
  EXPECT_TRUE(bitwise_equal(ra, a));
  EXPECT_NE(ra.raw(), a.raw());
  EXPECT_EQ(ra.buffer(), (*out)[3].second.sequence[0].buffer()) << "every tensor is a view of the one mapping";
  EXPECT_EQ((*out)[1].second.tensor.strings()[1], s.strings()[1]);
  EXPECT_EQ((*out)[2].second.tensor.shape(), (Shape{0, 4}));
  EXPECT_TRUE((*out)[3].second.is_sequence());
  EXPECT_TRUE(bitwise_equal((*out)[3].second.sequence[1], in[3].second.sequence[1]));
  EXPECT_TRUE((*out)[4].second.is_none());
  // Copy-on-write: the receiver may write its tensors.
  ra.data<float>()[0] = 42.f;
  EXPECT_EQ(ra.data<float>()[0], 42.f);
}

TEST(ValueTransfer, ReusableRegionIsKeptGrownAndShrunk) {
  auto shm = SharedMemory::create("test");
  ReusableRegion reuse;
  auto send = [&](int64_t n, uint32_t seed) {
    Tensor t = random_tensor({n}, seed);
    auto p = isolate::pack_values({{"x", Value(t)}}, *shm, "input", {}, &reuse);
    EXPECT_TRUE(p.is_ok());
    EXPECT_FALSE(p->region.valid()) << "a reusable region is kept by the sender";
    auto out = receive(*shm, *p, &reuse);
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_TRUE(bitwise_equal((*out)[0].second.tensor, t));
    return reuse.id;
  };
  uint64_t first = send(1000, 1);
  EXPECT_EQ(send(500, 2), first) << "smaller values reuse the region";
  EXPECT_EQ(send(1000, 3), first);
  uint64_t grown = send(1 << 20, 4);
  EXPECT_NE(grown, first) << "larger values need a larger region";
  EXPECT_NE(send(100, 5), grown) << "a region far larger than needed is given back";
}

TEST(ValueTransfer, DeviceTensorsGoThroughTheDeviceCopy) {
  auto shm = SharedMemory::create("test");
  // A tensor the CPU cannot read: a buffer with no host pointer in a device domain.
  Domain dev{Domain::new_id(), "fake", 0, MemoryKind::kDeviceLocal};
  auto buf = std::make_shared<Buffer>(nullptr, dev, nullptr, 16);
  Tensor t(DataType::kFloat32, {4}, buf);
  NamedValues in = {{"d", Value(t)}, {"h", Value(random_tensor({3}, 1))}};
  auto refused = isolate::pack_values(in, *shm, "output");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("output 'd'"), std::string::npos) << refused.status().message();
  int copies = 0;
  isolate::DeviceCopy copy = [&](const Tensor& src, const Tensor& dst) {
    ++copies;
    EXPECT_EQ(src.buffer(), buf);
    for (int i = 0; i < 4; ++i) dst.data<float>()[i] = 10.f + i;
    return Status::ok();
  };
  auto p = isolate::pack_values(in, *shm, "output", copy);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(copies, 1);
  auto out = receive(*shm, *p);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].second.tensor.data<float>()[3], 13.f);
  EXPECT_TRUE(bitwise_equal((*out)[1].second.tensor, in[1].second.tensor));
}

TEST(ValueTransfer, DescriptorsOutsideTheRegionAreRejected) {
  auto shm = SharedMemory::create("test");
  auto p = isolate::pack_values({{"x", Value(random_tensor({16}, 1))}}, *shm, "output");
  ASSERT_TRUE(p.is_ok());
  auto region = shm->map(std::move(p->region), p->region_bytes, "test");
  ASSERT_TRUE(region.is_ok());
  auto descriptor = [](int32_t dtype, Shape shape, uint64_t off, uint64_t n) {
    isolate::Writer w;
    w.u32(1);
    w.str("x");
    w.u8(static_cast<uint8_t>(Value::Kind::kTensor));
    w.u8(0);
    w.i32(0);
    w.u32(1);
    w.i32(dtype);
    w.i64s(shape);
    w.u64(off);
    w.u64(n);
    return w.take();
  };
  const uint64_t size = p->region_bytes;
  EXPECT_TRUE(isolate::unpack_values(descriptor(1, {16}, 0, 64), *region, size, "output").is_ok());
  struct Case {
    int32_t dtype;
    Shape shape;
    uint64_t off, n;
  };
  for (const Case& c : std::vector<Case>{{1, {16}, 64, 64},            // past the end
                                         {1, {16}, 0, 60},             // size does not match the shape
                                         {1, {1 << 30}, 0, uint64_t{4} << 30},  // larger than the region
                                         {1, {-1}, 0, 0},              // negative dimension
                                         {1, {16}, 8, 64},             // misaligned
                                         {99, {16}, 0, 64},            // unknown type
                                         {1, {int64_t{1} << 40, int64_t{1} << 40}, 0, 0}}) {  // overflows
    auto r = isolate::unpack_values(descriptor(c.dtype, c.shape, c.off, c.n), *region, size, "output");
    EXPECT_FALSE(r.is_ok()) << shape_to_string(c.shape) << " at " << c.off;
  }
  std::string good = descriptor(1, {16}, 0, 64);
  for (size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_FALSE(isolate::unpack_values(good.substr(0, cut), *region, size, "output").is_ok()) << cut;
}

TEST(ValueTransfer, UnsealedRegionsAreRefused) {
  auto shm = SharedMemory::create("test");
  auto fd = SharedMemory::create_region(4096);
  ASSERT_TRUE(fd.is_ok());
  auto r = shm->map(std::move(fd).value(), 64, "outputs");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not sealed"), std::string::npos);
}

TEST(Channel, LargePayloadsAndDescriptorsArrive) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  isolate::Channel a{isolate::UniqueFd(sv[0])}, b{isolate::UniqueFd(sv[1])};
  std::string big(isolate::Channel::kInlineBytes * 3 + 5, 'q');
  big[100] = 'x';
  auto fd = SharedMemory::create_region(10);
  ASSERT_TRUE(fd.is_ok());
  ASSERT_TRUE(a.send(7, 99, big, {fd->get()}, 1000).is_ok());
  isolate::Message m;
  std::string error;
  ASSERT_EQ(b.recv(m, 1000, &error), isolate::RecvState::kOk) << error;
  EXPECT_EQ(m.type, 7u);
  EXPECT_EQ(m.id, 99u);
  EXPECT_EQ(m.payload, big);
  ASSERT_EQ(m.fds.size(), 1u);
  EXPECT_TRUE(m.fds[0].valid());
  EXPECT_EQ(b.recv(m, 50, &error), isolate::RecvState::kTimeout);
  EXPECT_FALSE(b.peer_closed());
  { isolate::Channel gone = std::move(a); }
  EXPECT_TRUE(b.peer_closed());
  EXPECT_EQ(b.recv(m, 1000, &error), isolate::RecvState::kClosed);
  bool closed = false;
  EXPECT_FALSE(b.send(1, 1, "x", {}, 1000, &closed).is_ok());
  EXPECT_TRUE(closed);
}

}  // namespace
}  // namespace bulkhead::test
