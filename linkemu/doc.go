// Package linkemu emulates a network link in user space: a TCP proxy that delays, paces
// and throttles the bytes between clients and one target, so playhead can be measured on
// a 200 ms, 30 MB/s link without kernel netem (which needs root and a network namespace).
//
// Package kernlink is the kernel-shaped counterpart: real TCP end to end over a delayed,
// tbf-shaped path, at the price of root.
//
// # Model
//
// Each direction of the link is a serial transmitter of Options.Bandwidth bytes/s shared
// by every connection, followed by a one-way delay of RTT/2. A chunk (at most 64 KiB, and
// at most about 2 ms of the link, since its first byte arrives with its last) the
// proxy reads from a sender at t leaves when the transmitter is free and has sent it
// (size/Bandwidth; PerConnBandwidth additionally paces each connection), and is written
// to the receiver one-way delay later. A new connection is charged HandshakeRTTs round
// trips before its first byte flows: the client's connect returns at once against the
// local listener, so the proxy waits before dialling the target instead. Time to first
// byte of an HTTP GET is therefore one RTT on a reused connection and two on a new one.
//
// # Backpressure
//
// Per connection and direction, bytes read but not yet delivered are bounded by the
// one-way bandwidth-delay product (the bytes on the wire in this model) plus 256 KiB, at
// least 1 MiB: enough to run at full rate, with a queue of at most the slack, so one
// saturating stream adds milliseconds, not RTT/2, to the first byte of its neighbours. When the receiver stops reading,
// delivery blocks, the window fills, the proxy stops reading, and TCP flow control stops
// the sender, as on a real link. While emulating, the proxy also shrinks its sockets'
// kernel buffers: loopback autotuning would otherwise hide several MB between the window
// and the endpoints.
//
// # Faults
//
// SetFault breaks new connections the way toxiproxy's toxics do (reset_peer, timeout,
// limit_data, slicer, slow_close; see faults.go), so reliability tests get faults and
// the shared link from one proxy.
//
// # Traps
//
//   - Everything runs on the real clock (a proxy cannot do otherwise): tests use short
//     RTTs and small bodies, and tolerances that allow for a loaded machine.
//   - Timer wake-ups are late by up to a millisecond or so; delays are never early, so a
//     measured round trip is at least RTT.
//   - The "loopback" profile still proxies (one extra copy); benchmarks that want the bare
//     origin should dial it directly.
//   - HTTP clients keep idle connections (Go: MaxIdleConnsPerHost = 2 by default); a
//     benchmark that sees Stats().Accepted grow is paying the handshake again.
//
// # Why not toxiproxy
//
// toxiproxy's bandwidth toxic keeps its pacing state per connection (a stub per link
// direction), so N connections get N times the rate: it models an object store's
// per-GET throttle but not a long-distance link whose capacity all streams share, which
// is the case that decides whether splitting a download helps. It also has no charge for
// a new connection. Both are a few dozen lines here, without a control server.
package linkemu
