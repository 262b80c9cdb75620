// Package auth keeps a training job's processes among themselves: a per-job
// secret generated at start (a 0600 file in the state directory) and a
// mutual challenge-response handshake over every new connection, so that a
// worker of another job, of another protocol version or without the secret
// is refused with a clear, loggable error, and the secret never travels.
//
// The handshake (Server, Client) is a mutual HMAC challenge-response (HMAC:
// RFC 2104, with SHA-256): each side sends a fresh 32-byte nonce and proves
// knowledge of the key by HMAC-SHA256 over both nonces, the job id, the
// client's role and a per-direction label; proofs are compared in constant
// time (hmac.Equal).
//
// Threat model: mistaken or stray connections, processes of other jobs and
// users, port scanners. The handshake authenticates the two ends at the
// start of a connection; it does not encrypt or integrity-protect the bytes
// that follow (as with NCCL and Gloo), so an attacker who can rewrite
// packets on the path is out of scope.
package auth
