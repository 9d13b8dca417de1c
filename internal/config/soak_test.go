package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// soakFile is a file where prod requires staging and qa, with extra keys of prod's.
func soakFile(extra string) string {
	return "environments:\n" +
		"  staging:\n    scopes:\n      api: {repository: acme/api, branch: main}\n" +
		"  qa:\n    scopes:\n      api: {repository: acme/api, branch: main}\n" +
		"  prod:\n    requires: [staging, qa]\n" + extra +
		"    scopes:\n      api: {repository: acme/api, branch: main}\n"
}

func prodOf(t *testing.T, cfg *Config) *Environment {
	t.Helper()
	for i := range cfg.Environments {
		if cfg.Environments[i].Name == "prod" {
			return &cfg.Environments[i]
		}
	}
	t.Fatal("no prod")
	return nil
}

func TestSoakSettings(t *testing.T) {
	t.Parallel()
	one := prodOf(t, mustParse(t, soakFile("    soak: 30m\n")))
	if s := one.Gates.Soak; s == nil || s.For != 30*time.Minute || len(s.Environments) != 0 {
		t.Fatalf("soak: 30m read as %+v", s)
	}
	each := prodOf(t, mustParse(t, soakFile("    soak: {staging: 30m, qa: 1h30m}\n")))
	if s := each.Gates.Soak; s == nil || s.For != 0 || s.Environments["staging"] != 30*time.Minute || s.Environments["qa"] != 90*time.Minute || len(s.Environments) != 2 {
		t.Fatalf("soak per environment read as %+v", s)
	}
	// The selection carries it to the intent; without soak: an empty one, so that removing it from
	// the file removes it from the stored environment.
	sels := mustParse(t, soakFile("    soak: 1h\n")).ScopesFor("acme/api", "main", nil)
	for _, sel := range sels {
		want := time.Duration(0)
		if sel.Environment == "prod" {
			want = time.Hour
		}
		if sel.Gates == nil || sel.Gates.Soak == nil || sel.Gates.Soak.For != want {
			t.Fatalf("selection of %s carries %+v; want a soak of %s", sel.Environment, sel.Gates, want)
		}
	}
	// soak may come before requires in the file.
	before := "environments:\n  staging:\n    scopes:\n      api: {repository: acme/api, branch: main}\n" +
		"  prod:\n    soak: {staging: 2h}\n    requires: [staging]\n    scopes:\n      api: {repository: acme/api, branch: main}\n"
	if s := prodOf(t, mustParse(t, before)).Gates.Soak; s == nil || s.Environments["staging"] != 2*time.Hour {
		t.Fatalf("soak before requires read as %+v", s)
	}
}

func TestSoakSettingProblems(t *testing.T) {
	t.Parallel()
	noRequires := "environments:\n  staging:\n    scopes:\n      api: {repository: acme/api, branch: main}\n" +
		"  prod:\n    soak: 30m\n    scopes:\n      api: {repository: acme/api, branch: main}\n"
	tests := map[string]struct {
		file string
		want string
	}{
		"without requires": {noRequires, `line 6: environment "prod": soak without requires; a commit soaks in the environments it must be live in first: name them (requires: [staging]), or remove the soak`},
		"an environment not required": {soakFile("    soak: {staging: 30m, preprod: 1h}\n"),
			`line 10: environment "prod": soak in "preprod", which it does not require; a commit soaks only in the environments of requires: add preprod to requires, or remove its soak`},
		"not a duration":    {soakFile("    soak: half an hour\n"), `line 10: environment "prod": soak "half an hour" is not a duration; write it as Go does, e.g. 30m or 1h30m`},
		"a bare number":     {soakFile("    soak: 30\n"), `soak "30" is not a duration`},
		"zero":              {soakFile("    soak: 0s\n"), `line 10: environment "prod": soak 0s is out of range; give a positive duration of at most 168h (a week)`},
		"negative":          {soakFile("    soak: -5m\n"), "soak -5m is out of range"},
		"longer than 7d":    {soakFile("    soak: 169h\n"), "soak 169h is out of range"},
		"too long for one":  {soakFile("    soak: {qa: 200h}\n"), `environment "prod": soak in qa 200h is out of range`},
		"a list":            {soakFile("    soak: [30m]\n"), `line 10: environment "prod": soak must be a duration (soak: 30m) or one per required environment`},
		"empty":             {soakFile("    soak:\n"), "soak must be a duration"},
		"an empty mapping":  {soakFile("    soak: {}\n"), `environment "prod": soak is empty`},
		"a nested value":    {soakFile("    soak: {staging: [30m]}\n"), `the soak in "staging" must be a duration, e.g. staging: 30m`},
		"named twice":       {soakFile("    soak: {staging: 30m, staging: 1h}\n"), `soak names "staging" twice`},
		"not a duration in": {soakFile("    soak: {qa: soon}\n"), `soak in qa "soon" is not a duration`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.file))
			if err == nil || !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v; want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestSoakOnlyInTheTrustedFile(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "allowed-overrides: [paths, workflow]\n"+soakFile("    soak: 30m\n"))
	_, err := cfg.Narrow("acme/api", []byte("environments:\n  prod:\n    soak: 1s\n"), "acme/.github:.github/latestwins.yml")
	if err == nil || !strings.Contains(err.Error(), `"soak" may only be set in the trusted file`) {
		t.Fatalf("Narrow = %v; want soak refused in a repository's own file", err)
	}
}
