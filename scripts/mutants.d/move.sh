# shellcheck shell=bash
# Sourced by scripts/mutants. Moving an environment between stores (authority.Move, latestwins
# migrate --from --to): the source refuses every write once moved, a live lease is never moved out
# from under its pass, the intent ids go along, and older builds refuse the marker.

A=internal/authority/authority.go
V=internal/authority/move.go
mutant "a moved environment still takes writes" $A \
  's/\t\tif err := movedError\(doc\); err != nil \{\n\t\t\treturn nil, err\n\t\t\}\n//' \
  TestMove/CarriesStateHistoryAndIntents ./internal/store/memory/
mutant "a move ignores live leases" $V \
  's/if l := d\.Env\.Scopes\[name\]\.Lease; liveLease\(&l, now, a\.skew\) \{/if l := d.Env.Scopes[name].Lease; false \&\& liveLease(\&l, now, a.skew) {/' \
  TestMove/RefusedWhileLeased ./internal/store/memory/
mutant "a move leaves the intent records behind" $V \
  's/if l, ok := a\.store\.\(RecordLister\); ok \{/if l, ok := a.store.(RecordLister); ok \&\& false {/' \
  TestMove/CarriesStateHistoryAndIntents ./internal/store/memory/
mutant "a moved document keeps the layout older builds write over" internal/authority/codec.go \
  's/s\.V, s\.Mv = storedVersionMoved, /s.Mv = /' \
  TestMovedIsALayoutOlderBuildsRefuse ./internal/authority/
mutant "the App's overviews fail on a moved environment" app/internal/core/env.go \
  's/\t\tcase errors\.Is\(err, authority\.ErrMoved\):\n/\t\tcase false:\n/' \
  TestOverviewLeavesAMovedEnvironmentOut ./internal/apiclient/
mutant "a move of the per-scope layout copies the head and not the scopes" internal/authority/move.go \
  's/\tdocs = append\(docs, &Doc\{Key: DirKey\(env\)/\tdocs = docs[:0]\n\tdocs = append(docs, \&Doc{Key: DirKey(env)/' \
  TestMove/CarriesStateHistoryAndIntentsPerScope ./internal/store/memory/
mutant "a transition writes a scope's document that a move marked" internal/authority/scoped.go \
  's/\t\t\tif err := movedError\(v\.scopes\[name\]\); err != nil \{/\t\t\tif err := movedError(v.scopes[name]); false \&\& err != nil {/' \
  TestMove/TransitionThatReadTheStateBeforePerScope ./internal/store/memory/
mutant "a move of the per-scope layout marks the head and not the scopes" internal/authority/move.go \
  's/\t\tif err := a\.markScopeMoved\(ctx, env, name, \*head\.Env\.Moved\); err != nil \{/\t\tif err := error(nil); name == "" \&\& err != nil {/' \
  TestMove/TransitionThatReadTheStateBeforePerScope ./internal/store/memory/
