//go:build !linux

package cli

import "testing"

// rerunAsNobody needs Linux's process credentials; elsewhere a root run skips the check.
func rerunAsNobody(t *testing.T) {
	t.Skip("permissions do not bind root, and running as another user needs Linux")
}
