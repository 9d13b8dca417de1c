package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// GET /meta tells the issuer and audience the /v1 API requires, as configured, and nothing else;
// with a verifier that does not say them, it says nothing of them.
func TestMetaSaysWhatTheAPIRequires(t *testing.T) {
	t.Parallel()
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: "https://token.example.test/", Audience: "lw-prod"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		tokens TokenVerifier
		want   string
	}{
		"oidc":  {v, `{"oidc":{"issuer":"https://token.example.test","audience":"lw-prod"}}`},
		"other": {rejectAll{}, `{}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, boundaryConfig, func(o *Options) { o.Tokens = c.tokens })
			w := h.do(httptest.NewRequest(http.MethodGet, MetaPath, nil))
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", MetaPath, w.Code, w.Body)
			}
			var got, want any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(c.want), &want)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("GET %s (-want +got):\n%s", MetaPath, d)
			}
		})
	}
}

type rejectAll struct{}

func (rejectAll) Verify(context.Context, string) (*Workload, error) {
	return nil, &TokenError{Reason: "no"}
}
