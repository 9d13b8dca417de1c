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
	ok := Intent{ID: "d1", Environment: "staging", Scopes: []string{"api"}, Sha: "abc123"}
	if err := ok.validate(); err != nil {
		t.Fatalf("valid intent refused: %v", err)
	}
	cases := map[string]func(*Intent){
		"intent-id":   func(in *Intent) { in.ID = "" },
		"environment": func(in *Intent) { in.Environment = "a//b" },
		"scopes":      func(in *Intent) { in.Scopes = nil },
		"scope":       func(in *Intent) { in.Scopes = []string{"a/b"} },
		"sha":         func(in *Intent) { in.Sha = "" },
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
