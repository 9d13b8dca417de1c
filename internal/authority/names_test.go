package authority

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateEnvironment(t *testing.T) {
	valid := []string{"staging", "prod", "preview/pr-803", "a", "A.b_c-d", "team/app/preview-1", strings.Repeat("e", 128)}
	invalid := []string{"", "-staging", ".hidden", "/staging", "staging/", "preview//pr-1", "staging env", "stagïng", "a\nb", strings.Repeat("e", 129)}
	for _, name := range valid {
		if err := ValidateEnvironment(name); err != nil {
			t.Errorf("ValidateEnvironment(%q): %v", name, err)
		}
	}
	for _, name := range invalid {
		err := ValidateEnvironment(name)
		var in *InputError
		if !errors.Is(err, ErrInvalidInput) || !errors.As(err, &in) || in.Field != "environment" || in.Fix == "" {
			t.Errorf("ValidateEnvironment(%q) = %v; want an environment *InputError with a fix", name, err)
		}
	}
}

func TestValidateScope(t *testing.T) {
	valid := []string{"api", "web-1", "A.b_c", strings.Repeat("s", 64)}
	invalid := []string{"", "-api", "api/v2", "api v2", strings.Repeat("s", 65)}
	for _, name := range valid {
		if err := ValidateScope(name); err != nil {
			t.Errorf("ValidateScope(%q): %v", name, err)
		}
	}
	for _, name := range invalid {
		if err := ValidateScope(name); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "scope") {
			t.Errorf("ValidateScope(%q) = %v; want a scope input error", name, err)
		}
	}
}

func TestSplitResource(t *testing.T) {
	cases := []struct{ resource, env, scope string }{
		{"staging/api", "staging", "api"},
		{"preview/pr-803/web", "preview/pr-803", "web"},
	}
	for _, c := range cases {
		env, scope, err := SplitResource(c.resource)
		if err != nil || env != c.env || scope != c.scope {
			t.Errorf("SplitResource(%q) = %q, %q, %v; want %q, %q", c.resource, env, scope, err, c.env, c.scope)
		}
	}
	for _, r := range []string{"api", "staging/", "/api", "bad env/api", "staging/api v2"} {
		if _, _, err := SplitResource(r); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("SplitResource(%q) = %v; want an input error", r, err)
		}
	}
}

func TestIntentValidation(t *testing.T) {
	ok := Intent{ID: "d1", Environment: "staging", Scopes: []string{"api"}, Sha: "abc1230000000000000000000000000000000000"}
	if err := ok.validate(); err != nil {
		t.Fatalf("valid intent refused: %v", err)
	}
	cases := map[string]func(*Intent){
		"intent-id":   func(in *Intent) { in.ID = "" },
		"environment": func(in *Intent) { in.Environment = "a//b" },
		"scopes":      func(in *Intent) { in.Scopes = nil },
		"scope":       func(in *Intent) { in.Scopes = []string{"a/b"} },
		"sha":         func(in *Intent) { in.Sha = "" },
		"before":      func(in *Intent) { in.Before = "abc1234" },
	}
	for field, mutate := range cases {
		in := ok
		mutate(&in)
		var ie *InputError
		if err := in.validate(); !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("intent with a bad %s: %v; want an *InputError for %s", field, err, field)
		}
	}
}

func TestValidateSha(t *testing.T) {
	valid := []string{strings.Repeat("a", 40), "6113728f27ae82c7b1a177c8d03f9e96e0adf246", strings.Repeat("0f", 32)}
	invalid := []string{"", "abc1234", "6113728f27ae82c7b1a177c8d03f9e96e0adf24", "6113728F27AE82C7B1A177C8D03F9E96E0ADF246",
		strings.Repeat("a", 41), strings.Repeat("a", 63), strings.Repeat("a", 65), strings.Repeat("g", 40), " " + strings.Repeat("a", 40), "HEAD"}
	for _, sha := range valid {
		if err := ValidateSha(sha); err != nil {
			t.Errorf("ValidateSha(%q): %v", sha, err)
		}
	}
	for _, sha := range invalid {
		var in *InputError
		if err := ValidateSha(sha); !errors.As(err, &in) || in.Field != "sha" || !strings.Contains(in.Fix, "git rev-parse HEAD") {
			t.Errorf("ValidateSha(%q) = %v; want a sha *InputError saying to give the full commit sha", sha, err)
		}
	}
	if got := CanonicalSha(" 6113728F27AE82C7B1A177C8D03F9E96E0ADF246\n"); got != "6113728f27ae82c7b1a177c8d03f9e96e0adf246" {
		t.Errorf("CanonicalSha of an uppercase sha = %q", got)
	}
	for _, p := range []string{"abc1234", "6113728f27ae82c7b1a177c8d03f9e96e0adf246", strings.Repeat("b", 64)} {
		if err := ValidateShaPrefix(p); err != nil {
			t.Errorf("ValidateShaPrefix(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "abc123", "ABC1234", "abc123x", strings.Repeat("b", 65), "HEAD~1"} {
		if err := ValidateShaPrefix(p); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "7 hex digits") {
			t.Errorf("ValidateShaPrefix(%q) = %v; want an input error asking for 7 hex digits", p, err)
		}
	}
}
