package main

import (
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/source/sources"
)

// A scheme's settings become flags of their own name, and what is typed reaches the
// scheme's Open with the I/O timeout; an untyped one takes its default.
func TestSourceFlagsReachTheScheme(t *testing.T) {
	var got sources.Options
	reg, err := sources.New(sources.Scheme{
		Name: "s3", Prefixes: []string{"s3://"}, Summary: "an s3:// URL",
		Params: []sources.Param{{Name: "s3-region", Default: "eu-west-1", Usage: "region"}, {Name: "s3-endpoint", Usage: "endpoint"}},
		Open: func(spec string, o sources.Options) (source.Source, error) {
			got = o
			return memsrc.New(), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var s sourceFlags
	cmd := &cobra.Command{}
	s.bind(cmd, reg)
	if err := cmd.Flags().Parse([]string{"--s3-endpoint", "http://minio:9000"}); err != nil {
		t.Fatal(err)
	}
	_, scheme, err := s.open("s3://bucket/films/", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if scheme != "s3" || got.IOTimeout != 3*time.Second || got.Param("s3-endpoint") != "http://minio:9000" || got.Param("s3-region") != "eu-west-1" {
		t.Errorf("scheme %q, options %+v: want s3, 3s, the endpoint typed and the default region", scheme, got)
	}
	if _, _, err := s.open("gs://bucket/", time.Second); err == nil {
		t.Error("gs:// opened by a registry without it")
	}
}
