package report

import (
	"encoding/json"
	"fmt"
	"os"
)

// WriteJSON writes r, indented, to path (atomically: a partial file never replaces a
// complete one).
func WriteJSON(path string, r *Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
