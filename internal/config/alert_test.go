package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

func alertFile(extra string) string {
	return "environments:\n  prod:\n" + extra + "    scopes:\n      api: {repository: acme/api, branch: main}\n"
}

func TestAlertSettings(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, alertFile("    alert-after: 30m\n    alert-webhook: https://hooks.example.com/lw\n    alert-issue: acme/.github\n"))
	e := cfg.Environments[0]
	if e.AlertAfter != 30*time.Minute || e.AlertWebhook != "https://hooks.example.com/lw" || e.AlertIssue != "acme/.github" {
		t.Fatalf("alert settings %s %q %q", e.AlertAfter, e.AlertWebhook, e.AlertIssue)
	}
	sels := cfg.ScopesFor("acme/api", "main", nil)
	if len(sels) != 1 || sels[0].AlertAfter == nil || *sels[0].AlertAfter != 30*time.Minute {
		t.Fatalf("the selection carries %v; want 30m", sels)
	}
	// An environment without alert-after carries zero, so that removing it from the file removes it
	// from the stored environment.
	none := mustParse(t, alertFile(""))
	if sels := none.ScopesFor("acme/api", "main", nil); len(sels) != 1 || sels[0].AlertAfter == nil || *sels[0].AlertAfter != 0 {
		t.Fatalf("the selection of an environment without alert-after carries %v; want 0", sels[0].AlertAfter)
	}
	loop := mustParse(t, alertFile("    alert-after: 1h30m\n    alert-webhook: http://127.0.0.1:9000/hook\n"))
	if loop.Environments[0].AlertAfter != 90*time.Minute {
		t.Fatalf("alert-after %s", loop.Environments[0].AlertAfter)
	}
}

func TestAlertSettingProblems(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		extra string
		want  string
	}{
		"not a duration":     {"    alert-after: half an hour\n", `line 3: environment "prod": alert-after "half an hour" is not a duration; write it as Go does, e.g. 30m`},
		"a bare number":      {"    alert-after: 30\n", `alert-after "30" is not a duration`},
		"too short":          {"    alert-after: 10s\n", "alert-after 10s is out of range; give from 1m0s to 168h0m0s"},
		"too long":           {"    alert-after: 200h\n", "alert-after 200h is out of range"},
		"negative":           {"    alert-after: -5m\n", "out of range"},
		"a list":             {"    alert-after: [30m]\n", "alert-after must be a single value"},
		"plain http":         {"    alert-after: 30m\n    alert-webhook: http://hooks.example.com/x\n", `line 4: environment "prod": alert-webhook "http://hooks.example.com/x" must be an https URL (http only to a loopback host)`},
		"not a URL":          {"    alert-after: 30m\n    alert-webhook: hooks\n", "must be an https URL"},
		"credentials in URL": {"    alert-after: 30m\n    alert-webhook: https://u:secret@hooks.example.com/x\n", "holds credentials"},
		"issue not a repo":   {"    alert-after: 30m\n    alert-issue: true\n", `alert-issue "true" must be the repository to open the issue in, OWNER/NAME`},
		"webhook without alert-after": {"    alert-webhook: https://hooks.example.com/x\n",
			`line 2: environment "prod": alert-webhook and alert-issue need alert-after (e.g. alert-after: 30m)`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(alertFile(tt.extra)))
			if err == nil || !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v; want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), ":secret@") {
				t.Errorf("the error shows the URL's password: %v", err)
			}
		})
	}
}

func TestAlertSettingsOnlyInTheTrustedFile(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "allowed-overrides: [paths, workflow]\n"+alertFile("    alert-after: 30m\n"))
	_, err := cfg.Narrow("acme/api", []byte("environments:\n  prod:\n    alert-after: 1000h\n"), "acme/.github:.github/latestwins.yml")
	if err == nil || !strings.Contains(err.Error(), `"alert-after" may only be set in the trusted file`) {
		t.Fatalf("Narrow = %v; want alert-after refused in a repository's own file", err)
	}
}
