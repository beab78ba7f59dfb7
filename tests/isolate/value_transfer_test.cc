// The shared-memory hand-off of process isolation, within one process: values packed
// into a region and unpacked from its mapping come back equal and as views (no copy);
// a reusable region is kept, grown and shrunk; tensors in device memory go through the
// device copy; descriptors that point outside the region are rejected, never followed;
// output regions are reused only once released (OutputRegions).
#include "isolate/channel.h"
#include "isolate/output_regions.h"
#include "isolate/protocol.h"
#include "isolate/shared_memory.h"
#include "isolate/value_transfer.h"
#include "isolate/wire.h"
#include "support/test_util.h"

#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace bulkhead::test {
namespace {

using isolate::PackedValues;
using isolate::ReusableRegion;
using isolate::SharedMemory;

// A new region for every message.
isolate::RegionSource fresh(SharedMemory& shm) {
  return [&shm](uint64_t n) { return shm.allocate(n); };
}

// Maps what the sender packed, as the receiving side does: its own mapping of the region.
Result<NamedValues> receive(SharedMemory& shm, const PackedValues& p, bool writable = false) {
  std::shared_ptr<Buffer> region;
  if (p.region_bytes) {
    isolate::UniqueFd fd(dup(SharedMemory::fd_of(*p.region)));
    if (writable) {
      BH_ASSIGN_OR_RETURN(region, shm.map_shared(std::move(fd), p.region_bytes, "test"));
    } else {
      BH_ASSIGN_OR_RETURN(region, shm.map_readonly(std::move(fd), p.region_bytes, "test"));
    }
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
  auto p = isolate::pack_values(in, fresh(*shm), "input");
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_TRUE(p->region);
  auto out = receive(*shm, *p, /*writable=*/true);
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
  EXPECT_NE(ra.raw(), p->region->data()) << "the receiver has its own mapping";
  // A shared writable mapping: the receiver may write its tensors.
  ra.data<float>()[0] = 42.f;
  EXPECT_EQ(ra.data<float>()[0], 42.f);
}

TEST(ValueTransfer, TensorsAlreadyInTheRegionAreDescribedWhereTheyAre) {
  auto shm = SharedMemory::create("test");
  auto region = shm->allocate(1 << 16);
  ASSERT_TRUE(region.is_ok());
  char* base = static_cast<char*>((*region)->data());
  // Three tensors a run wrote into the region (the last one misaligned), one elsewhere,
  // and one viewing the same bytes as the first.
  auto in_region = [&](uint64_t off, const Tensor& like) {
    Tensor t(like.dtype(), like.shape(), *region, off);
    std::memcpy(t.raw(), like.raw(), like.nbytes());
    return t;
  };
  Tensor a = random_tensor({64}, 1), b = random_tensor({32}, 2), c = random_tensor({8}, 3), d = random_tensor({16}, 4);
  Tensor ta = in_region(0, a), tb = in_region(1024, b), tc = in_region(2052, c);
  NamedValues vals = {{"a", Value(ta)}, {"b", Value(tb)}, {"c", Value(tc)}, {"d", Value(d)}, {"a2", Value(ta)}};
  isolate::InPlace ip{base, 4096};
  auto same = [&](uint64_t n) -> Result<std::shared_ptr<Buffer>> {
    EXPECT_LE(n, (*region)->size());
    return *region;
  };
  auto p = isolate::pack_values(vals, same, "output", {}, ip);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  // a and b stay; c (misaligned), d (elsewhere) and a2 (a's bytes again) are copied after.
  EXPECT_EQ(p->copied_bytes, c.nbytes() + d.nbytes() + a.nbytes());
  EXPECT_GE(p->region_bytes, 4096u);
  auto out = receive(*shm, *p);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const Tensor* want[] = {&a, &b, &c, &d, &a};
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(bitwise_equal((*out)[i].second.tensor, *want[i])) << i;
  EXPECT_NE((*out)[0].second.tensor.raw(), (*out)[4].second.tensor.raw()) << "no two outputs share bytes";

  // The source gives another region: everything is copied, from its start.
  auto other = [&](uint64_t n) { return shm->allocate(n); };
  auto q = isolate::pack_values(vals, other, "output", {}, ip);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(q->copied_bytes, 2 * a.nbytes() + b.nbytes() + c.nbytes() + d.nbytes());
  auto out2 = receive(*shm, *q);
  ASSERT_TRUE(out2.is_ok());
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(bitwise_equal((*out2)[i].second.tensor, *want[i])) << i;
}

TEST(ValueTransfer, ReusableRegionIsKeptGrownAndShrunk) {
  auto shm = SharedMemory::create("test");
  ReusableRegion reuse;
  auto send = [&](int64_t n, uint32_t seed) {
    Tensor t = random_tensor({n}, seed);
    auto p = isolate::pack_values({{"x", Value(t)}}, [&](uint64_t n) { return reuse.get(*shm, n); }, "input");
    EXPECT_TRUE(p.is_ok());
    EXPECT_EQ(p->region, reuse.mapping) << "a reusable region is kept by the sender";
    auto out = receive(*shm, *p);
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
  auto refused = isolate::pack_values(in, fresh(*shm), "output");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("output 'd'"), std::string::npos) << refused.status().message();
  int copies = 0;
  isolate::DeviceCopy copy = [&](const Tensor& src, const Tensor& dst) {
    ++copies;
    EXPECT_EQ(src.buffer(), buf);
    for (int i = 0; i < 4; ++i) dst.data<float>()[i] = 10.f + i;
    return Status::ok();
  };
  auto p = isolate::pack_values(in, fresh(*shm), "output", copy);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(copies, 1);
  auto out = receive(*shm, *p);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].second.tensor.data<float>()[3], 13.f);
  EXPECT_TRUE(bitwise_equal((*out)[1].second.tensor, in[1].second.tensor));
}

TEST(ValueTransfer, DescriptorsOutsideTheRegionAreRejected) {
  auto shm = SharedMemory::create("test");
  auto p = isolate::pack_values({{"x", Value(random_tensor({16}, 1))}}, fresh(*shm), "output");
  ASSERT_TRUE(p.is_ok());
  auto region = shm->map_readonly(isolate::UniqueFd(dup(SharedMemory::fd_of(*p->region))), p->region_bytes, "test");
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
    w.u32(0);  // in the message's own region
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

TEST(ValueTransfer, TensorsInALentRegionAreDescribedWhereTheyAre) {
  // A tensor wholly inside a region the receiver maps (lent) is not copied; one that
  // only starts there, or sits misaligned, is.
  auto shm = SharedMemory::create("test");
  auto lent = shm->allocate(8192);
  ASSERT_TRUE(lent.is_ok());
  Tensor src = random_tensor({16}, 1);
  std::memcpy(static_cast<char*>((*lent)->data()) + 128, src.raw(), src.nbytes());
  Tensor inside(DataType::kFloat32, {16}, *lent, 128);
  Tensor straddling(DataType::kFloat32, {16}, *lent, 8192 - 32);
  Tensor misaligned(DataType::kFloat32, {4}, *lent, 132);
  Tensor elsewhere = random_tensor({8}, 2);
  NamedValues in = {{"a", Value(inside)}, {"b", Value(elsewhere)}, {"c", Value(misaligned)}};
  std::vector<isolate::LentSpan> spans = {{static_cast<const char*>((*lent)->data()), 8192}};
  auto p = isolate::pack_values(in, fresh(*shm), "input", {}, {}, spans);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->copied_bytes, 8 * 4 + 4 * 4u);
  // The receiver's own read-only mapping of the lent region, in the same order.
  auto theirs = shm->map_readonly(isolate::UniqueFd(dup(SharedMemory::fd_of(**lent))), 8192, "lent");
  ASSERT_TRUE(theirs.is_ok());
  std::shared_ptr<Buffer> region;
  if (p->region_bytes) {
    auto r = shm->map_readonly(isolate::UniqueFd(dup(SharedMemory::fd_of(*p->region))), p->region_bytes, "test");
    ASSERT_TRUE(r.is_ok());
    region = *r;
  }
  auto out = isolate::unpack_values(p->descriptors, region, p->region_bytes, "input", {*theirs});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].second.tensor.buffer(), *theirs);
  EXPECT_EQ((*out)[0].second.tensor.offset(), 128u);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(bitwise_equal(in[i].second.tensor, (*out)[i].second.tensor)) << i;
  // Without the lent mapping the descriptors name a region that was not lent.
  auto missing = isolate::unpack_values(p->descriptors, region, p->region_bytes, "input");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("not lent"), std::string::npos) << missing.status().message();
  // Too short a lent mapping: the tensor lies outside it.
  auto small = std::make_shared<Buffer>(nullptr, Domain::host(), (*theirs)->data(), 160);
  EXPECT_FALSE(isolate::unpack_values(p->descriptors, region, p->region_bytes, "input", {small}).is_ok());
  NamedValues cross = {{"s", Value(straddling)}};
  auto q = isolate::pack_values(cross, fresh(*shm), "input", {}, {}, spans);
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(q->copied_bytes, 64u);
}

TEST(ValueTransfer, AReadOnlyReopenedRegionCannotBeMappedWritable) {
  auto shm = SharedMemory::create("test");
  auto region = shm->allocate(4096);
  ASSERT_TRUE(region.is_ok());
  auto ro = SharedMemory::reopen_readonly(SharedMemory::fd_of(**region));
  ASSERT_TRUE(ro.is_ok()) << ro.status().to_string();
  void* w = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro->get(), 0);
  EXPECT_EQ(w, MAP_FAILED);
  if (w != MAP_FAILED) munmap(w, 4096);
  static_cast<char*>((*region)->data())[5] = 42;
  auto mapped = shm->map_readonly(std::move(ro).value(), 4096, "lent");
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  EXPECT_EQ(static_cast<const char*>((*mapped)->data())[5], 42);
}

TEST(ValueTransfer, UnsealedRegionsAreRefused) {
  auto shm = SharedMemory::create("test");
  auto fd = SharedMemory::create_region(4096);
  ASSERT_TRUE(fd.is_ok());
  auto r = shm->map(std::move(fd).value(), 64, "outputs");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not sealed"), std::string::npos);
}

// The supervisor's output regions: a region is offered to a run only when no lease of
// it is held; the worker's new regions are mapped once; free regions are bounded; a
// fresh worker's runs never get the old worker's regions.
struct WorkerSide {
  std::shared_ptr<SharedMemory> shm = SharedMemory::create("worker");
  std::vector<std::shared_ptr<Buffer>> regions;  // index = id - 1
  // A new region as the worker makes it: its id and a descriptor to send.
  std::pair<uint64_t, isolate::UniqueFd> make(size_t bytes, char fill) {
    auto r = shm->allocate(bytes);
    EXPECT_TRUE(r.is_ok());
    std::memset((*r)->data(), fill, bytes);
    regions.push_back(*r);
    return {regions.size(), isolate::UniqueFd(dup(SharedMemory::fd_of(**r)))};
  }
};

TEST(OutputRegions, ReusedOnlyAfterEveryLeaseIsReleased) {
  auto shm = SharedMemory::create("test");
  auto pool = isolate::OutputRegions::create(shm);
  WorkerSide worker;
  EXPECT_EQ(pool->offer(4096), 0u) << "nothing to offer yet";
  auto [id1, fd1] = worker.make(4096, 'a');
  auto lease1 = pool->take(id1, std::move(fd1), 4096, "test");
  ASSERT_TRUE(lease1.is_ok()) << lease1.status().to_string();
  EXPECT_EQ(static_cast<const char*>((*lease1)->data())[100], 'a');
  EXPECT_EQ((*lease1)->allocator(), pool.get()) << "a lease records who made it (I1)";
  EXPECT_EQ(pool->offer(4096), 0u) << "region 1 is still viewed by the caller";
  pool->withdraw();
  void* where = (*lease1)->data();
  lease1->reset();
  EXPECT_EQ(pool->free_regions(), 1u);
  EXPECT_EQ(pool->offer(4096), id1) << "released: offered again";
  std::memset(worker.regions[0]->data(), 'b', 4096);  // the worker writes the run's outputs
  auto again = pool->take(id1, isolate::UniqueFd(), 4096, "test");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ((*again)->data(), where) << "the same mapping, no new one";
  EXPECT_EQ(static_cast<const char*>((*again)->data())[100], 'b');
  EXPECT_EQ(pool->mapped(), 1u);
}

TEST(OutputRegions, TooSmallOfferIsFreedAndTheNewRegionMapped) {
  auto shm = SharedMemory::create("test");
  auto pool = isolate::OutputRegions::create(shm);
  WorkerSide worker;
  auto [id1, fd1] = worker.make(4096, 'a');
  pool->take(id1, std::move(fd1), 4096, "test").value().reset();
  EXPECT_EQ(pool->offer(100), id1);
  auto [id2, fd2] = worker.make(1 << 16, 'c');  // the outputs did not fit
  auto lease = pool->take(id2, std::move(fd2), 1 << 16, "test");
  ASSERT_TRUE(lease.is_ok());
  EXPECT_EQ(pool->free_regions(), 1u) << "the unused offer is free again";
  EXPECT_EQ(pool->offer(1 << 16), 0u) << "region 1 is too small for these outputs";
  pool->withdraw();
}

TEST(OutputRegions, ProtocolViolationsAreErrors) {
  auto shm = SharedMemory::create("test");
  auto pool = isolate::OutputRegions::create(shm);
  WorkerSide worker;
  auto [id1, fd1] = worker.make(4096, 'a');
  auto lease = pool->take(id1, std::move(fd1), 4096, "test");
  ASSERT_TRUE(lease.is_ok());
  auto unoffered = pool->take(id1, isolate::UniqueFd(), 64, "outputs");
  ASSERT_FALSE(unoffered.is_ok());
  EXPECT_NE(unoffered.status().message().find("not offered"), std::string::npos) << unoffered.status().message();
  auto dup_fd = isolate::UniqueFd(dup(SharedMemory::fd_of(*worker.regions[0])));
  auto twice = pool->take(id1, std::move(dup_fd), 64, "outputs");
  ASSERT_FALSE(twice.is_ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos) << twice.status().message();
  auto [id2, fd2] = worker.make(4096, 'a');
  auto short_region = pool->take(id2, std::move(fd2), 8192, "outputs");
  EXPECT_FALSE(short_region.is_ok()) << "a region smaller than its outputs";
}

TEST(OutputRegions, FreeRegionsAreBoundedAndForgottenOnBothSides) {
  auto shm = SharedMemory::create("test");
  auto pool = isolate::OutputRegions::create(shm);
  WorkerSide worker;
  std::vector<std::shared_ptr<Buffer>> held;
  for (int i = 0; i < 5; ++i) {  // five runs whose outputs are all still held
    auto [id, fd] = worker.make(4096 * (i + 1), 'a');
    held.push_back(pool->take(id, std::move(fd), 4096, "test").value());
  }
  EXPECT_EQ(pool->mapped(), 5u);
  held.clear();
  EXPECT_EQ(pool->free_regions(), 2u) << "at most two free regions stay mapped";
  auto forgotten = pool->forgotten();
  std::sort(forgotten.begin(), forgotten.end());
  EXPECT_EQ(forgotten, (std::vector<uint64_t>{1, 2, 3})) << "the smallest go, and the worker is told";
  EXPECT_TRUE(pool->forgotten().empty());
  // A region far larger than the outputs now asked for is not kept either.
  auto [big, fd] = worker.make(8 << 20, 'z');
  pool->take(big, std::move(fd), 8 << 20, "test").value().reset();
  EXPECT_EQ(pool->offer(4096), 5u) << "(4 went when the 8 MiB one made three free) the smallest that fits";
  pool->withdraw();
  auto gone = pool->forgotten();
  EXPECT_NE(std::find(gone.begin(), gone.end(), big), gone.end()) << "8 MiB kept for 4 KiB outputs";
}

TEST(OutputRegions, AFreshWorkerNeverGetsTheOldWorkersRegions) {
  auto shm = SharedMemory::create("test");
  auto pool = isolate::OutputRegions::create(shm);
  WorkerSide old_worker, new_worker;
  auto [a, fa] = old_worker.make(4096, 'a');
  auto [b, fb] = old_worker.make(4096, 'b');
  auto held = pool->take(a, std::move(fa), 4096, "test").value();
  pool->take(b, std::move(fb), 4096, "test").value().reset();
  pool->new_worker();
  EXPECT_EQ(pool->mapped(), 1u) << "the free region of the old worker is unmapped";
  EXPECT_TRUE(pool->forgotten().empty()) << "nobody to tell";
  EXPECT_EQ(pool->offer(64), 0u);
  pool->withdraw();
  // The new worker numbers its regions from 1 again: no clash with the held lease.
  auto [c, fc] = new_worker.make(4096, 'c');
  EXPECT_EQ(c, a);
  auto fresh_lease = pool->take(c, std::move(fc), 4096, "test");
  ASSERT_TRUE(fresh_lease.is_ok()) << fresh_lease.status().to_string();
  EXPECT_EQ(static_cast<const char*>(held->data())[0], 'a') << "the old lease still reads its outputs";
  held.reset();
  EXPECT_EQ(pool->mapped(), 1u) << "released after the worker changed: unmapped, not reused";
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

namespace bulkhead::isolate {
namespace {

// Raw records a broken or hostile peer could send are errors, never a crash (found by
// fuzz/protocol_fuzz.cc: a descriptor count of 2^32 - 1 with the payload-in-memfd flag
// wrapped to 0 descriptors expected, and the receiver took one from an empty list).
TEST(Channel, MalformedRecordsAreErrors) {
  struct Record {
    const char* what;
    std::string bytes;
  };
  auto header = [](uint32_t magic, uint32_t flags, uint32_t nfds, uint64_t payload) {
    std::string h(32, '\0');
    std::memcpy(&h[0], &magic, 4);
    std::memcpy(&h[16], &flags, 4);
    std::memcpy(&h[20], &nfds, 4);
    std::memcpy(&h[24], &payload, 8);
    return h;
  };
  const Record records[] = {
      {"count that wraps", header(0x314b4842, 1, 0xffffffffu, 16)},
      {"more descriptors than allowed", header(0x314b4842, 0, 9, 0)},
      {"descriptors announced, none sent", header(0x314b4842, 0, 2, 0)},
      {"payload in a memfd that is not there", header(0x314b4842, 1, 0, 1 << 20)},
      {"bad magic", header(0x12345678, 0, 0, 0)},
      {"too short", std::string(5, 'x')},
  };
  for (const auto& r : records) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    Channel rx{UniqueFd(sv[0])};
    ASSERT_EQ(::send(sv[1], r.bytes.data(), r.bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(r.bytes.size())) << r.what;
    ::close(sv[1]);
    Message m;
    std::string err;
    EXPECT_EQ(rx.recv(m, 1000, &err), RecvState::kError) << r.what;
    EXPECT_FALSE(err.empty()) << r.what;
  }
}

TEST(Protocol, RunReplyCarriesTheWorkersTimeAndRejectsAnImpossibleOne) {
  RunReply a;
  a.region_bytes = 64;
  a.region_id = 3;
  a.profile = {{"n", "Relu", 0.5, "float32[1] -> float32[1]"}};
  a.handled_ms = 12.25;
  auto b = decode_run_reply(encode(a));
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(b->handled_ms, 12.25);
  ASSERT_EQ(b->profile.size(), 1u);
  EXPECT_EQ(b->profile[0].op_type, "Relu");
  for (double bad : {-1.0, std::nan(""), 1e300}) {
    a.handled_ms = bad;
    auto c = decode_run_reply(encode(a));
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.status().message().find("malformed run reply"), std::string::npos) << c.status().message();
  }
  // A reply of the previous protocol (no time at its end) is malformed too.
  a.handled_ms = 0;
  std::string old = encode(a);
  old.resize(old.size() - 8);
  EXPECT_FALSE(decode_run_reply(old).is_ok());
}

}  // namespace
}  // namespace bulkhead::isolate
