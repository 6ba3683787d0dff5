package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
)

// peersTimeout bounds the whole members request: the view is a few hundred bytes a
// member, so a node that has not answered in 10 s is not going to.
const peersTimeout = 10 * time.Second

// maxViewBytes caps the members view read: 1 MiB holds thousands of members, far
// beyond a cluster's, so a bigger answer is not a playhead node's.
const maxViewBytes = 1 << 20

// peersFlags are the flags of `playhead peers`.
type peersFlags struct {
	secretFile string
	json       bool
	tls        tlsFlags // the node's own certificate, for a cluster under mutual TLS
}

func peersCmd() *cobra.Command {
	var p peersFlags
	cmd := &cobra.Command{
		Use:   "peers ADDR",
		Short: "Show a peer-tier node's view of its cluster: members, their state and the bytes exchanged",
		Long: `peers asks the node whose peer HTTP endpoint is ADDR (its --peer-http, or its
--peer-listen port+1, spelled as the cluster knows it) for its view of the cluster, signed
with the cluster's secret, and prints one line per member: its state, the bytes the node
read from it and served it, the requests to it that failed, and how long the node still
passes it over after a failure.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, raw, err := fetchMembersView(cmd.Context(), args[0], p.secretFile, p.tls)
			if err != nil {
				return err
			}
			if p.json {
				_, err = cmd.OutOrStdout().Write(raw)
				return err
			}
			return printMembersView(cmd.OutOrStdout(), v, time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.secretFile, "peer-secret-file", "", "file holding the cluster's shared secret (required)")
	f.BoolVar(&p.json, "json", false, "print the node's answer as JSON instead of a table")
	p.tls.bind(cmd) // a node under mutual TLS answers only a client with a certificate of its CA
	return cmd
}

// fetchMembersView asks the node at addr for its members view, and returns it decoded
// and as the JSON it came in.
func fetchMembersView(ctx context.Context, addr, secretFile string, tf tlsFlags) (peerserve.MembersView, []byte, error) {
	var v peerserve.MembersView
	if err := checkAddr("address", addr, false); err != nil {
		return v, nil, err
	}
	if secretFile == "" {
		return v, nil, errors.New("--peer-secret-file is required: the node answers signed requests only")
	}
	secret, err := peer.LoadSecret(secretFile)
	if err != nil {
		return v, nil, fmt.Errorf("bad --peer-secret-file: %w", err)
	}
	t, err := tf.read()
	if err != nil {
		return v, nil, err
	}
	scheme, client := "http", http.DefaultClient
	if t != nil {
		scheme, client = "https", t.Client()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, peersTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+peer.MembersPath, nil)
	if err == nil {
		err = peer.NewSigner(secret).Sign(req)
	}
	if err != nil {
		return v, nil, fmt.Errorf("bad address %q: %w", addr, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return v, nil, fmt.Errorf("cannot reach the peer endpoint at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return v, nil, fmt.Errorf("the node at %s refused our signature: is --peer-secret-file the cluster's? "+
			"(and is %s the node's peer address as the cluster spells it?)", addr, addr)
	case http.StatusNotFound:
		return v, nil, fmt.Errorf("the node at %s has no members view (%s): is it a playhead peer endpoint of this version?", addr, resp.Status)
	default:
		return v, nil, fmt.Errorf("the node at %s answered %s", addr, resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxViewBytes+1))
	if err == nil && len(raw) > maxViewBytes {
		err = fmt.Errorf("answer over %d bytes", maxViewBytes)
	}
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err != nil {
		return v, nil, fmt.Errorf("the node at %s sent a members view that does not read: %w", addr, err)
	}
	return v, raw, nil
}

// printMembersView prints v as a table, one member a line, then the node's totals.
func printMembersView(w io.Writer, v peerserve.MembersView, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tADDRESS\tSTATE\tREAD FROM IT\tSERVED TO IT\tFAILURES\tDOWN")
	for _, m := range v.Members {
		name, from := m.Name, formatBytes(m.Bytes)
		if m.Self {
			name, from = name+" (self)", "-"
		}
		down := "-"
		if m.DownUntil.After(now) {
			down = "for " + m.DownUntil.Sub(now).Round(100*time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", name, orDash(m.Addr), m.State, from, formatBytes(m.Served), m.Failures, down)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c, s := v.Client, v.Server
	_, err := fmt.Fprintf(w, "\n%s read %s from peers (%d runs) and %s from the origin; %d peer runs went to the origin (%d hedged, %d skipped while down).\n"+
		"It served %s to peers in %d ranges, and refused %d requests as unsigned or wrongly signed (401).\n",
		orDash(v.Self), formatBytes(c.PeerBytes), c.PeerRuns, formatBytes(c.OriginBytes), c.Bypassed, c.Hedged, c.SkippedDown,
		formatBytes(s.Bytes), s.Served, s.Unauthorized)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatBytes prints n in binary units with one decimal, or in bytes below 1 KiB.
func formatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/(1<<10), 0
	for f >= 1<<10 && i < len(units)-1 {
		f, i = f/(1<<10), i+1
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + " " + string(units[i]) + "iB"
}
