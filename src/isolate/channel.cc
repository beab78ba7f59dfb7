#include "isolate/channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace bulkhead::isolate {
namespace {

constexpr uint32_t kMagic = 0x314b4842;  // "BHK1"
constexpr uint32_t kPayloadInFd = 1;

struct Header {
  uint32_t magic;
  uint32_t type;
  uint64_t id;
  uint32_t flags;
  uint32_t nfds;          // descriptors that belong to the message (payload fd excluded)
  uint64_t payload_size;  // bytes in the payload memfd when kPayloadInFd
};

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline` (-1 = none), for poll().
int remaining_ms(bool forever, Clock::time_point deadline) {
  if (forever) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on `fd`; false on timeout. Errors other than EINTR count as ready
// (the following call reports them).
bool wait_for(int fd, short events, int timeout_ms) {
  const bool forever = timeout_ms < 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms);
  for (;;) {
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, remaining_ms(forever, deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;
  }
}

}  // namespace

Channel::Channel(UniqueFd socket) : socket_(std::move(socket)) {}

Status Channel::send(uint32_t type, uint64_t id, const std::string& payload, const std::vector<int>& fds,
                     int timeout_ms, bool* peer_closed) {
  if (peer_closed) *peer_closed = false;
  if (fds.size() + 1 > kMaxFds) return internal_error("too many descriptors in one message");
  Header h{kMagic, type, id, 0, static_cast<uint32_t>(fds.size()), 0};
  std::vector<int> all = fds;
  UniqueFd payload_fd;
  if (payload.size() > kInlineBytes) {
    BH_ASSIGN_OR_RETURN(payload_fd, SharedMemory::create_region(payload.size()));
    BH_RETURN_IF_ERROR(SharedMemory::write(payload_fd.get(), 0, payload.data(), payload.size()));
    BH_RETURN_IF_ERROR(SharedMemory::seal(payload_fd.get()));
    h.flags |= kPayloadInFd;
    h.payload_size = payload.size();
    all.push_back(payload_fd.get());
  }
  iovec iov[2];
  iov[0] = {&h, sizeof h};
  iov[1] = {const_cast<char*>(payload.data()), (h.flags & kPayloadInFd) ? 0 : payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  if (!all.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * all.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * all.size());
    std::memcpy(CMSG_DATA(c), all.data(), sizeof(int) * all.size());
  }
  const bool forever = timeout_ms < 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms);
  for (;;) {
    ssize_t n = sendmsg(socket_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return Status::ok();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(socket_.get(), POLLOUT, remaining_ms(forever, deadline)))
        return Status(StatusCode::kUnavailable, "the peer did not take the message within " + std::to_string(timeout_ms) + " ms");
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
      if (peer_closed) *peer_closed = true;
      return Status(StatusCode::kUnavailable, "the peer has closed the connection");
    }
    return Status(StatusCode::kUnavailable, std::string("sending to the peer failed: ") + std::strerror(errno));
  }
}

RecvState Channel::recv(Message& m, int timeout_ms, std::string* error) {
  m = Message{};
  std::vector<char>& buf = recv_buf_;
  buf.resize(sizeof(Header) + kInlineBytes + 1);  // +1: a larger record shows as truncated
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  const bool forever = timeout_ms < 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms);
  for (;;) {
    if (!wait_for(socket_.get(), POLLIN, remaining_ms(forever, deadline))) return RecvState::kTimeout;
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(socket_.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno == ECONNRESET || errno == ENOTCONN) return RecvState::kClosed;
      *error = std::string("receiving from the peer failed: ") + std::strerror(errno);
      return RecvState::kError;
    }
    // Take ownership of every descriptor first, so that none leaks on a bad record.
    std::vector<UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    if (n == 0) return RecvState::kClosed;
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
      *error = "a message from the peer was truncated";
      return RecvState::kError;
    }
    Header h;
    if (static_cast<size_t>(n) < sizeof h) {
      *error = "a message from the peer is too short (" + std::to_string(n) + " bytes)";
      return RecvState::kError;
    }
    std::memcpy(&h, buf.data(), sizeof h);
    // In size_t: a count near 2^32 must not wrap to the number of descriptors received.
    const size_t want_fds = static_cast<size_t>(h.nfds) + ((h.flags & kPayloadInFd) ? 1 : 0);
    if (h.magic != kMagic || h.nfds > static_cast<uint32_t>(kMaxFds) || want_fds != fds.size()) {
      *error = h.magic != kMagic ? "a message from the peer has a bad header (is the worker the same bulkhead version?)"
                                 : "a message from the peer carries " + std::to_string(fds.size()) +
                                       " descriptors, " + std::to_string(want_fds) + " announced";
      return RecvState::kError;
    }
    m.type = h.type;
    m.id = h.id;
    if (h.flags & kPayloadInFd) {
      auto region = shm_->map(std::move(fds.back()), h.payload_size, "message payload");
      fds.pop_back();
      if (!region.is_ok()) {
        *error = region.status().message();
        return RecvState::kError;
      }
      m.payload.assign(static_cast<const char*>((*region)->data()), h.payload_size);
    } else {
      m.payload.assign(buf.data() + sizeof h, static_cast<size_t>(n) - sizeof h);
    }
    m.fds = std::move(fds);
    return RecvState::kOk;
  }
}

bool Channel::peer_closed() const {
  pollfd p{socket_.get(), POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  // Readable: a pending message, or end-of-file.
  char c;
  ssize_t n = ::recv(socket_.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && (errno == ECONNRESET || errno == ENOTCONN));
}

}  // namespace bulkhead::isolate
