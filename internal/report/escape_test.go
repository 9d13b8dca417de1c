package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/latestwins/latestwins/internal/authority"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, 1.2.3 (ok)":          "plain text, 1.2.3 (ok)",
		"Zoë déploie ✓ 部署 🚀":              "Zoë déploie ✓ 部署 🚀",
		`C:\deploy\x1b stays`:             `C:\deploy\x1b stays`,
		"two\nlines":                      `two\nlines`,
		"cr\rtab\t":                       `cr\rtab\t`,
		"\x1b[2J\x1b[Hcleared":            `\x1b[2J\x1b[Hcleared`,
		"bell\x07nul\x00del\x7f":          `bell\x07nul\x00del\x7f`,
		"c1 csi \u009b31m next \u0085":    `c1 csi \u009b31m next \u0085`,
		"rtl \u202etxt.exe zw\u200bsp":    `rtl \u202etxt.exe zw\u200bsp`,
		"line\u2028para\u2029sep":         `line\u2028para\u2029sep`,
		"bad \xff\xfe utf8":               `bad \xff\xfe utf8`,
		"private \U000F0000 use":          `private \U000f0000 use`,
		"nbsp\u00a0and ideographic\u3000": "nbsp\u00a0and ideographic\u3000",
		"":                                "",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"ok", "a\nb", "\x1b[31mred", "\u202e", "\xff", `\x1b`, "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q is not UTF-8", s, out)
		}
		for _, r := range out {
			if !unicode.IsGraphic(r) || r == utf8.RuneError {
				t.Fatalf("Escape(%q) = %q keeps %U", s, out, r)
			}
		}
		if again := Escape(out); again != out {
			t.Fatalf("Escape is not idempotent: %q -> %q -> %q", s, out, again)
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, needsEscape) && out != s {
			t.Fatalf("printable %q changed to %q", s, out)
		}
	})
}

// hostile is an environment whose timeline, lease and failure carry text meant to rewrite a
// terminal or forge lines: a screen clear, a fake entry after a newline, a bidirectional override.
func hostile() *authority.Env {
	forged := "ok\n10:00:00.000  #99  deployed  api  gen 9  Deployed by admin"
	return &authority.Env{Name: "staging", Desired: 2, Observed: 1, Scopes: map[string]*authority.Scope{
		"api": {Owner: 2, Mailbox: &authority.Ref{Generation: 2, Sha: "bbbb222"},
			Lease:   authority.Lease{Holder: "run\x1b[2J\x1b[H", Purpose: "deploy", Generation: 2, Token: 3, ExpiresAt: t0.Add(time.Minute)},
			Failure: &authority.Failure{Generation: 1, Message: "exit 1\r\x1b[32mfixed\u202e"}},
		"web": {Failure: &authority.Failure{Generation: 1, Message: forged}},
	}, Events: []authority.Event{
		{Seq: 1, At: t0, Kind: authority.EventUnlocked, Scope: "api", Message: "Unlocked by \x1b]0;owned\x07eve: " + forged},
	}}
}

// What users control never reaches the terminal or the Markdown raw: no control character, and one
// line per timeline entry and per status row.
func TestRenderingsEscapeUserText(t *testing.T) {
	t.Parallel()
	e := hostile()
	var timeline, status, md bytes.Buffer
	if err := TimelineText(&timeline, e.Events); err != nil {
		t.Fatal(err)
	}
	if err := StatusText(&status, e, t0); err != nil {
		t.Fatal(err)
	}
	if err := JobSummary(&md, Summary{Env: e, Now: t0, Headline: "stopped: \x1b[2Jgone\nforged"}); err != nil {
		t.Fatal(err)
	}
	c := CheckRun(Publication{Env: e, Now: t0, Pass: Pass{Generation: 1, Scopes: []string{"api"}, Outcome: OutcomeRetry, Detail: "why\x1b[1A\nnot"}})
	for name, out := range map[string]string{"timeline": timeline.String(), "status": status.String(), "job summary": md.String(), "check run": c.Summary} {
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && needsEscape(r) }); i >= 0 {
			t.Errorf("%s keeps a control character at %d:\n%q", name, i, out)
		}
		if strings.Contains(out, "\n10:00:00.000") {
			t.Errorf("%s has a forged line:\n%s", name, out)
		}
	}
	if n := strings.Count(timeline.String(), "\n"); n != len(e.Events) {
		t.Errorf("timeline has %d lines for %d events:\n%s", n, len(e.Events), timeline.String())
	}
	if n := strings.Count(status.String(), "\n"); n != 2+len(e.Scopes) {
		t.Errorf("status has %d lines for %d scopes:\n%s", n, len(e.Scopes), status.String())
	}
	for _, want := range []string{`Unlocked by \x1b]0;owned\x07eve: ok\n10:00:00.000`} {
		if !strings.Contains(timeline.String(), want) {
			t.Errorf("timeline does not show %q:\n%s", want, timeline.String())
		}
	}
	if want := `run\x1b[2J\x1b[H`; !strings.Contains(status.String(), want) {
		t.Errorf("status does not show the holder as %q:\n%s", want, status.String())
	}
	if want := `stopped: \x1b[2Jgone\nforged`; !strings.Contains(md.String(), want) {
		t.Errorf("job summary does not show the headline as %q:\n%s", want, md.String())
	}
}
