# shellcheck shell=bash
# Sourced by scripts/mutants: holds that last (a soak, approvals or a change window that outlast a
# pass's wait end it held, and the sweep starts it again once the gate lets it go) and break-glass
# (it waives those gates for one pending commit, nothing else).

mutant "a pass waits out a lasting hold instead of ending held" internal/pass/pass.go \
  's/if left <= 0 \|\| held\.Outlasts\(deadline\) \{/if left <= 0 {/' \
  TestGateEndsAtOnceOnAHoldThatOutlastsTheWait ./internal/pass/
mutant "approvals are not a lasting hold" internal/authority/decide.go \
  's/return r == ReasonSoaking \|\| r == ReasonApproval \|\| r == ReasonWindow/return r == ReasonSoaking || r == ReasonWindow/' \
  TestGateEndsAtOnceOnAHoldThatOutlastsTheWait ./internal/pass/
mutant "a held refusal leaves the scope looking active, so the sweep waits a stall period more" internal/authority/transitions.go \
  's/e\.Scopes\[name\]\.ActiveAt = time\.Time\{\}/_ = name/' \
  'TestConformance/Held/HeldPassIsStartedAgainOnceItMayGo'
mutant "break-glass waives nothing" internal/authority/decide.go \
  's/if ref\.BreakGlass != nil \{/if false \&\& ref.BreakGlass != nil {/' \
  'TestConformance/Held/BreakGlassWaivesTheGatesOnly'
mutant "break-glass on an environment without gates" internal/authority/breakglass.go \
  's/if d\.Env\.Gates == nil \{/if false \&\& d.Env.Gates == nil {/' \
  'TestConformance/Held/BreakGlassRefusesWhatItCannotDo'
mutant "the command line says locked for a lasting hold" internal/cli/verbs.go \
  's/if held\.Why\(\)\.Lasting\(\) \{/if false \&\& held.Why().Lasting() {/g' \
  TestHeldRunEndsAndBreakGlassLetsItThrough ./internal/cli/
mutant "the Action fails the job on a lasting hold" internal/action/action.go \
  's/case errors\.As\(err, &held\) && held\.Why\(\)\.Lasting\(\):/case errors.As(err, \&held) \&\& false:/' \
  TestHeldEndsTheStepWithoutFailing ./internal/action/
mutant "the deploy gate lets a commit through without its approvals" internal/authority/decide.go \
  's/if w := approvalWait\(v, ref\); w != nil \{/if w := approvalWait(v, ref); false \&\& w != nil {/' \
  'TestConformance/Property/Coordination'
mutant "the gate ignores a break-glass, in every join of the property test" internal/authority/decide.go \
  's/if ref\.BreakGlass != nil \{/if ref.BreakGlass != nil \&\& false {/' \
  'TestConformance/Property/Coordination'
mutant "the deploy gate lets a commit through outside its change window" internal/authority/decide.go \
  's/if w := windowWait\(v, ref, now\); w != nil \{/if w := windowWait(v, ref, now); false \&\& w != nil {/' \
  'TestConformance/Property/Coordination'
mutant "the deploy gate lets a commit through before its soak ends" internal/authority/decide.go \
  's/if w := soakWait\(v, ref, now\); w != nil \{/if w := soakWait(v, ref, now); false \&\& w != nil {/' \
  'TestConformance/Property/Coordination'
mutant "a commenter with write permission breaks the glass where admin is needed" internal/config/gates.go \
  's/return "admin"/return "write"/' \
  TestCommentBreakGlass ./app/
mutant "the status page's Break glass button lets anyone who may push through" internal/githubapp/oauth.go \
  's/return has\.AtLeast\(Permission\(level\)\), nil/return has != PermissionNone, nil/' \
  TestBreakGlassButton ./app/
