package cli

import (
	"errors"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
)

// windowsVar registers --windows, beside --requires on the commands that make intents.
func (c *cmdEnv) windowsVar() {
	c.str(new(string), "windows", "", "the environment's change windows: commits deploy only inside an allowed period and outside every deny period, e.g. "+
		"'tz=Europe/Berlin; allow=0 9 * * 1-4 for 8h; deny=0 0 24 12 * for 72h' (cron starts, Go durations; allow and deny as often as needed); "+
		"none: no longer any; a change is recorded (default: keep the stored ones)")
}

// windowsFlag reads --windows: nil when not given (the stored windows stay), empty windows for
// none (which removes them).
func (c *cmdEnv) windowsFlag() (*authority.Windows, error) {
	f := c.fs.Lookup("windows")
	if f == nil {
		return nil, nil
	}
	raw := strings.TrimSpace(f.Value.String())
	if raw == "" {
		return nil, nil
	}
	w, err := authority.ParseWindows(raw)
	var bad *authority.InputError
	if errors.As(err, &bad) {
		fix := bad.Fix
		if bad.Field != "windows" {
			fix = strings.TrimPrefix(bad.Field, "windows ") + ": " + fix
		}
		return nil, c.badSetting("windows", raw, fix)
	}
	return w, err
}
