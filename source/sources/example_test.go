package sources_test

import (
	"fmt"
	"time"

	"github.com/playhead/playhead/source/sources"
)

// A library opens the same SOURCE URLs as the command line: a bucket here, with the
// settings the command line takes as --s3-... flags. Credentials come from the AWS chain
// (environment, ~/.aws, instance role); Probe checks them and the bucket before use.
func ExampleRegistry_Open() {
	src, err := sources.Builtin.Open("s3://media/films", sources.Options{
		IOTimeout: 30 * time.Second,
		Params:    map[string]string{"s3-endpoint": "http://127.0.0.1:9000", "s3-path-style": "true"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Next: sources.Probe(ctx, src) asks the bucket, and vfs.New(src, opts) serves it.
	fmt.Println(src)
	// Output: s3://media/films at http://127.0.0.1:9000
}
