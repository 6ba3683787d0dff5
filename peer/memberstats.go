package peer

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Member states of MemberStat.State. Gossip reports the first three (memberlist keeps
// its suspicion of a member to itself); a static list (--peers) knows nothing of
// liveness, so its members are StateStatic (MemberStat.DownUntil says whether the read
// path is passing one over).
const (
	StateAlive  = "alive"
	StateDead   = "dead" // failed by memberlist's detection: no longer a member
	StateLeft   = "left" // said it was leaving: no longer a member
	StateStatic = "static"
	StateGone   = "gone" // no longer in the membership, nor remembered by it; its counters remain
)

// MemberState is a member and its state as the membership sees it.
type MemberState struct {
	Member
	State string
}

// StateReporter is a Membership that knows each member's state, and remembers the
// members that died or left. Gossip implements it; without it every member is static.
type StateReporter interface {
	MemberStates() []MemberState
}

// Bypass reasons, the keys of MemberStat.Bypassed.
const (
	BypassHedged         = "hedged"
	BypassNotThisVersion = "not-this-version"
	BypassRefused        = "refused"
	BypassError          = "error"
	BypassDown           = "down"
)

// MemberStat is what this node did with one member, as MemberStats reports it.
type MemberStat struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	State string `json:"state"`
	Self  bool   `json:"self,omitempty"` // this node: its counters are zero, its bytes are the origin's
	// Runs and Bytes read from the member.
	Runs  int64 `json:"runs"`
	Bytes int64 `json:"bytes"`
	// Failures of requests to it (connect error, 5xx, cut, hedged): each marked it down.
	Failures int64 `json:"failures"`
	// Bypassed counts its runs read from the origin instead, by reason (Bypass*).
	Bypassed map[string]int64 `json:"bypassed,omitempty"`
	// DownUntil is when its backoff ends; zero while it is up.
	DownUntil time.Time `json:"down_until,omitzero"`
}

// memberCounters are the live counters of one member.
type memberCounters struct {
	runs, bytes, failures atomic.Int64
	bypassed              [len(bypassReasons)]atomic.Int64
}

// bypassReasons are the keys of memberCounters.bypassed, in its order.
var bypassReasons = [...]string{BypassHedged, BypassNotThisVersion, BypassRefused, BypassError, BypassDown}

// bypassReason is the index in bypassReasons of why err sent a peer run to the origin.
func bypassReason(err error) int {
	switch {
	case errors.Is(err, errHedged):
		return 0
	case errors.Is(err, errNotThisVersion):
		return 1
	case errors.Is(err, errRefused):
		return 2
	case errors.Is(err, errDown):
		return 4
	}
	return 3
}

// memberTable holds the counters of every member ever asked, by name. Names are
// bounded by the cluster's members: the counters of one that left are kept, so that
// what it served is still reported. Safe for concurrent use.
type memberTable struct {
	mu sync.Mutex
	by map[string]*memberCounters // guarded by mu
}

func (t *memberTable) get(name string) *memberCounters {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]*memberCounters{}
	}
	c := t.by[name]
	if c == nil {
		c = &memberCounters{}
		t.by[name] = c
	}
	return c
}

func (t *memberTable) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.by))
	for n := range t.by {
		out = append(out, n)
	}
	return out
}

// member returns the counters of member name.
func (s *Source) member(name string) *memberCounters { return s.byMember.get(name) }

// memberFailed records a failed request to name and marks it down.
func (s *Source) memberFailed(name string) {
	s.health.failed(name)
	s.member(name).failures.Add(1)
}

// MemberStats reports every member of the membership (with its state, when the
// membership is a StateReporter), this node's own row first, then the others by name;
// members that are gone but were asked once follow with StateGone.
func (s *Source) MemberStats() []MemberStat {
	var states []MemberState
	if r, ok := s.opts.Members.(StateReporter); ok {
		states = r.MemberStates()
	} else {
		ms, _ := s.opts.Members.Members()
		for _, m := range ms {
			states = append(states, MemberState{Member: m, State: StateStatic})
		}
	}
	seen := map[string]bool{}
	var out []MemberStat
	for _, st := range states {
		if seen[st.Name] {
			continue
		}
		seen[st.Name] = true
		out = append(out, s.memberStat(st))
	}
	for _, name := range s.byMember.names() {
		if !seen[name] {
			out = append(out, s.memberStat(MemberState{Member: Member{Name: name}, State: StateGone}))
		}
	}
	slices.SortFunc(out, func(a, b MemberStat) int {
		if a.Self != b.Self {
			if a.Self {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (s *Source) memberStat(st MemberState) MemberStat {
	c := s.member(st.Name)
	m := MemberStat{Name: st.Name, Addr: st.Addr, State: st.State, Self: st.Name == s.opts.Self,
		Runs: c.runs.Load(), Bytes: c.bytes.Load(), Failures: c.failures.Load(),
		DownUntil: s.health.downUntil(st.Name)}
	for i, reason := range bypassReasons {
		if n := c.bypassed[i].Load(); n > 0 {
			if m.Bypassed == nil {
				m.Bypassed = map[string]int64{}
			}
			m.Bypassed[reason] = n
		}
	}
	return m
}
