// Package kernlink builds a kernel-shaped link: the origin's side lives in a network
// namespace, and its packets reach the host's side through two TUN devices that this
// process joins, holding every packet RTT/2 before it writes it out. The kernel enforces
// the bandwidth (a tbf qdisc on each TUN's egress), so TCP's own congestion control
// (slow start, cwnd, losses at the tbf queue, fairness between connections) decides how
// connections share the link, end to end, over the real round trip.
//
// # Model
//
//	host: client ── hostIf (tbf) ──► this process: RTT/2 ──► nsIf ── netns: server
//	host: client ◄── hostIf ◄── RTT/2: this process ◄── (tbf) nsIf ── netns: server
//
// Each direction is a FIFO delay line: a packet read from one TUN at t is written to the
// other at t + RTT/2 (constant delay keeps the order, so one queue per direction is
// enough). Bandwidth is tbf's rate on the sending TUN's egress: packets beyond its
// queue (Latency at the rate) are dropped there, as a router's full buffer would. The
// per-connection cap (an object store's throttle on each GET) is not the kernel's: tbf
// shapes a device, not a flow, and this kernel has no fq qdisc; the bench puts a
// linkemu relay with PerConnBandwidth in the namespace instead (see Options).
//
// # Traps
//
//   - It needs root, /dev/net/tun and the tbf qdisc; Start says which one is missing.
//     netem is not used (many kernels, including the bench machine's, lack it).
//   - The namespace and its devices are named after the process id, so two runs never
//     collide; Start first deletes namespaces left by processes that no longer exist.
//     The TUN devices vanish with their file descriptors; the namespace is deleted by
//     Close, and by the next Start if this process died first.
//   - The delay lines are in this process: a busy CPU adds delay (never removes it). At
//     MTU 1500, 30 MB/s is about 20,000 packets a second each way.
//   - Sockets are created in the namespace by Listen (setns on a locked thread, then
//     back); a socket keeps its namespace whichever thread uses it later.
package kernlink
