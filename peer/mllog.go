package peer

import (
	"bytes"
	"context"
	"log/slog"
)

// slogWriter turns memberlist's log lines ("[WARN] memberlist: ...") into slog records
// at the level the prefix names. memberlist logs addresses and node names, never its
// keyring, so nothing secret passes here.
type slogWriter struct {
	log *slog.Logger
}

func (w slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, l := range []struct {
		prefix string
		level  slog.Level
	}{
		{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
		{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
	} {
		if rest, ok := bytes.CutPrefix(line, []byte(l.prefix)); ok {
			level, line = l.level, bytes.TrimSpace(rest)
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.log.Log(context.Background(), level, string(line), "component", "memberlist")
	return len(p), nil
}
