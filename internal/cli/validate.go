package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

// Bounds of a lease's TTL (authority.MinLeaseTTL, authority.MaxLeaseTTL).
const (
	MinLeaseTTL = authority.MinLeaseTTL
	MaxLeaseTTL = authority.MaxLeaseTTL
)

// checkLeaseTTL keeps --lease-ttl within MinLeaseTTL..MaxLeaseTTL.
func (c *cmdEnv) checkLeaseTTL() error {
	if ttl := c.s.leaseTTL; ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return c.badSetting("lease-ttl", ttl.String(), fmt.Sprintf("give a lease TTL from %s to %s (default %s)",
			shortDuration(MinLeaseTTL), shortDuration(MaxLeaseTTL), shortDuration(authority.DefaultLeaseTTL)))
	}
	return nil
}

// checkGrace keeps --grace within what fits the lease TTL (pass.CheckGrace): the command must be
// stopped, SIGKILL included, while the lease that fences it still holds.
func (c *cmdEnv) checkGrace() error {
	err := pass.CheckGrace(c.s.grace, c.s.leaseTTL)
	if in := (*authority.InputError)(nil); errors.As(err, &in) {
		return c.badSetting("grace", in.Value, in.Fix)
	}
	return err
}

// checkScopes validates the scope names given, if any; claim and the API check the rest.
func (c *cmdEnv) checkScopes() error {
	for _, s := range splitList(c.s.scopes) {
		if err := authority.ValidateScope(s); err != nil {
			return err
		}
	}
	return nil
}

// shortDuration writes d without zero minutes and seconds: 24h, 2m, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
