// Channel: one end of the Unix socketpair (SOCK_SEQPACKET) between a supervisor and its
// worker process. A message is one record: a header (type, run id), a payload, and up to
// kMaxFds file descriptors passed with SCM_RIGHTS. A payload larger than kInlineBytes
// travels in a sealed memfd, so records stay small whatever the message.
//
// Every wait has a deadline: send and receive take a timeout in milliseconds (-1 =
// wait for ever, which only the worker uses, for its next request). Writing to a peer
// that has gone never raises SIGPIPE.
//
// Ownership: the Channel owns its socket. Received descriptors belong to the Message.
// Thread-compatible: one sender and one receiver at a time (callers serialise).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bulkhead/status.h"
#include "isolate/shared_memory.h"
#include "isolate/unique_fd.h"

namespace bulkhead::isolate {

struct Message {
  uint32_t type = 0;
  uint64_t id = 0;  // the run a request or reply belongs to (0 for load)
  std::string payload;
  std::vector<UniqueFd> fds;
};

enum class RecvState {
  kOk,
  kTimeout,  // nothing arrived before the deadline
  kClosed,   // the peer closed its end (it exited or was killed)
  kError,    // a malformed record or a socket error; `error` says which
};

class Channel {
 public:
  static constexpr size_t kInlineBytes = 48 * 1024;
  static constexpr int kMaxFds = 4;

  explicit Channel(UniqueFd socket);
  int fd() const { return socket_.get(); }

  // Sends one message; `fds` are lent (the receiver gets duplicates). kUnavailable when
  // the peer has closed its end, with `peer_closed` set.
  Status send(uint32_t type, uint64_t id, const std::string& payload, const std::vector<int>& fds, int timeout_ms,
              bool* peer_closed = nullptr);
  // Waits up to `timeout_ms` for one message.
  RecvState recv(Message& m, int timeout_ms, std::string* error);
  // True when the peer has closed its end; never blocks.
  bool peer_closed() const;

 private:
  UniqueFd socket_;
  std::vector<char> recv_buf_;
  std::shared_ptr<SharedMemory> shm_ = SharedMemory::create("channel");
};

}  // namespace bulkhead::isolate
