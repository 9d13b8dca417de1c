package cli

import (
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// soakVar registers --soak beside --requires. Its value is read back from the flag set (soakFlag).
func (c *cmdEnv) soakVar() {
	c.str(new(string), "soak", "", "how long a commit must have been live in each environment of --requires before it deploys in this one, e.g. 30m, or per environment staging=30m,qa=1h; none: no longer any; a change is recorded (default: keep the stored soak)")
}

// soakFlag reads --soak: nil when not given (the stored soak stays), an empty soak for none
// (removes it), one duration for every required environment (30m), or one per required
// environment (staging=30m,qa=1h). Whether those are required is the Authority's to check, with
// --requires when it is given.
func (c *cmdEnv) soakFlag() (*authority.Soak, error) {
	f := c.fs.Lookup("soak")
	if f == nil {
		return nil, nil
	}
	raw := strings.TrimSpace(f.Value.String())
	switch raw {
	case "":
		return nil, nil
	case "none":
		return &authority.Soak{}, nil
	}
	fix := "give a duration such as 30m, or one per required environment such as staging=30m,qa=1h (each positive, at most 168h), or none"
	if !strings.Contains(raw, "=") {
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 || d > authority.MaxSoak {
			return nil, c.badSetting("soak", raw, fix)
		}
		return &authority.Soak{For: d}, nil
	}
	s := &authority.Soak{Environments: map[string]time.Duration{}}
	for _, part := range splitList(raw) {
		env, dur, ok := strings.Cut(part, "=")
		d, err := time.ParseDuration(dur)
		if _, dup := s.Environments[env]; !ok || env == "" || dup || err != nil || d <= 0 || d > authority.MaxSoak {
			return nil, c.badSetting("soak", raw, fix+"; name each environment once")
		}
		s.Environments[env] = d
	}
	return s, nil
}
