# shellcheck shell=bash
# Sourced by scripts/mutants: an unfreeze lifts only the freeze it names, on every surface.

mutant "an unfreeze lifts the current freeze whatever it names" internal/authority/rollback.go \
  's/\t\tif sc\.Freeze\.Generation != r\.Freeze \{/\t\tif false {/' \
  TestConformance/Rollback/UnfreezeLiftsOnlyTheFreezeItNames
mutant "an unfreeze that names no freeze lifts the current one" internal/authority/rollback.go \
  's/\t\tif sc\.Freeze\.Generation != r\.Freeze \{/\t\tif r.Freeze != 0 \&\& sc.Freeze.Generation != r.Freeze {/' \
  TestConformance/Rollback/UnfreezeLiftsOnlyTheFreezeItNames

# Each surface passes on the name it was given, and never fills in the current freeze itself.
mutant "the CLI's unfreeze drops the freeze it is named" internal/cli/rollback.go \
  's/Scope: scope, Freeze: freeze, Actor: c\.s\.actor/Scope: scope, Actor: c.s.actor/' \
  TestUnfreezeNamesTheFreeze ./internal/cli/
mutant "the CLI's unfreeze names the current freeze when --freeze is left out" internal/cli/rollback.go \
  's/\tf, err := u\.Unfreeze\(ctx, /\tif e, _ := c.view.Status(ctx, env); freeze == 0 \&\& e != nil \&\& e.Scopes[scope] != nil \&\& e.Scopes[scope].Freeze != nil {\n\t\tfreeze = e.Scopes[scope].Freeze.Generation\n\t}\n\tf, err := u.Unfreeze(ctx, /' \
  TestUnfreezeNamesTheFreeze ./internal/cli/
mutant "the unfreeze comment drops the freeze it names" app/internal/comments/comments.go \
  's/Scope: scope, Freeze: run\.cmd\.Freeze,\n\t\t\tActor: run\.actor/Scope: scope,\n\t\t\tActor: run.actor/' \
  TestUnfreezeCommandNamesTheFreeze ./app/
mutant "the API's unfreeze drops the freeze it is named" app/internal/api/api.go \
  's/Scope: req\.Scope, Freeze: req\.Freeze, Actor: wl\.Actor/Scope: req.Scope, Actor: wl.Actor/' \
  TestAPIUnfreezeNamesTheFreeze ./app/
mutant "the API client drops the freeze it is named" internal/apiclient/client.go \
  's/Scope: r\.Scope, Freeze: r\.Freeze, Reason: r\.Reason/Scope: r.Scope, Reason: r.Reason/' \
  TestAPIUnfreezeNamesTheFreeze ./app/
mutant "the Unfreeze form names the current freeze, not the one its page showed" app/internal/web/signin.go \
  's/\t_, err = a\.Auth\.Unfreeze\(ctx, /\tif e, _ := a.Auth.Status(ctx, pa.env); e != nil \&\& e.Scopes[pa.scope] != nil \&\& e.Scopes[pa.scope].Freeze != nil {\n\t\tfreeze = e.Scopes[pa.scope].Freeze.Generation\n\t}\n\t_, err = a.Auth.Unfreeze(ctx, /' \
  TestUnfreezeButtonNamesTheFreeze ./app/
mutant "the Unfreeze form names the current freeze, not the one its page showed (Chromium)" app/internal/web/signin.go \
  's/\t_, err = a\.Auth\.Unfreeze\(ctx, /\tif e, _ := a.Auth.Status(ctx, pa.env); e != nil \&\& e.Scopes[pa.scope] != nil \&\& e.Scopes[pa.scope].Freeze != nil {\n\t\tfreeze = e.Scopes[pa.scope].Freeze.Generation\n\t}\n\t_, err = a.Auth.Unfreeze(ctx, /' \
  TestRollbackAndUnfreezeInChromium ./app/browsertest/
mutant "the Unfreeze form leaves out the freeze its page showed" app/internal/web/status.go \
  's/<input type="hidden" name="freeze" value="\{\{\.Freeze\}\}">//' \
  TestUnfreezeButtonNamesTheFreeze ./app/
