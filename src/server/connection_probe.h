// Tells whether the client of a request has gone away while the handler still works on it.
// cpp-httplib 0.11 does not hand handlers their socket, so the probe finds the server-side
// socket by its (local port, peer address, peer port) and peeks at it: EOF or a hang-up means
// the client closed. Every check re-verifies the socket's identity, so a reused fd reads as closed.
#pragma once
#include <string>

namespace vireo::server {

class ConnectionProbe {
 public:
  ConnectionProbe() = default;  // an unattached probe never reports a close
  ConnectionProbe(int local_port, std::string remote_addr, int remote_port);
  bool attached() const { return fd_ >= 0; }
  bool client_closed() const;
  int fd() const { return fd_; }  // the connection's socket, -1 if not found

 private:
  bool identity_matches(int fd) const;
  int fd_ = -1;
  int local_port_ = -1;
  std::string remote_addr_;
  int remote_port_ = -1;
};

}  // namespace vireo::server
