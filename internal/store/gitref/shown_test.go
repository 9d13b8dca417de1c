package gitref

import (
	"strings"
	"testing"
)

// TestBadURLsShowNoCredentials: a token put in a store URL by mistake never shows in the error
// that refuses the URL.
func TestBadURLsShowNoCredentials(t *testing.T) {
	for _, raw := range []string{
		"github://x-access-token:ghp_SECRET@octo-org/state",
		"git+https://user:ghp_SECRET@git.example.com/o/r.git",
		"git+https://git.example.com/o/r.git?token=ghp_SECRET",
		"github://octo-org/state?token=ghp_SECRET",
		"git+ftp://user:ghp_SECRET@host/x.git",
	} {
		_, err := ParseURL(raw, func(string) string { return "" })
		if err == nil {
			t.Errorf("%s was taken", raw)
			continue
		}
		if strings.Contains(err.Error(), "ghp_SECRET") {
			t.Errorf("the refusal of a URL shows its credentials: %v", err)
		}
	}
}
