package comments

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

func TestParseCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want Command
		ok   bool
	}{
		{"deploy all", "/latestwins deploy", Command{Name: CommandDeploy}, true},
		{"deploy scopes", "/latestwins deploy api web", Command{Name: CommandDeploy, Scopes: []string{"api", "web"}}, true},
		{"extra spaces and CRLF", "  \r\n  /latestwins   deploy\tapi  \r\nmore text", Command{Name: CommandDeploy, Scopes: []string{"api"}}, true},
		{"redeploy", "/latestwins redeploy api", Command{Name: CommandRedeploy, Scopes: []string{"api"}}, true},
		{"status", "/latestwins status", Command{Name: CommandStatus}, true},
		{"unlock all", "/latestwins unlock", Command{Name: CommandUnlock}, true},
		{"unlock one", "/latestwins unlock api", Command{Name: CommandUnlock, Scopes: []string{"api"}}, true},
		{"help", "/latestwins help", Command{Name: CommandHelp}, true},
		{"skip", "/latestwins skip api", Command{Name: CommandSkip, Scopes: []string{"api"}}, true},
		{"retry", "/latestwins retry api", Command{Name: CommandRetry, Scopes: []string{"api"}}, true},
		{"skip needs a scope", "/latestwins skip", Command{Problem: "`/latestwins skip SCOPE` takes exactly 1 scope"}, true},
		{"retry one scope only", "/latestwins retry api web", Command{Problem: "`/latestwins retry SCOPE` takes exactly 1 scope"}, true},
		{"skip with a reason is refused", "/latestwins skip api because", Command{Problem: "`/latestwins skip SCOPE` takes exactly 1 scope"}, true},
		{"skip smuggles environment/scope", "/latestwins skip production/api", Command{Problem: badScope(`"production/api"`)}, true},
		{"bare prefix is help", "/latestwins", Command{Name: CommandHelp}, true},
		{"rollback to the previous live commit", "/latestwins rollback api", Command{Name: CommandRollback, Scopes: []string{"api"}}, true},
		{"rollback to a commit", "/latestwins rollback api ABC1234", Command{Name: CommandRollback, Scopes: []string{"api"}, Sha: "abc1234"}, true},
		{"rollback in a named environment", "/latestwins rollback production/api abc1234",
			Command{Name: CommandRollback, Environment: "production", Scopes: []string{"api"}, Sha: "abc1234"}, true},
		{"unfreeze", "/latestwins unfreeze api 4", Command{Name: CommandUnfreeze, Scopes: []string{"api"}, Freeze: 4}, true},
		{"unfreeze naming no freeze", "/latestwins unfreeze api", Command{Name: CommandUnfreeze, Scopes: []string{"api"}}, true},
		{"unfreeze in a named environment", "/latestwins unfreeze preview/pr-7/api 12", Command{Name: CommandUnfreeze, Environment: "preview/pr-7", Scopes: []string{"api"}, Freeze: 12}, true},
		{"rollback needs a scope", "/latestwins rollback", Command{Problem: "`/latestwins rollback SCOPE [SHA]` takes one scope (or ENV/SCOPE) and, optionally, the commit to roll back to"}, true},
		{"rollback to a short sha", "/latestwins rollback api abc12", Command{Problem: "`\"abc12\"` is not a commit: give 7 to 40 hexadecimal digits of its sha"}, true},
		{"rollback to a branch", "/latestwins rollback api main", Command{Problem: "`\"main\"` is not a commit: give 7 to 40 hexadecimal digits of its sha"}, true},
		{"rollback with a reason is refused", "/latestwins rollback api abc1234 because", Command{Problem: "`/latestwins rollback SCOPE [SHA]` takes one scope (or ENV/SCOPE) and, optionally, the commit to roll back to"}, true},
		{"unfreeze takes no commit", "/latestwins unfreeze api abc1234", Command{Problem: notAFreeze(`"abc1234"`)}, true},
		{"unfreeze of freeze 0", "/latestwins unfreeze api 0", Command{Problem: notAFreeze(`"0"`)}, true},
		{"unfreeze of a negative freeze", "/latestwins unfreeze api -4", Command{Problem: notAFreeze(`"-4"`)}, true},
		{"unfreeze of a signed freeze", "/latestwins unfreeze api +4", Command{Problem: notAFreeze(`"+4"`)}, true},
		{"unfreeze with a reason is refused", "/latestwins unfreeze api 4 fixed", Command{Problem: "`/latestwins unfreeze SCOPE FREEZE` takes one scope (or ENV/SCOPE) and the freeze to lift, named by its rollback's generation"}, true},
		{"promote", "/latestwins promote api", Command{Name: CommandPromote, Scopes: []string{"api"}}, true},
		{"promote to a named environment", "/latestwins promote production/api", Command{Name: CommandPromote, Environment: "production", Scopes: []string{"api"}}, true},
		{"promote takes no commit", "/latestwins promote api abc1234", Command{Problem: "`/latestwins promote SCOPE` takes one scope (or ENV/SCOPE)"}, true},
		{"rollback traversal", "/latestwins rollback ../prod/api", Command{Problem: "`\"../prod/api\"` is not SCOPE or ENV/SCOPE: use 1-128 characters from A-Z a-z 0-9 . _ / -, starting with a letter or digit, without empty path segments (e.g. staging, preview/pr-803)"}, true},
		{"rollback bad scope after the environment", "/latestwins rollback prod/$(id)", Command{Problem: "`\"prod/$(id)\"` is not SCOPE or ENV/SCOPE: use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit (e.g. api)"}, true},

		{"plain comment", "LGTM, ship it", Command{}, false},
		{"empty", "", Command{}, false},
		{"command not on the first line", "please run\n/latestwins deploy", Command{}, false},
		{"quoted", "> /latestwins deploy", Command{}, false},
		{"in a code block", "```\n/latestwins deploy\n```", Command{}, false},
		{"inline code", "`/latestwins deploy`", Command{}, false},
		{"prefix glued to a word", "/latestwinsdeploy api", Command{}, false},
		{"another bot", "/latest deploy", Command{}, false},
		{"other case", "/LatestWins deploy", Command{}, false},

		{"unknown verb", "/latestwins destroy", Command{Problem: "unknown command `\"destroy\"`; " + Usage}, true},
		{"redeploy needs a scope", "/latestwins redeploy", Command{Problem: "`/latestwins redeploy SCOPE` takes exactly 1 scope"}, true},
		{"redeploy one scope only", "/latestwins redeploy api web", Command{Problem: "`/latestwins redeploy SCOPE` takes exactly 1 scope"}, true},
		{"status takes nothing", "/latestwins status api", Command{Problem: "`/latestwins status` takes no arguments"}, true},
		{"unlock at most one", "/latestwins unlock api web", Command{Problem: "`/latestwins unlock [SCOPE]` takes at most 1 scope(s)"}, true},
		{"duplicate scope", "/latestwins deploy api api", Command{Problem: "scope `\"api\"` is named twice; name each scope once"}, true},

		// Injection attempts: nothing but a valid scope name gets through, and the reply quotes it.
		{"shell separator", "/latestwins deploy api;rm -rf /", Command{Problem: badScope(`"api;rm"`)}, true},
		{"command substitution", "/latestwins deploy $(whoami)", Command{Problem: badScope(`"$(whoami)"`)}, true},
		{"backticks", "/latestwins deploy `id`", Command{Problem: badScope(`"'id'"`)}, true},
		{"path traversal", "/latestwins unlock ../../prod/api", Command{Problem: badScope(`"../../prod/api"`)}, true},
		{"environment/scope smuggled", "/latestwins redeploy prod/api", Command{Problem: badScope(`"prod/api"`)}, true},
		{"flag", "/latestwins deploy --force", Command{Problem: badScope(`"--force"`)}, true},
		{"mention", "/latestwins deploy @org/admins", Command{Problem: badScope(`"@org/admins"`)}, true},
		{"markdown link", "/latestwins deploy [x](https://evil)", Command{Problem: badScope(`"[x](https://evil)"`)}, true},
		{"html", "/latestwins deploy <img/src=x>", Command{Problem: badScope(`"<img/src=x>"`)}, true},
		{"zero-width space", "/latestwins deploy\u200bapi", Command{Problem: "unknown command `\"deploy\\u200bapi\"`; " + Usage}, true},
		{"unicode scope", "/latestwins deploy аpi", Command{Problem: badScope(`"аpi"`)}, true},
		{"second command on the next line is not run", "/latestwins status\n/latestwins unlock api", Command{Name: CommandStatus}, true},
		{"long argument is cut in the reply", "/latestwins deploy " + strings.Repeat("x", 70) + "!", Command{Problem: badScope(`"` + strings.Repeat("x", 40) + `..."`)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseCommand(tt.body)
			if ok != tt.ok {
				t.Fatalf("ParseCommand(%q) ok = %v, want %v", tt.body, ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseCommand(%q) (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

func badScope(quoted string) string {
	return "`" + quoted + "` is not a scope name: use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit (e.g. api)"
}

func notAFreeze(quoted string) string {
	return "`" + quoted + "` is not a freeze: name it by its rollback's generation, a whole number such as 5, as the rollback's reply and the status give it"
}

func TestCommandMutating(t *testing.T) {
	t.Parallel()
	for name, want := range map[CommandName]bool{CommandDeploy: true, CommandRedeploy: true, CommandUnlock: true, CommandSkip: true, CommandRetry: true, CommandRollback: true, CommandUnfreeze: true, CommandStatus: false, CommandHelp: false} {
		if got := (Command{Name: name}).Mutating(); got != want {
			t.Errorf("%s mutating = %v, want %v", name, got, want)
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/latestwins deploy api", "/latestwins redeploy x\n/latestwins unlock", "/latestwins", "hi", "/latestwins deploy $(id)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c, ok := ParseCommand(body)
		if !ok {
			if c.Name != "" || c.Scopes != nil || c.Problem != "" {
				t.Fatalf("not addressed, yet %+v", c)
			}
			return
		}
		if (c.Name == "") == (c.Problem == "") {
			t.Fatalf("want exactly one of a name and a problem: %+v", c)
		}
		for _, s := range c.Scopes {
			if err := authority.ValidateScope(s); err != nil {
				t.Fatalf("scope %q passed: %v", s, err)
			}
		}
		if c.Environment != "" {
			if err := authority.ValidateEnvironment(c.Environment); err != nil {
				t.Fatalf("environment %q passed: %v", c.Environment, err)
			}
		}
		if c.Sha != "" && !core.IsCommitSha(c.Sha) {
			t.Fatalf("sha %q passed", c.Sha)
		}
		if c.Freeze < 0 || (c.Freeze != 0 && c.Name != CommandUnfreeze) {
			t.Fatalf("freeze %d passed for %q", c.Freeze, c.Name)
		}
		if c.Problem != "" && len(c.Problem) > 1200 {
			t.Fatalf("problem of %d bytes: untrusted text is not cut short", len(c.Problem))
		}
	})
}
