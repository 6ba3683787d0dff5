package units

import "testing"

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"4096", 4096},
		{"100B", 100},
		{"256KiB", 256 << 10},
		{"256kib", 256 << 10},
		{"64K", 64_000},
		{"20MB", 20_000_000},
		{"64M", 64_000_000},
		{"64Mi", 64 << 20},
		{"1.5GiB", 3 << 29},
		{"2G", 2_000_000_000},
		{" 1 TiB ", 1 << 40},
		{"0", 0},
		{"0.5KiB", 512},
	} {
		got, err := ParseBytes(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "MB", "-1MB", "12XB", "1.2.3", "9e30", "10000000TiB", "3MB/s"} {
		if got, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"3MB/s", 3_000_000},
		{"3mb/s", 3_000_000},
		{"25MiB/s", 25 << 20},
		{"30MB", 30_000_000},
		{"1.5 MB/s", 1_500_000},
	} {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := ParseRate("fast"); err == nil {
		t.Error("ParseRate(fast) succeeded")
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FormatBytes(100), "100 B"},
		{FormatBytes(256 << 10), "256 KiB"},
		{FormatBytes(3 << 29), "1.50 GiB"},
		{FormatBytes(30_000_000), "28.6 MiB"},
		{FormatRate(3e6), "3.00 MB/s"},
		{FormatRate(29.93e6), "29.9 MB/s"},
		{FormatRate(512), "512 B/s"},
		{FormatRate(2.3e9), "2.30 GB/s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
