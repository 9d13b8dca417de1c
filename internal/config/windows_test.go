package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// windowsFile is a file whose prod environment has windows (the lines given, indented under
// windows:, starting at line 5).
func windowsFile(windows string) string {
	return "environments:\n  staging:\n    scopes: {api: {repository: acme/api, branch: main}}\n  prod:\n" +
		"    requires: [staging]\n    windows:\n" + windows + "    scopes:\n      api: {repository: acme/api, branch: main}\n"
}

func TestWindowsShape(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, windowsFile(`      timezone: Europe/Berlin
      allow:
        - {start: "0 9 * * 1-4", duration: 8h}
        - start: "0 10 * * 5"
          duration: 4h30m
      deny:
        - {start: "0 0 24 12 *", duration: 72h}
`))
	prod := cfg.Environments[1]
	want := &authority.Windows{Timezone: "Europe/Berlin",
		Allow: []authority.WindowPeriod{{Start: "0 9 * * 1-4", Duration: 8 * time.Hour}, {Start: "0 10 * * 5", Duration: 4*time.Hour + 30*time.Minute}},
		Deny:  []authority.WindowPeriod{{Start: "0 0 24 12 *", Duration: 72 * time.Hour}}}
	if got := prod.Gates.Windows; got.Spec() != want.Spec() {
		t.Fatalf("windows %s; want %s", got.Spec(), want.Spec())
	}
	// The selection carries them to the intent, and an environment without windows carries
	// empty ones, so that windows removed from the file are removed from the environment.
	sels := cfg.ScopesFor("acme/api", "main", nil)
	for _, s := range sels {
		w := s.Gates.Windows
		switch {
		case w == nil:
			t.Fatalf("%s's selection carries no windows; want them set or empty", s.Environment)
		case s.Environment == "prod" && w.Spec() != want.Spec():
			t.Fatalf("prod's selection carries %s; want %s", w.Spec(), want.Spec())
		case s.Environment == "staging" && w.Spec() != "none":
			t.Fatalf("staging's selection carries %s; want none", w.Spec())
		}
	}
	// Deny alone; no time zone is UTC.
	deny := mustParse(t, windowsFile("      deny:\n        - {start: \"@daily\", duration: 1h}\n"))
	if w := deny.Environments[1].Gates.Windows; w.Timezone != "" || len(w.Allow) != 0 || len(w.Deny) != 1 || w.Spec() != "tz=UTC; deny=@daily for 1h" {
		t.Fatalf("deny-only windows %s", w.Spec())
	}
}

func TestWindowsProblems(t *testing.T) {
	t.Parallel()
	const ok = "        - {start: \"0 9 * * 1-5\", duration: 8h}\n"
	tests := map[string]struct {
		windows string
		want    string
	}{
		"unknown time zone": {"      timezone: Europe/Berln\n      allow:\n" + ok,
			`line 7: environment "prod": windows: timezone "Europe/Berln": not a known time zone; give an IANA name such as Europe/Berlin`},
		"Local": {"      timezone: Local\n      allow:\n" + ok, `timezone "Local": name the time zone`},
		"bad cron": {"      allow:\n        - {start: \"0 9 * *\", duration: 8h}\n",
			`line 8: environment "prod": windows: allow[0]: start "0 9 * *": not a cron expression`},
		"bad field": {"      deny:\n        - {start: \"0 0 32 12 *\", duration: 8h}\n",
			`windows: deny[0]: start "0 0 32 12 *": not a cron expression`},
		"never fires": {"      deny:\n        - {start: \"0 0 30 2 *\", duration: 8h}\n",
			`windows: deny[0]: start "0 0 30 2 *": it never fires (no such day)`},
		"time zone in the expression": {"      deny:\n        - {start: \"CRON_TZ=UTC 0 0 * * *\", duration: 8h}\n", "give the time zone once for all periods"},
		"@every":                      {"      deny:\n        - {start: \"@every 2h\", duration: 1h}\n", "@every counts from whenever it is read"},
		"missing duration": {"      allow:\n        - {start: \"0 9 * * *\"}\n",
			`line 8: environment "prod": windows: allow[0] has no duration; say how long the period lasts`},
		"missing start": {"      allow:\n        - {duration: 8h}\n", `windows: allow[0] has no start; give it as a cron expression`},
		"zero duration": {"      allow:\n        - {start: \"0 9 * * *\", duration: 0s}\n",
			`windows: allow[0]: duration 0s: give how long the period lasts, from 1m to 744h (31 days)`},
		"negative duration":  {"      allow:\n        - {start: \"0 9 * * *\", duration: -8h}\n", "duration -8h: give how long the period lasts"},
		"over-long duration": {"      deny:\n        - {start: \"0 0 1 12 *\", duration: 800h}\n", "duration 800h: give how long the period lasts, from 1m to 744h"},
		"days":               {"      deny:\n        - {start: \"0 0 24 12 *\", duration: 3d}\n", `duration "3d" is not a duration; write it as Go does, e.g. 8h or 72h (there is no d: 3 days is 72h)`},
		"unknown key": {"      timezone: UTC\n      allowed:\n" + ok,
			`line 8: environment "prod": windows: unknown key "allowed"; allowed: timezone, allow, deny`},
		"unknown period key": {"      allow:\n        - {start: \"0 9 * * *\", duration: 8h, until: \"0 17 * * *\"}\n",
			`windows: allow[0]: unknown key "until"; a period has start and duration`},
		"not a list":           {"      allow: {start: \"0 9 * * *\", duration: 8h}\n", "windows: allow must be a list of periods"},
		"period not a mapping": {"      allow:\n        - \"0 9 * * *\"\n", "windows: allow[0] must be a mapping"},
		"empty allow":          {"      allow: []\n", "allow is empty, which would allow no time at all"},
		"no periods":           {"      timezone: Europe/Berlin\n", `line 6: environment "prod": windows: give allow or deny periods`},
		"not a mapping":        {"      - allow\n", `windows must be a mapping`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(windowsFile(tt.windows)))
			if err == nil || !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v; want an error saying %q", err, tt.want)
			}
		})
	}
	// Every problem is told at once.
	_, err := Parse([]byte(windowsFile("      timezone: Nowhere\n      allow:\n        - {start: \"0 9 * *\", duration: 0s}\n")))
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 3 {
		t.Fatalf("Parse = %v; want three problems: the time zone, the start and the duration", err)
	}
}

// Only the trusted file sets when an environment may deploy.
func TestWindowsOnlyInTheTrustedFile(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "allowed-overrides: [paths, workflow]\n"+windowsFile("      deny:\n        - {start: \"0 0 24 12 *\", duration: 72h}\n"))
	_, err := cfg.Narrow("acme/api", []byte("environments:\n  prod:\n    windows: {allow: [{start: \"* * * * *\", duration: 1m}]}\n"), "acme/.github:.github/latestwins.yml")
	if err == nil || !strings.Contains(err.Error(), `"windows" may only be set in the trusted file`) {
		t.Fatalf("Narrow = %v; want windows refused in a repository's own file", err)
	}
}
