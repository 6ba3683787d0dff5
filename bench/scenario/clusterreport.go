package scenario

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/playhead/playhead/internal/units"
)

// Targets of issue 16, printed next to the figures.
const (
	targetOriginFactor = 1.05
	targetCeilingShare = 0.9
	targetPeerRate     = 800e6 // bytes/s, loopback
	targetSeek         = 5 * time.Millisecond
)

// Print writes the figures as a table: one line a figure, with its target and whether
// it was met.
func (f ClusterFigures) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s := f.Sizes
	fmt.Fprintf(tw, "cluster: %d nodes, %d files of %s (%s), up to %d players at %s\n", s.Nodes, s.Files,
		units.FormatBytes(s.FileSize), units.FormatBytes(f.SetBytes), s.Players, rateLabel(s.Rate))
	fmt.Fprintln(tw, "phase\tfigure\tvalue\ttarget\t")
	row := func(phase, figure, value, target string, ok bool) {
		mark := ""
		if target != "" && !ok {
			mark = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", phase, figure, value, target, mark)
	}
	row("(a) all copy the set", "origin bytes / set", fmt.Sprintf("%.3f", f.OriginFactor), "<= 1.05", f.OriginFactor <= targetOriginFactor)
	row("", "bytes verified", units.FormatBytes(f.Verified), fmt.Sprintf("%d x set", s.Nodes), f.Verified == int64(s.Nodes)*f.SetBytes)
	row("", "failed copies", fmt.Sprint(f.CopyFailed), "0", f.CopyFailed == 0)
	row("", "wall time", f.CopyWall.Round(time.Millisecond).String(), "", true)
	// A step that failed, and those after it, have partial or zero figures: a zero must
	// not read as a target met, so the table ends at the first step not completed.
	incomplete := func(phase string) error {
		row(phase, "not completed", "it failed, or an earlier step did: see the error", "completed", false)
		return tw.Flush()
	}
	if f.Done < 1 {
		return incomplete("(a)")
	}
	if f.Done < 2 {
		return incomplete("(b)")
	}
	if f.PeerCopyNote != "" {
		row("(b) empty cache, from peers", "copy", f.PeerCopyNote, "", true)
	} else {
		share := f.PeerRate / f.CeilingRate
		row("(b) empty cache, from peers", "copy rate", fmt.Sprintf("%s (%d files, %s)", units.FormatRate(f.PeerRate), f.PeerFiles, units.FormatBytes(f.PeerBytes)),
			">= 800 MB/s", f.PeerRate >= targetPeerRate)
		row("", "ceiling: GET on loopback", units.FormatRate(f.CeilingRate), "", true)
		row("", "copy / ceiling", fmt.Sprintf("%.0f%%", 100*share), ">= 90%", share >= targetCeilingShare)
		// Not a target: what a mount reads here when every block is at hand.
		switch {
		case f.OwnRate > 0:
			row("", "the same copy from its own cache", fmt.Sprintf("%s (copy from peers: %.0f%% of it)", units.FormatRate(f.OwnRate), 100*f.PeerRate/f.OwnRate), "", true)
		case f.OwnNote != "":
			row("", "the same copy from its own cache", "not measured: "+f.OwnNote, "", true)
		}
		// A listing refreshed during the copy is origin traffic, not a block.
		row("", "origin bytes", units.FormatBytes(f.PeerOrigin), "listings only (<= 64 KiB)", f.PeerOrigin <= listingAllowance)
	}
	if f.Done < 3 {
		return incomplete("(c) and (d)")
	}
	row(fmt.Sprintf("(c) %d players, blocks on peers", f.PlayFiles), "freezes", fmt.Sprint(f.Freezes), "0", f.Freezes == 0)
	row("", "cold start, first 256 KiB: median, worst", fmt.Sprintf("%v, %v", round(f.StartMedian), round(f.StartWorst)), "", true)
	if f.Seeks > 0 {
		row("", fmt.Sprintf("%d seeks alone, first 256 KiB: median, worst", f.Seeks), fmt.Sprintf("%v, %v", round(f.SeekMedian), round(f.SeekWorst)), "<= 5ms", f.SeekWorst <= targetSeek)
	} else {
		row("", "seeks alone", "not run: no file on peers left after the players'", "<= 5ms", false)
	}
	row("", "failed plays", fmt.Sprint(f.PlayFailed), "0", f.PlayFailed == 0)
	row("", "worst read", round(f.PlayWorstRd).String(), "", true)
	row(fmt.Sprintf("(d) as (c), node %d killed", f.Victim), "failed plays", fmt.Sprint(f.KillFailed), "0", f.KillFailed == 0)
	row("", "wrong bytes (plays)", fmt.Sprint(f.KillWrong), "0", f.KillWrong == 0)
	row("", "freezes", fmt.Sprint(f.KillFreezes), "", true)
	row("", "worst stall, worst read", fmt.Sprintf("%v, %v", round(f.KillStall), round(f.KillWorstRead)), "", true)
	return tw.Flush()
}

// listingAllowance is what (b)'s origin may serve without a block: directory listings.
const listingAllowance = 64 << 10

// round keeps a duration readable: 0.1 ms under a second, milliseconds above.
func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
