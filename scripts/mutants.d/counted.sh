# shellcheck shell=bash
# Sourced by scripts/mutants: generations from the environment's counter (internal/authority/
# counter.go, docs/design.md section 9). Every scope applies its intents in increasing
# generation: a one-scope accept reads the head after it takes its generation, fills a reserved
# entry that names its scope before it goes on, and takes a newer one when its scope holds one as
# new; a loser of its scope's race takes a new one; what the documents read do not hold, the
# counter says.

C=internal/authority/counter.go
mutant "a one-scope accept goes past a reserved entry of the log that names its scope" $C \
  's/\t\tif l\.Generation == 0 && slices\.ContainsFunc\(scopes,/\t\tif false \&\& l.Generation == 0 \&\& slices.ContainsFunc(scopes,/' \
  TestConformanceSplit/Disjoint/WideAcceptMeetsOneScope
mutant "a one-scope accept decides on the head it read before it took its generation" internal/authority/scoped.go \
  's/\t\tif attempt > 0 \{\n\t\t\tvar err error\n\t\t\tif head, err = a\.load\(ctx, EnvKey\(env\)\)/\t\tif attempt > 0 \&\& taken == 0 {\n\t\t\tvar err error\n\t\t\tif head, err = a.load(ctx, EnvKey(env))/' \
  TestConformanceSplit/Disjoint/OneScopeReadsTheHeadAfterItsGeneration
mutant "a one-scope accept writes its generation where a newer one is" $C \
  's/\tif e\.Taken <= top \{/\tif e.Taken == 0 {/' \
  TestConformanceSplit/Disjoint/OneScopeReadsTheHeadAfterItsGeneration
mutant "a loser of its scope's race keeps the generation it took" internal/authority/scoped.go \
  's/\t\t\ttaken = 0\n//' \
  TestConformanceSplit/Generations/LoserOfTheScopesRace
mutant "a request's generation beyond what the documents read hold is refused without asking the counter" internal/authority/authority.go \
  's/\tif d\.Env\.Counted && \(gen < 1 \|\| gen > top\) \{/\tif false \&\& d.Env.Counted \&\& (gen < 1 || gen > top) {/' \
  TestConformanceSplit/Authority/Property
mutant "an intent of several scopes is reserved past a full queue" internal/authority/transitions.go \
  's/\t\t\tif err := trial\.applyIntent\(in, top\+1, name, order, limit, now, &AcceptResult\{\}\); err != nil \{/\t\t\tif err := trial.applyIntent(in, top+1, name, order, limit, now, \&AcceptResult{}); false \&\& err != nil {/' \
  TestConformanceSplit/Property/Coordination
mutant "an attempt after a generation was taken decides on what prepare read before, whatever changed" internal/authority/scoped.go \
  's/\t\tif revs := v\.revisions\(\); prepare != nil && revs != prepared \{/\t\tif revs := v.revisions(); prepare != nil \&\& prepared == "" {/' \
  TestConformanceSplit/Disjoint/RepeatMeetsItsFirstDelivery

M=internal/authority/move.go
mutant "a move of the per-scope layout leaves the directory unmarked" $M \
  's/\tdir, err := a\.markDirMoved\(ctx, env, \*head\.Env\.Moved\)/\tdir, err := a.load(ctx, DirKey(env))/' \
  TestMove/AcceptOfANewScopePerScope
mutant "a move leaves a listed scope that has no document yet unmarked" $M \
  's/\t\tif work\.Env == nil \{\n\t\t\twork\.Env = blank\n/\t\tif work.Env == nil {\n\t\t\tif blank.Part == partScope {\n\t\t\t\treturn d, nil\n\t\t\t}\n\t\t\twork.Env = blank\n/' \
  TestMove/AcceptOfANewScopePerScope
mutant "an accept on a remembered head decides after its take on that head, not on the head read again" internal/authority/scoped.go \
  's/\t\tif attempt > 0 \{\n\t\t\tvar err error\n\t\t\tif head, err = a\.load/\t\tif attempt > 0 \&\& !headRemembered {\n\t\t\tvar err error\n\t\t\tif head, err = a.load/; s/\t\tif headRemembered \{\n\t\t\tcontinue/\t\tif headRemembered \&\& taken == 0 {\n\t\t\tcontinue/' \
  TestConformanceSplit/Disjoint/WarmAcceptMeetsAChangedHead
mutant "an accept keeps what it decided on a remembered head besides taking a generation" internal/authority/scoped.go \
  's/\t\tif headRemembered \{\n\t\t\tcontinue/\t\tif false \&\& headRemembered {\n\t\t\tcontinue/' \
  TestConformanceSplit/Disjoint/WarmJoinMeetsANewGate
