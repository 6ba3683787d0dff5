package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/sources"
)

// sourceFlags bind the settings of a registry's schemes (sources.Param), each as the
// flag it names (--s3-region), so a new scheme's settings reach the mount command
// without an edit here. Sources are opened through the registry and nowhere else.
type sourceFlags struct {
	reg    *sources.Registry
	params map[string]*string // by Param.Name, bound to the flag of that name
}

// bind adds a flag for every Param of reg's schemes to cmd.
func (s *sourceFlags) bind(cmd *cobra.Command, reg *sources.Registry) {
	s.reg, s.params = reg, map[string]*string{}
	for _, sch := range reg.Schemes() {
		for _, p := range sch.Params {
			s.params[p.Name] = cmd.Flags().String(p.Name, p.Default, p.Usage+" ("+sch.Name+" sources)")
			if p.Bool {
				cmd.Flags().Lookup(p.Name).NoOptDefVal = "true"
			}
		}
	}
}

// open returns the source for spec, bounding its own requests by ioTimeout (the
// mount's --io-timeout), and the name of its scheme (the metrics' source label).
func (s *sourceFlags) open(spec string, ioTimeout time.Duration) (source.Source, string, error) {
	sch, err := s.reg.Lookup(spec)
	if err != nil {
		return nil, "", err
	}
	o := sources.Options{IOTimeout: ioTimeout, Params: map[string]string{}}
	for name, v := range s.params {
		o.Params[name] = *v
	}
	src, err := s.reg.Open(spec, o)
	return src, sch.Name, err
}
